"""Shared fixtures: generated datasets in their real on-disk formats, `accel` in this process or as a real
subprocess, and one torch thread for in-process work."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The frozen Intel line's venv (make ipex-venv: the cpu-intel image's lock, torch 2.8); a test that runs in
# it is marked `ipex` and skipped with this reason where the venv was not built.
IPEX_PYTHON = REPO / ".venv-ipex" / "bin" / "python"
needs_ipex_venv = pytest.mark.skipif(not IPEX_PYTHON.is_file(), reason="no .venv-ipex: run `make ipex-venv` (make "
                                     "test builds it when ACCEL_TEST_IPEX=1)")


REAL_PROCESS_FOLDERS = ("e2e", "dist", "containers")


# Under pytest-xdist (`make test-fast`: one worker a core, up to 4; any tier with TEST_WORKERS=N), the tests
# of each module below run on one worker, in their order: they share one expensive module-scoped fixture (made
# once, not once a worker) or a machine-wide resource that two workers must not use at once. Podman: builds of
# the same image tags (the SLURM and network-namespace modules start containers of those images too).
ONE_WORKER = {
    "containers/test_container_build.py": "podman",
    "containers/test_container_launch.py": "podman",
    "containers/test_containers.py": "podman",
    "dist/test_dist_netns.py": "podman",
    "dist/test_slurm.py": "podman",
    "dist/test_model_parallel.py": "model-parallel",
    "dist/test_zero.py": "zero",
    "e2e/test_harness_book.py": "harness-book",
    "unit/test_ci_reports.py": "ci-reports",
    "unit/test_invariants.py": "invariants",
}


# Modules whose tests run with the machine to themselves under xdist (the `whole_machine` mark; a test may
# carry it too): their ranks busy-poll (oneCCL's workers) or a failure is detected by a timeout (a killed or lost
# host), so a second worker's run beside them turns a slow step into a failure (3 ccl ranks on 2 cores did).
WHOLE_MACHINE = ("dist/test_ccl.py", "dist/test_dist_netns.py")


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items):
    """Every test of the folders that start real processes counts as `slow`, whatever its own marks say: `make
    test-fast` (`-m 'canary or not slow'`) then holds the unit and refusal tests and the `canary` runs alone.
    The modules of ONE_WORKER get their xdist group, those of WHOLE_MACHINE the `whole_machine` mark."""
    for item in items:
        where = Path(item.path).relative_to(REPO / "tests")
        if where.parts[0] in REAL_PROCESS_FOLDERS:
            item.add_marker(pytest.mark.slow)
        if where.as_posix() in ONE_WORKER:
            item.add_marker(pytest.mark.xdist_group(ONE_WORKER[where.as_posix()]))
        if where.as_posix() in WHOLE_MACHINE:
            item.add_marker(pytest.mark.whole_machine)


class WholeMachine:
    """On an xdist worker, a test marked `whole_machine` runs while no other worker runs a test: a
    readers-writer lock over a file of this test run (fcntl.flock), every test's setup, call and teardown
    (module fixtures included) inside it, shared for the others. A worker waiting for the whole machine
    first holds the turnstile, which every test passes on its way in, so the others' next tests wait behind
    it instead of starving it."""

    def __init__(self, folder: Path):
        self.turnstile = open(folder / "accel-turnstile.lock", "a+")  # held open for the run
        self.machine = open(folder / "accel-whole-machine.lock", "a+")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        whole = item.get_closest_marker("whole_machine") is not None
        fcntl.flock(self.turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self.machine, fcntl.LOCK_EX if whole else fcntl.LOCK_SH)
        finally:
            fcntl.flock(self.turnstile, fcntl.LOCK_UN)
        try:
            return (yield)
        finally:
            fcntl.flock(self.machine, fcntl.LOCK_UN)


class LongestFirst:
    """On an xdist worker, the collection in order of recorded time, longest first (tests/budgets.toml's
    recorded times of `make test`; a group by the sum of its tests'). xdist's scheduler hands out work in the
    collection's order (`--no-loadscope-reorder`), so the long runs start early and the short ones fill the
    end, and the workers finish together. A group's tests stay together in pytest's order (its module-scoped
    fixtures are made once)."""

    @pytest.hookimpl(trylast=True)  # after pytest's own order by fixtures
    def pytest_collection_modifyitems(self, items):
        recorded = recorded_seconds()
        runs: dict[str, list] = {}  # a group's name, else the test's own id -> its tests, in pytest's order
        for item in items:
            group = item.get_closest_marker("xdist_group")
            runs.setdefault(group.args[0] if group else item.nodeid, []).append(item)
        weight = {key: sum(recorded.get(item.nodeid.split("@")[0], 0.0) for item in run)
                  for key, run in runs.items()}
        items[:] = [item for key in sorted(runs, key=lambda key: -weight[key]) for item in runs[key]]


def recorded_seconds() -> dict[str, float]:
    """{test id: seconds} of `make test`'s tier in tests/budgets.toml (tests over its `record_above_s`)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    budgets = tomllib.loads((REPO / "tests" / "budgets.toml").read_text())
    return budgets.get("recorded", {}).get("test", {})


def pytest_configure(config):
    """On an xdist worker: the LongestFirst order, the WholeMachine lock, and OpenMP threads that sleep when
    they wait. Two workers' runs share 2 cores, and an OpenMP thread that spins at a barrier holds a core the
    other run's thread needs (the checkpointing fidelity test: 71 s alone, 181 s in a two-worker run, 126 s
    beside the 2-rank FSDP test with OMP_WAIT_POLICY=PASSIVE). No test times anything, and a launcher's own
    OpenMP knobs still win."""
    if hasattr(config, "workerinput"):
        config.pluginmanager.register(LongestFirst(), "accel-longest-first")
        # the lock files in the run's own temporary folder, which the workers' folders are in (pytest keeps 3)
        config.pluginmanager.register(WholeMachine(Path(config.option.basetemp).parent), "accel-whole-machine")
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def accel(*args: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    """Run the real CLI in a fresh interpreter, as a user would."""
    return subprocess.run([sys.executable, "-m", "pipelines", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def accel_here(capfd, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`accel ARGS` in this process, through `cli.main` (what the console script calls: click's parsing, the
    checks, the error-to-exit-code mapping), with the output captured at the file descriptors. An exception
    that escapes is printed as its traceback with exit 1, as the interpreter would. The environment (with
    `env` added) and the working directory are those of a subprocess from `accel`, and are restored after."""
    from pipelines.core.cli import main as cli

    capfd.readouterr()  # what earlier code printed is not this command's output
    saved_env, saved_cwd, saved_execve = dict(os.environ), os.getcwd(), os.execve
    os.environ.update(env or {})
    os.chdir(REPO)
    os.execve = _no_exec  # `accel launch` execs its launcher: in this process that would replace pytest
    code = 0
    try:
        cli.main(list(args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception:  # noqa: BLE001  (a traceback is what the callers' assertions must catch)
        code = 1
        sys.stderr.write(traceback.format_exc())
    finally:
        os.execve = saved_execve
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(["accel", *args], code, out, err)


def _no_exec(path, argv, env):
    raise AssertionError(f"accel in this process reached exec of {path}: a command that starts a launcher needs "
                         "the real subprocess (conftest.accel)")


@pytest.fixture
def accel_in_process(capfd):
    """`accel_in_process(*args, env=None)`: like `accel`, in this process (no interpreter start-up)."""
    return lambda *args, env=None: accel_here(capfd, *args, env=env)


@pytest.fixture
def one_torch_thread():
    """torch's intra-op pool at one thread for the test: on a shared 2-core machine, two OpenMP threads of
    tiny kernels wait on each other's descheduled thread (a DenseNet forward: 4 s instead of 0.06 s)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def without_ccl(tmp_path: Path) -> dict:
    """An environment where accel's ccl binding does not load (a stand-in for one where `make venv` did not
    build it): a package of its name first on the path, whose import fails as an unbuilt extension's does."""
    shadow = tmp_path / "shadow" / "accel_ccl"
    shadow.mkdir(parents=True, exist_ok=True)
    (shadow / "__init__.py").write_text("raise ImportError('accel_ccl._C is not built (stand-in)')\n")
    return {"PYTHONPATH": f"{shadow.parent}:{REPO}"}


def records(results_dir: Path) -> list[dict]:
    out = []
    for path in sorted(Path(results_dir).glob("*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return out


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
    """Generated Fashion-MNIST and CIFAR-10 (torchvision's on-disk formats) and IMDB (aclImdb's), small."""
    from pipelines.core.data import generator

    root = tmp_path_factory.mktemp("data")
    generator.generate("fashion_mnist", root, train=600, test=200, seed=0)
    generator.generate("cifar10", root, train=500, test=200, seed=0)
    generator.generate("imdb", root, train=240, test=80, seed=0)
    return root


@pytest.fixture
def results_dir(tmp_path) -> Path:
    return tmp_path / "results"


@pytest.fixture
def procs():
    """Processes started in their own sessions (distutil.Procs), killed at the test's end whatever happened."""
    from distutil import Procs  # distutil imports this module

    group = Procs()
    yield group
    group.close()


def without_plan(stderr: str) -> list[str]:
    """stderr's lines after the plan block a run prints before work (`plan: ...` and its indented lines): a
    mistake found only while working (a hostile checkpoint at resume, a batch that does not fit) follows it."""
    return [line for line in stderr.strip().splitlines() if not line.startswith(("plan: ", "  "))]


def assert_refused(args, code: int, needle: str, results_dir: Path, data_root: Path, run=accel) -> None:
    """A refused run: the exit code, one `accel: error:` line naming the problem, no traceback, no result.
    `run`: `accel` (a real subprocess) or the `accel_in_process` fixture."""
    run = run(*args, "--data-root", str(data_root), "--results-dir", str(results_dir))
    lines = without_plan(run.stderr)
    assert run.returncode == code and len(lines) == 1 and lines[0].startswith("accel: error:"), run.stderr
    assert needle in lines[0] and "Traceback" not in run.stderr
    assert not results_dir.exists() or not list(results_dir.iterdir())
