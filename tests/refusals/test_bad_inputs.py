"""Bad input, one table: each case is what a careless or hostile user types, and the promise it must keep.

Every case checks the same five things: the exit code (2: a user mistake found before any work, 3: cannot
run here, 1: found mid-run, with an error record), exactly one line of complaint on stderr naming the
problem (launchers may also echo their command and knobs), no "Traceback", no partial or temporary file
left in the results folder, and no process left behind.

Cases that `accel` refuses itself run in this process through `cli.main`, the very function the console
script calls (click parsing, validation, the error-to-exit-code mapping), with stderr captured at the file
descriptor: a python start-up per case would cost seconds. Launcher cases and the ones that must train run
as real subprocesses.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import REPO
from distutil import processes_matching
from pipelines.core.config import experiments
from pipelines.core.train import checkpoint

PLANNED = next((e.id for e in experiments.all_experiments().values() if e.status == "planned"), None)
RUN = ("run", "ch2-baseline", "--scale", "smoke", "--data-root", "{data}", "--results-dir", "{results}")
CH3 = ("run", "ch3-compile-cnn-cpu", "--scale", "smoke", "--data-root", "{data}", "--results-dir", "{results}")
DDP = ("run", "ch8-ddp-template", "--scale", "smoke", "--dataset", "synthetic", "--results-dir", "{results}")
ECHO = re.compile(r"^(\+ |launch: [A-Z_]+=)")  # a launcher's echo of its command and knobs, not a complaint


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]  # accel arguments, or a launcher command when `via` is "launcher"
    code: int
    needle: str
    via: str = "cli"  # cli: in this process through cli.main; launcher: a subprocess (launch/*.sh, accel launch)
    env: dict = field(default_factory=dict)
    needs: tuple[str, ...] = ()  # tools that must be on PATH (mpirun, srun)
    slow: bool = False  # a launcher whose pre-flight imports torch (seconds): marked slow


def cli(name, argv, code, needle, **kw):
    return Case(name, tuple(argv), code, needle, **kw)


CASES = [
    # --- run: settings and their bounds
    cli("unknown-id", ["run", "ch2-nope"], 2, "unknown experiment id 'ch2-nope'"),
    cli("batch-0", [*RUN, "--batch-size", "0"], 2, "--batch-size must be at least 1, got 0"),
    cli("batch-negative", [*RUN, "--batch-size", "-3"], 2, "got -3"),
    cli("batch-text", [*RUN, "--batch-size", "abc"], 2, "'abc' is not a valid integer"),
    cli("batch-huge", [*RUN, "--batch-size", str(1 << 30)], 2, "--batch-size must be at most"),
    cli("steps-0", [*RUN, "--steps", "0"], 2, "--steps must be at least 1"),
    cli("steps-huge", [*RUN, "--steps", str(10**12)], 2, "--steps must be at most"),
    cli("epochs-0", [*RUN, "--epochs", "0"], 2, "--epochs must be at least 1"),
    cli("epochs-negative", [*RUN, "--epochs", "-1"], 2, "--epochs must be at least 1, got -1"),
    cli("epochs-1e20", [*RUN, "--epochs", "1e20"], 2, "'1e20' is not a valid integer"),
    cli("epochs-10^20", [*RUN, "--epochs", str(10**20)], 2, "--epochs must be at most 100,000"),
    cli("repeats-0", [*RUN, "--repeats", "0"], 2, "--repeats must be at least 1"),
    cli("repeats-huge", [*RUN, "--repeats", "5000"], 2, "--repeats must be at most 1,000"),
    cli("repeats-text", [*RUN, "--repeats", "many"], 2, "'many' is not a whole number or auto"),
    cli("repeats-auto-budget-0", [*RUN, "--repeats", "auto", "--budget-s", "0"], 2,
        "--budget-s 0 must be a positive number of seconds"),
    cli("repeats-auto-budget-negative", [*RUN, "--repeats", "auto", "--budget-s", "-30"], 2,
        "--budget-s -30 must be a positive number of seconds"),
    cli("repeats-auto-budget-nan", [*RUN, "--repeats", "auto", "--budget-s", "nan"], 2,
        "--budget-s nan must be a positive number of seconds"),
    cli("halfwidth-as-a-fraction", [*RUN, "--repeats", "auto", "--halfwidth", "0.05"], 2,
        "0.05 is in percent and must be from 0.5 to below 100 (e.g. 5 for ±5 %; 0.05 is 0.05 %, not 5 %)"),
    cli("halfwidth-100", ["compare", "ch2-baseline", "ch2-nobias", "--halfwidth", "100"], 2,
        "100 is in percent and must be from 0.5 to below 100"),
    cli("halfwidth-text", ["compare", "ch2-baseline", "ch2-nobias", "--halfwidth", "five"], 2,
        "'five' is not a number of percent"),
    cli("budget-without-auto", [*RUN, "--repeats", "3", "--budget-s", "60"], 2,
        "--budget-s 60 applies to --rounds auto (or --repeats auto) only"),
    # --rounds counts rounds of processes (bench, book), --repeats repeats in one process (smoke, book)
    cli("repeats-at-bench", ["run", "ch2-baseline", "--repeats", "3"], 2,
        "--repeats 3 counts repeats inside one process; at bench scale every round is a process of its own: "
        "pass --rounds 3"),
    cli("rounds-at-smoke", [*RUN, "--rounds", "3"], 2,
        "smoke scale runs in this process: pass --repeats 3, or --scale bench"),
    cli("rounds-and-repeats", ["run", "ch2-baseline", "--scale", "book", "--rounds", "2", "--repeats", "2"], 2,
        "--rounds 2 and --repeats 2 both given"),
    cli("rounds-0", ["run", "ch2-baseline", "--rounds", "0"], 2, "--rounds must be at least 1, got 0"),
    cli("rounds-text", ["run", "ch2-baseline", "--rounds", "many"], 2, "(e.g. --rounds 5, --rounds auto)"),
    cli("warmup-negative", [*RUN, "--warmup-steps", "-1"], 2, "--warmup-steps must be 0 or more"),
    cli("workers-negative", [*RUN, "--num-workers", "-1"], 2, "--num-workers must be 0 or more"),
    cli("workers-huge", [*RUN, "--num-workers", "5000"], 2, "--num-workers must be at most"),
    cli("seed-negative", [*RUN, "--seed", "-1"], 2, "--seed must be 0 or more"),
    cli("lr-nan", [*RUN, "--lr", "nan"], 2, "--lr must be a positive finite number, got nan"),
    cli("lr-inf", [*RUN, "--lr", "inf"], 2, "--lr must be a positive finite number, got inf"),
    cli("lr-minus-inf", [*RUN, "--lr", "-inf"], 2, "--lr must be a positive finite number"),
    cli("lr-negative", [*RUN, "--lr", "-1"], 2, "--lr must be a positive finite number, got -1"),
    cli("lr-zero", [*RUN, "--lr", "0"], 2, "--lr must be a positive finite number"),
    cli("lr-text", [*RUN, "--lr", "fast"], 2, "'fast' is not a valid float"),
    cli("dataset-unknown", [*RUN, "--dataset", "imagenet"], 2, "unknown dataset 'imagenet'"),
    cli("device-unknown", [*RUN, "--device", "tpu"], 2, "unknown device 'tpu'"),
    cli("scale-unknown", [*RUN[:2], "--scale", "huge"], 2, "'huge' is not one of"),
    cli("option-removed", [*RUN, "--prefetch-factor", "2"], 2, "No such option"),
    cli("variant-unknown", [*CH3, "--variant", "turbo"], 2, "unknown variant turbo"),
    cli("no-such-command", ["lst"], 2, "No such command"),
    # --- run: typed options
    cli("option-unknown", [*RUN, "-o", "model=lenet"], 2, "unknown option 'model'"),
    cli("option-not-kv", [*RUN, "-o", "bias"], 2, "not KEY=VALUE"),
    cli("option-bad-bool", [*RUN, "-o", "bias=maybe"], 2, "bias='maybe' is not a valid boolean"),
    cli("option-choice", [*CH3, "-o", "mode=ludicrous"], 2, "mode='ludicrous' is unknown"),
    cli("compile-backend", [*CH3, "-o", "backend=nope"], 2, "backend='nope' is not available"),
    cli("timeout-negative", [*DDP, "-o", "timeout_s=-5"], 2, "timeout_s must be between 1 and 86400"),
    cli("timeout-zero", [*DDP, "-o", "timeout_s=0"], 2, "timeout_s must be between 1 and 86400"),
    cli("timeout-nan", [*DDP, "-o", "timeout_s=nan"], 2, "timeout_s='nan' must be a finite number"),
    cli("timeout-inf", [*DDP, "-o", "timeout_s=inf"], 2, "timeout_s='inf' must be a finite number"),
    cli("timeout-huge", [*DDP, "-o", "timeout_s=1e9"], 2, "timeout_s must be between 1 and 86400"),
    cli("checkpoint-every-negative", [*DDP, "-o", "checkpoint_every=-1"], 2, "checkpoint_every must be at least 0"),
    cli("checkpoint-every-steps-negative", [*DDP, "-o", "checkpoint_every_steps=-1"], 2,
        "checkpoint_every_steps must be at least 0"),
    cli("checkpoint-dir-file", [*DDP, "-o", "checkpoint_dir={file}"], 2, "is a file, not a folder"),
    cli("checkpoint-dir-proc", [*DDP, "-o", "checkpoint_dir=/proc/accel-ckpt"], 2,
        "checkpoint_dir /proc/accel-ckpt is not writable"),
    cli("checkpoint-dir-readonly", [*DDP, "-o", "checkpoint_dir={readonly}/ckpt"], 2, "is not writable"),
    cli("dist-backend", [*DDP, "-o", "backend=tcp"], 2, "option backend='tcp' is unknown"),
    cli("dist-strategy", [*DDP, "-o", "strategy=zero"], 2, "option strategy='zero' is unknown"),
    cli("fsdp-checkpoints", [*DDP, "-o", "strategy=fsdp", "-o", "checkpoint_dir={tmp}/ck"], 2, "strategy=ddp only"),
    # --- run: paths
    cli("results-empty", [*RUN[:6], "--results-dir", ""], 2, "'--results-dir': is empty"),
    cli("results-file", [*RUN[:6], "--results-dir", "{file}"], 2, "is a file, not a folder"),
    cli("results-under-file", [*RUN[:6], "--results-dir", "{file}/sub"], 2, "is a file, not a folder"),
    cli("results-proc", [*RUN[:6], "--results-dir", "/proc/accel-results"], 2,
        "results dir /proc/accel-results is not writable"),
    cli("results-readonly", [*RUN[:6], "--results-dir", "{readonly}/r"], 2, "is not writable"),
    cli("results-full-disk", [*RUN[:6], "--results-dir", "{full}/r"], 2, "KiB free, less than"),
    cli("data-root-empty", [*RUN[:4], "--data-root", "", "--results-dir", "{results}"], 2, "'--data-root': is empty"),
    cli("data-missing", [*RUN[:4], "--data-root", "{tmp}/none", "--results-dir", "{results}"], 2,
        "accel data generate fashion_mnist"),
    cli("weights-missing", [*RUN, "--weights", "/nonexistent.pt"], 2, "weights file /nonexistent.pt does not exist"),
    cli("weights-list", [*RUN, "--weights", "{list_pt}"], 2, "holds a list, not a state_dict"),
    cli("weights-not-tensors", [*RUN, "--weights", "{dict_pt}"], 2, "holds a dict, not a state_dict"),
    cli("weights-garbage", [*RUN, "--weights", "{file}"], 2, "could not be read as a state_dict"),
    # --- run: damaged or hostile data folders (generated data, its checksum list rewritten or broken)
    cli("checksum-malformed", [*RUN[:4], "--data-root", "{bad_manifest}", "--results-dir", "{results}"], 2,
        "line 1 is not '<sha256>  <fashion_mnist file>'"),
    cli("checksum-empty", [*RUN[:4], "--data-root", "{empty_manifest}", "--results-dir", "{results}"], 2,
        "accel-checksums.sha256 is empty"),
    cli("origin-garbage", [*RUN[:4], "--data-root", "{garbage_origin}", "--results-dir", "{results}"], 2,
        'does not say "source"'),
    cli("origin-sourceless", [*RUN[:4], "--data-root", "{sourceless_origin}", "--results-dir", "{results}"], 2,
        'does not say "source"'),
    cli("data-truncated", [*RUN[:4], "--data-root", "{truncated}", "--results-dir", "{results}"], 2,
        "checksum mismatch"),
    cli("verify-garbage-origin", ["data", "verify", "fashion_mnist", "--root", "{garbage_origin}"], 2,
        'does not say "source"'),
    cli("verify-empty-checksums", ["data", "verify", "fashion_mnist", "--root", "{empty_manifest}"], 2, "is empty"),
    cli("verify-nothing", ["data", "verify", "--root", "{tmp}/none"], 2, "no dataset under"),
    # --- data generate / fetch
    cli("generate-unknown", ["data", "generate", "mnist", "--root", "{tmp}/d"], 2, "unknown dataset 'mnist'"),
    cli("generate-zero", ["data", "generate", "cifar10", "--train", "0", "--root", "{tmp}/d"], 2,
        "--train and --test must be at least 1"),
    cli("generate-huge", ["data", "generate", "cifar10", "--train", "10000000", "--root", "{tmp}/d"], 2,
        "--train and --test must be at most"),
    cli("generate-seed", ["data", "generate", "cifar10", "--seed", "-1", "--root", "{tmp}/d"], 2, "--seed must be 0"),
    cli("generate-root-file", ["data", "generate", "fashion_mnist", "--root", "{file}"], 2, "is a file, not a"),
    cli("generate-root-proc", ["data", "generate", "fashion_mnist", "--root", "/proc/accel-data"], 2,
        "cannot write datasets under /proc/accel-data"),
    cli("generate-root-empty", ["data", "generate", "fashion_mnist", "--root", ""], 2, "'--root': is empty"),
    cli("generate-full-disk", ["data", "generate", "fashion_mnist", "--root", "{full}/d"], 2,
        "No space left on device"),
    cli("fetch-unknown", ["data", "fetch", "mnist", "--root", "{tmp}/d"], 2, "unknown dataset 'mnist'"),
    # --- report
    cli("report-out-file", ["report", "--results-dir", "{records}", "--out", "{file}"], 2, "is a file, not a folder"),
    cli("report-out-proc", ["report", "--results-dir", "{records}", "--out", "/proc/accel-report"], 2,
        "--out /proc/accel-report is not writable"),
    cli("report-out-empty", ["report", "--results-dir", "{records}", "--out", ""], 2, "'--out': is empty"),
    cli("report-no-results", ["report", "--results-dir", "{tmp}/none"], 2, "does not exist"),
    cli("report-against-file", ["report", "--out", "{tmp}/o", "--against", "{file}"], 2, "is not a folder"),
    cli("report-reversal-alone", ["report", "--out", "{tmp}/o", "--fail-on-reversal"], 2, "needs --against"),
    cli("report-format-alone", ["report", "--format", "md"], 2, "need --out DIR"),
    cli("report-metrics-list", ["report", "--results-dir", "{records}", "--out", "{tmp}/o"], 0,
        "metrics is a list, not an object"),
    # --- cannot run here (exit 3)
    cli("needs-gpu", ["run", "ch3-compile-densenet-gpu", "--scale", "smoke", "--results-dir", "{results}"], 3,
        "no CUDA GPU is visible"),
    # backend=ccl where no binding loads: tests/dist/test_dist_contract.py (it needs an environment without one)
    *([cli("planned", ["run", PLANNED], 3, "planned, not implemented yet")] if PLANNED else []),
    cli("preflight-no-arm-fits", ["preflight", "--world-size", "2", "run", "ch9-cpu-gloo", "--variant", "ranks=4",
                                  "--scale", "smoke", "--dataset", "synthetic"], 3, "needs 4 processes"),
    # --- launchers: refused before torchrun / mpirun / srun start (the launchers' pre-flight)
    *[Case(f"{script}-{name}", (f"launch/{script}.sh", *argv), code, needle, via="launcher", env=env,
           needs=() if script == "torchrun" else (script,), slow=name in ("bad-option", "missing-data"))
      for script, count in (("torchrun", "NPROC"), ("mpirun", "NP"), ("srun", "NTASKS"))
      for name, argv, code, needle, env in (
          ("count-zero", DDP, 2, f"{count}=0 is not a positive integer", {count: "0"}),
          ("count-text", DDP, 2, f"{count}=abc is not a positive integer", {count: "abc"}),
          ("image-missing", DDP, 2, "IMAGE=/nonexistent.sif does not exist", {"IMAGE": "/nonexistent.sif"}),
          ("image-scheme", DDP, 2, "IMAGE=oci:accel: unknown scheme", {"IMAGE": "oci:accel"}),
          ("unknown-id", ("run", "ch8-nope"), 2, "unknown experiment id 'ch8-nope'", {}),
          ("bad-option", (*DDP, "-o", "timeout_s=-5"), 2, "timeout_s must be between 1", {}),
          ("missing-data", (*DDP[:4], "--data-root", "{tmp}/none", "--results-dir", "{results}"), 2,
           "accel data generate cifar10", {}))],
    Case("torchrun-too-many", ("launch/torchrun.sh", *DDP), 2, "NPROC=100000 is more than 4 processes per usable",
         via="launcher", env={"NPROC": "100000"}),
    Case("local-missing-data", ("launch/local.sh", *RUN[:4], "--data-root", "{tmp}/none", "--results-dir",
                                "{results}"), 2, "accel data generate fashion_mnist", via="launcher", slow=True),
    Case("local-image-scheme", ("launch/local.sh", *DDP), 2, "unknown scheme", via="launcher",
         env={"IMAGE": "oci:x"}),
    Case("accel-launch-missing-data", (sys.executable, "-m", "pipelines", "launch", "ch8-ddp-template", *DDP[2:4],
                                       "--data-root", "{tmp}/none", "--results-dir", "{results}"), 2,
         "accel data generate cifar10", via="launcher", slow=True),
    Case("accel-launch-unknown-id", (sys.executable, "-m", "pipelines", "launch", "ch8-nope"), 2,
         "unknown experiment id", via="launcher"),
    Case("accel-launch-bad-nproc", (sys.executable, "-m", "pipelines", "launch", "ch8-ddp-template", *DDP[2:]), 2,
         "NPROC=-1 is not a positive integer", via="launcher", env={"NPROC": "-1"}, slow=True),
]


PARAMS = [pytest.param(case, id=case.name, marks=[pytest.mark.slow] if case.slow else []) for case in CASES]


# ---------------------------------------------------------------------------------------------- the world

def _mount_tmpfs(folder: Path, options: str) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
                          capture_output=True).returncode == 0


def _damaged_copies(data_root: Path, tmp: Path) -> dict[str, Path]:
    """Generated Fashion-MNIST copies, each broken one way (the loader must refuse each in one line)."""
    raw = Path("FashionMNIST/raw")
    breakages = {
        "bad_manifest": lambda f: (f / "accel-checksums.sha256").write_text("zzz not a checksum line\n"),
        "empty_manifest": lambda f: (f / "accel-checksums.sha256").write_text(""),
        "garbage_origin": lambda f: (f / "accel-origin.json").write_text("{{{ not json"),
        "sourceless_origin": lambda f: (f / "accel-origin.json").write_text('{"dataset": "fashion_mnist"}'),
        "truncated": lambda f: (f / "train-images-idx3-ubyte").write_bytes(
            (f / "train-images-idx3-ubyte").read_bytes()[:1000]),
    }
    out = {}
    for name, breakage in breakages.items():
        root = tmp / name
        shutil.copytree(data_root / raw, root / raw)
        breakage(root / raw)
        out[name] = root
    return out


@pytest.fixture
def world(tmp_path, data_root, request):
    """Placeholders -> paths for one case; mounts (a full disk, a read-only folder) only when it uses them."""
    import torch

    case: Case = request.param
    text = " ".join(case.argv)
    paths = {"tmp": tmp_path, "data": data_root, "results": tmp_path / "results", "file": tmp_path / "a-file"}
    paths["file"].write_text("not a folder, not a state_dict")
    mounts = []
    for name, options in (("full", "size=64k"), ("readonly", "ro,size=64k")):
        if "{" + name + "}" in text:
            if not _mount_tmpfs(tmp_path / name, options):
                pytest.skip("a small tmpfs (full disk, read-only folder) needs root and mount")
            mounts.append(paths.setdefault(name, tmp_path / name))
    if "{list_pt}" in text or "{dict_pt}" in text:
        torch.save([1, 2, 3], paths.setdefault("list_pt", tmp_path / "list.pt"))
        torch.save({"weight": "not a tensor"}, paths.setdefault("dict_pt", tmp_path / "dict.pt"))
    if "{records}" in text:
        records = paths.setdefault("records", tmp_path / "records")
        records.mkdir()
        record = {"schema": "accel.result/1", "status": "ok", "run_id": "x", "experiment": "ch2-baseline",
                  "pipeline": "plain_training", "variant": "default", "scale": "smoke", "repeat": 0, "config": {},
                  "metrics": [1, 2], "dist": {}, "env": {}}
        (records / "bad.jsonl").write_text(json.dumps(record) + "\n")
    if any("{" + name + "}" in text for name in ("bad_manifest", "empty_manifest", "garbage_origin",
                                                 "sourceless_origin", "truncated")):
        paths.update(_damaged_copies(data_root, tmp_path))
    yield {k: str(v) for k, v in paths.items()}
    for mount in mounts:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


# ------------------------------------------------------------------------------------------------ running

def _in_process(argv: list[str], capfd) -> tuple[int, str]:
    """`accel ARGV` through cli.main in this process; an escaped exception is returned as its traceback."""
    from pipelines.core.cli import main as cli

    code = 0
    try:
        cli.main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001  (a traceback is exactly what the assertions below must catch)
        code = -1
        sys.stderr.write(traceback.format_exc())
    return code, capfd.readouterr().err


def _subprocess(argv: list[str], env: dict) -> tuple[int, str]:
    run = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "THREADS": "1", **env})
    return run.returncode, run.stderr


def _children() -> list[int]:
    """This process's child processes (a case run in-process must not leave any)."""
    found = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            found += [int(pid) for pid in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _assert_no_partial_files(results: Path, code: int) -> None:
    """Exit 2/3: nothing written at all. Exit 1: only whole result files, each line a JSON record."""
    if not results.exists():
        return
    leftovers = sorted(p.name for p in results.rglob("*") if p.is_file())
    if code in (2, 3):
        assert not leftovers, f"a refused run left files: {leftovers}"
        return
    assert all(name.endswith(".jsonl") and not name.startswith(".") for name in leftovers), leftovers
    for path in results.glob("*.jsonl"):
        assert all(json.loads(line)["status"] for line in path.read_text().splitlines())


@pytest.mark.parametrize("world", PARAMS, indirect=True)
def test_bad_input(world, request, capfd):
    case: Case = request.node.callspec.params["world"]
    if case.needle == "no CUDA GPU is visible":
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is present, so the no-GPU refusal cannot be shown")
    missing = [tool for tool in case.needs if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (make test installs it)")
    argv = [arg.format(**world) for arg in case.argv]
    env = {key: value.format(**world) for key, value in case.env.items()}
    before = set(_children())
    code, err = _in_process(argv, capfd) if case.via == "cli" else _subprocess(argv, env)
    lines = [line for line in err.strip().splitlines() if line.strip()]
    complaints = [line for line in lines if not ECHO.match(line)]
    assert "Traceback" not in err, err[-3000:]
    assert code == case.code, f"exit {code}, expected {case.code}: {err[-2000:]}"
    assert len(complaints) == 1, f"expected one line, got {len(complaints)}: {err[-2000:]}"
    assert case.needle in complaints[0], complaints[0]
    if case.code:
        assert complaints[0].startswith(("accel: error:", "launch: error:")), complaints[0]
    _assert_no_partial_files(Path(world["results"]), case.code)
    assert set(_children()) <= before, "a child process was left running"
    assert not processes_matching(world["tmp"]), "a process started by the case is still running"


def test_the_table_is_big_enough():
    assert len(CASES) >= 60
    assert len({case.name for case in CASES}) == len(CASES), "case names must be unique"


@pytest.mark.slow  # a real subprocess (accel, a CI script) or a full report: end to end
def test_a_full_disk_mid_run_leaves_the_error_record(tmp_path):
    """The checkpoint disk fills up after training started: exit 1, one line naming the file and ENOSPC, the
    error record in the results folder, no temporary file on the full disk."""
    small = tmp_path / "small"
    if not _mount_tmpfs(small, "size=3m"):
        pytest.skip("a small tmpfs needs root and mount")
    try:
        run = subprocess.run([sys.executable, "-m", "pipelines", *DDP[:-1], str(tmp_path / "results"),
                              "-o", f"checkpoint_dir={small}/ck"], cwd=REPO, capture_output=True, text=True,
                             timeout=300)
        assert run.returncode == 1 and "No space left on device" in run.stderr, run.stderr[-2000:]
        [record] = [json.loads(line) for path in (tmp_path / "results").glob("*.jsonl")
                    for line in path.read_text().splitlines()]
        assert record["status"] == "error" and "No space left on device" in record["error"]["message"]
        left = [path.name for path in (small / "ck").iterdir()]
        assert left in ([], [checkpoint.POSITION]), f"a temporary checkpoint was left on the full disk: {left}"
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)


def test_json_results_refuse_nan_and_infinity(tmp_path):
    """Values JSON cannot hold are never written, wherever in the record they hide."""
    from pipelines.core.record import results

    record = results.make_record(status="ok", run_id="r", config={"experiment": "x", "pipeline": "p",
                                                                  "variant": "v", "scale": "smoke",
                                                                  "lr": float("inf")},
                                 repeat=0, metrics={}, dist={}, env={})
    with pytest.raises(results.SchemaError, match="NaN or Infinity"):
        results.write(tmp_path / "x.jsonl", [record])
    assert not list(tmp_path.iterdir())


def test_make_venv_on_a_small_disk_refuses_before_writing(tmp_path):
    """`make venv` (and ipex-venv) on a disk without room for the 6-7 GB stack says so in one line and
    creates nothing; before this check, pip stopped half-way with "[Errno 28] No space left on device"
    and a half-built venv (CI hit it on a full shared disk)."""
    small = tmp_path / "small"
    if not _mount_tmpfs(small, "size=3m"):
        pytest.skip("a small tmpfs needs root and mount")
    try:
        for target, variable in (("venv", "VENV"), ("ipex-venv", "IPEX_VENV")):
            run = subprocess.run(["make", "--no-print-directory", target, f"{variable}={small}/env"],
                                 cwd=REPO, capture_output=True, text=True, timeout=60)
            makes_own = re.compile(r"make(\[\d+\])?: \*\*\*")  # make's "*** [target] Error 2", [1] when nested
            complaint = [line for line in run.stderr.splitlines() if not makes_own.match(line)]
            assert run.returncode == 2, run.stderr
            assert len(complaint) == 1 and "needs about" in complaint[0], run.stderr
            assert "GiB free" in complaint[0], run.stderr
            assert "Traceback" not in run.stderr and not list(small.iterdir()), "something was written"
    finally:
        subprocess.run(["umount", "-l", str(small)], capture_output=True)


@pytest.mark.parametrize("args", [(), ("abc", "/tmp", "x"), ("7", "/tmp")])
def test_the_disk_check_misused_says_its_usage(args):
    run = subprocess.run(["ci/need-free-disk.sh", *args], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert run.returncode == 2 and run.stderr.startswith("usage: ci/need-free-disk.sh GIB PATH WHAT"), run.stderr
    assert len(run.stderr.splitlines()) == 1
