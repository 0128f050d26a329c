"""Versioned JSON-lines results: one file per run, one line per repeat, written atomically.

A reader never sees a half-written file: records go to a temporary file in the same folder, which is
renamed into place. The runner rewrites its file after every finished repeat, so what finished is kept.
A failed run writes a record with status "error" so a report shows the hole; a run stopped by a signal
writes "interrupted" for the repeat in flight (how far it got), which a report never compares. Optional
keys: `error`, `artifacts`, `notes`, `stopping` (a `--repeats auto` run: which rule stopped it),
`pairing` (the comparison's id, its round and the process that measured the arm: stats/record_pairing.py
pairs two arms' records by it) and `protocol` (how the timed steps were taken: `blocks` or `window`; records
written before it was added ran blocks at bench scale in a comparison's shared process, else one window) and
`card` (the machine card of the process that measured it: record/card.py; absent in older records).
Readers: `read` (one file, damage raises), `read_tolerant` (one file, damage skipped with a reason) and `load`
(every file of a results folder, as the report and `accel diff` read it).

Schema versions, and the words that changed (docs/design.md's glossary): `accel.result/3` counts rounds and
repeats apart in its config (`rounds`: rounds of processes, null in a process that measured one, or for a
command that ran in its own; `repeats`: repeats in the process; `auto`: the stopping rule set the count),
where /2 and /1 kept one `repeats` for both and `repeats_auto`. `accel.result/2` calls the id of the
comparison a record belongs to `pairing.comparison`; `accel.result/1` called it `pairing.group`. Every
reader takes all three and hands on version 3 (`upgrade`); files on disk are never rewritten.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from pipelines.core.errors import ConfigError
from pipelines.core.record import atomic
from pipelines.core.config.arm import Arm

SCHEMA = "accel.result/3"
OLDER_SCHEMAS = ("accel.result/1", "accel.result/2")  # read, upgraded in memory (`upgrade`)
STATUSES = ("ok", "error", "skipped", "interrupted")
REQUIRED_KEYS = ("schema", "status", "run_id", "experiment", "pipeline", "variant", "scale", "repeat",
                 "config", "metrics", "dist", "env")


class SchemaError(ValueError):
    pass


def new_run_id() -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def make_record(*, status: str, run_id: str, config: dict[str, Any], repeat: int,
                metrics: dict[str, Any], dist: dict[str, Any], env: dict[str, Any],
                error: dict[str, str] | None = None, artifacts: dict[str, Any] | None = None,
                notes: list[str] | None = None, machine: dict[str, Any] | None = None,
                energy: dict[str, Any] | None = None, pairing: dict[str, Any] | None = None,
                protocol: str | None = None, card: dict[str, Any] | None = None) -> dict[str, Any]:
    record = {
        "schema": SCHEMA, "status": status, "run_id": run_id,
        "experiment": config["experiment"], "pipeline": config["pipeline"],
        "variant": config["variant"], "scale": config["scale"], "repeat": repeat,
        "config": config, "metrics": metrics, "dist": dist, "env": env,
    }
    if error:
        record["error"] = error
    if artifacts:
        record["artifacts"] = artifacts
    if notes:
        record["notes"] = notes
    if machine is not None:  # the machine's state around the repeat and its noisy flag (record/machine.py)
        record["machine"] = machine
    if energy is not None:  # joules of the repeat, or why they are not measurable here (record/energy.py)
        record["energy"] = energy
    if pairing:  # which process and round measured it: what pairs it with other arms (stats/intervals.py)
        record["pairing"] = pairing
    if protocol:  # how its timed steps were taken: "blocks" or "window" (harness/recording.py PROTOCOLS)
        record["protocol"] = protocol
    if card is not None:  # what the machine can do: GEMM ceilings, bandwidth, op costs (record/card.py)
        record["card"] = card
    validate(record)
    return record


def validate(record: dict[str, Any]) -> None:
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise SchemaError(f"record lacks {', '.join(missing)}")
    if record["schema"] != SCHEMA:
        raise SchemaError(f"unknown schema {record['schema']!r} (this reader knows {SCHEMA})")
    if record["status"] not in STATUSES:
        raise SchemaError(f"unknown status {record['status']!r}")
    if record["status"] == "error" and "error" not in record:
        raise SchemaError("an error record must say what failed")
    for key in ("config", "metrics", "dist", "env"):
        if not isinstance(record[key], dict):
            raise SchemaError(f"{key} is a {type(record[key]).__name__}, not an object")
    for key, value in record["metrics"].items():
        if isinstance(value, float) and not math.isfinite(value):
            raise SchemaError(f"metric {key} is {value}; results hold finite numbers or null")


def upgrade(record: dict[str, Any]) -> dict[str, Any]:
    """A record of an older schema in this schema's words (the same dict, changed in place); any other
    record as it is. accel.result/1 -> /2: `pairing.group` is `pairing.comparison`. /2 -> /3: the config's
    `repeats_auto` is `auto`, and `rounds` is null (every older record was measured in one process, and its
    `repeats` counted the repeats there)."""
    if record.get("schema") == "accel.result/1":
        pairing = record.get("pairing")
        if isinstance(pairing, dict) and "group" in pairing:
            pairing["comparison"] = pairing.pop("group")
        record["schema"] = "accel.result/2"
    if record.get("schema") == "accel.result/2":
        config = record.get("config")
        if isinstance(config, dict):
            config["auto"] = config.pop("repeats_auto", False)
            config.setdefault("rounds", None)
        record["schema"] = SCHEMA
    return record


def check_writable(results_dir: Path) -> None:
    """Fail before training, not after, when results cannot be written; creates nothing."""
    atomic.check_folder(results_dir, "results dir", "pass --results-dir with a writable folder")


def result_path(results_dir: Path, experiment: str, run_id: str) -> Path:
    return results_dir / f"{experiment}--{run_id}.jsonl"


def dumps(record: dict[str, Any]) -> str:
    """One record as one JSON line; NaN and Infinity, which JSON cannot hold, are refused anywhere in it."""
    validate(record)
    try:
        return json.dumps(record, sort_keys=True, allow_nan=False) + "\n"
    except ValueError:
        raise SchemaError(f"record {Arm.of(record)} holds NaN or Infinity; "
                          "results hold finite numbers or null") from None


def write(path: Path, records: Iterable[dict[str, Any]]) -> Path:
    """Write all records at once, atomically (core/record/atomic.py); every record is validated first."""
    return atomic.write_text(path, "".join(dumps(record) for record in records))


def _parse(path: Path, number: int, line: str) -> dict[str, Any]:
    """One line -> a validated record; SchemaError names the file and line of any damage."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{path}:{number}: not JSON ({exc.msg}); half-written or damaged") from None
    if not isinstance(record, dict):
        raise SchemaError(f"{path}:{number}: not a JSON object")
    try:
        validate(upgrade(record))
    except SchemaError as exc:
        raise SchemaError(f"{path}:{number}: {exc}") from None
    return record


