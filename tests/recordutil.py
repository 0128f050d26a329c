"""Hand-made result records for report, drift and interrupt tests: a golden record's shape with chosen
step times, so ratios, intervals and verdicts are known in advance; and CPU_REFERENCES, the committed CPU
references that the drift and reference-script tests read."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from conftest import REPO
from pipelines.core.stats import rows as stats_rows
from pipelines.core.record.results import load

GOLDEN = json.loads((REPO / "tests" / "golden" / "result_v3.json").read_text())
CPU_REFERENCES = sorted((REPO / "results" / "reference").glob("cpu-*-bench"))  # one per machine class


SAMPLES = 64  # the golden record's batch size x world size


def steps(ratio: float, count: int = 30, spread: float = 0.02) -> list[float]:
    """Deterministic step times of an arm `ratio` times faster than 1000 samples/s, +-spread jitter."""
    base = SAMPLES / 1000.0 / ratio
    return [base * (1 + spread * ((i * 7) % 5 - 2) / 2) for i in range(count)]


def record(experiment: str, variant: str, throughput: float | None = None, repeat: int = 0,
           accuracy: float = 40.0, step_times: list[float] | None = None, **env) -> dict:
    """The golden record as one repeat of an arm; with step_times, the newer schema's per-step fields."""
    rec = copy.deepcopy(GOLDEN)
    rec.update(experiment=experiment, variant=variant, repeat=repeat)
    rec["config"].update(experiment=experiment, variant=variant)
    if step_times is None:  # the older schema: no per-step fields (the golden record has them)
        for key in ("step_times_s", "samples_per_step"):
            rec["metrics"].pop(key, None)
    else:
        rec["metrics"].update(step_times_s=step_times, samples_per_step=SAMPLES,
                              measured_steps=len(step_times))
        throughput = SAMPLES * len(step_times) / sum(step_times)
    rec["metrics"].update(throughput_samples_per_s=throughput, test_accuracy_pct=accuracy)
    rec["env"].update(env)
    return rec


def write(folder: Path, name: str, records: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def rows_for(folder: Path, only=None) -> dict[tuple[str, str], stats_rows.Row]:
    return {(r.experiment, r.variant): r for r in stats_rows.build(load(folder), only)}


def table_rows(markdown: str, section: str) -> list[list[str]]:
    """The cells of the first table under `## section` (tabulate pads them; this strips)."""
    text = markdown.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in text.splitlines() if line.startswith("|")][2:]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines]


def ch2(folder: Path, ratios: tuple[float, ...] = (1.18,), old: bool = False, **env) -> None:
    """ch2-baseline at 1000 samples/s and ch2-nobias at `ratios` (one per repeat) times that."""
    if old:  # the older schema: throughput only, no per-step times
        base = [record("ch2-baseline", "baseline", 1000.0 + d, i) for i, d in enumerate((-10, 10))]
        arm = [record("ch2-nobias", "nobias", 1000.0 * r, i, **env) for i, r in enumerate(ratios * 2)]
    else:
        base = [record("ch2-baseline", "baseline", repeat=i, step_times=steps(1.0)) for i in range(3)]
        arm = [record("ch2-nobias", "nobias", repeat=i, step_times=steps(r), **env)
               for i, r in enumerate(ratios * 3 if len(ratios) == 1 else ratios)]
    write(folder, "base", base)
    write(folder, "nobias", arm)


def drift_pair(tmp_path: Path, mine: float, theirs: float, **ref_env) -> tuple[Path, Path]:
    ch2(tmp_path / "mine", (mine,))
    ch2(tmp_path / "ref", (theirs,), **ref_env)
    for rec_file in (tmp_path / "ref").glob("*.jsonl"):  # the reference's machine class (or another one)
        recs = [json.loads(line) for line in rec_file.read_text().splitlines()]
        for rec in recs:
            rec["env"].update(ref_env)
        write(tmp_path / "ref", rec_file.stem, recs)
    return tmp_path / "mine", tmp_path / "ref"