def read(path: Path) -> Iterator[dict[str, Any]]:
    """Yield validated records; a malformed line raises SchemaError naming file and line."""
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield _parse(path, number, line)


@dataclass(frozen=True)
class Skipped:
    """What `read_tolerant` yields for input it could not use: 'file[:line]: reason'."""

    reason: str


def read_tolerant(path: Path) -> Iterator[dict[str, Any] | Skipped]:
    """Like `read`, for readers that must go on past damage (the report): an unreadable file or a damaged
    line becomes a `Skipped` with the reason, and the valid lines around it are still yielded."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        yield Skipped(f"{path}: unreadable ({exc.__class__.__name__})")
        return
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield _parse(path, number, line)
        except SchemaError as exc:
            yield Skipped(str(exc))


@dataclass
class Loaded:
    records: list[dict[str, Any]]
    skipped: list[str]  # "file[:line]: reason" for everything that could not be used
    files: int


def load(results_dir: Path) -> Loaded:
    """Every valid record under results_dir (sub-folders too, except reference/ ones: those are compared
    with --against, never mixed in); damaged lines and unknown schemas are skipped, each with a reason."""
    root = Path(results_dir)
    if not root.is_dir():
        raise ConfigError(f"results dir {root} does not exist; run an experiment first "
                          "(e.g. make <id> ARGS='--scale bench') or pass --results-dir")
    loaded = Loaded([], [], 0)
    for path in sorted(root.glob("**/*.jsonl")):
        if "reference" in path.relative_to(root).parts[:-1]:
            continue
        loaded.files += 1
        for item in read_tolerant(path):
            if isinstance(item, Skipped):
                loaded.skipped.append(item.reason)
            else:
                loaded.records.append(item)
    return loaded
