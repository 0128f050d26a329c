"""A worker's request: the file an orchestrator writes and hands to `python -m pipelines --worker FILE`.

The orchestrator (`accel run`, `accel compare`, `accel launch`) parses the user's command once and builds
its plans once. Each process it starts, through a launcher script, is a *worker*: it reads this file and
measures what it names, with nothing read from the command's words or from mode variables. The file holds:

- `run_id`: the records' run id, so the orchestrator knows the record files before the worker starts
  (`<results_dir>/<experiment>--<run_id>.jsonl`, rank 0's) and never searches a folder for them;
- `plans`: per experiment, its resolved configs (`RunConfig.to_record`), rebuilt as they are;
- `pairing`: which comparison, round and slot the process is (None: a launch of its own);
- `finish`: what the worker prints at the end (`verdict`, `json`, or `none` inside a comparison's round);
- `quiet`, `verbose`: rank 0's progress bars and per-epoch lines.

It is JSON, so a person can read what a process was asked, and so is the launchers' view of it
(`launcher_view`: device, data and results folders, which launch/_container.sh mounts).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from pipelines.core.errors import ConfigError

VERSION = 2  # 2: the pairing names its comparison (`comparison`, was `group`)
FLAG = "--worker"  # python -m pipelines --worker FILE
FINISHES = ("verdict", "json", "none")


@dataclass(frozen=True)
class Pairing:
    """The comparison a process belongs to, its round and its slot in that round; records carry it."""

    comparison: str
    round: int
    slot: int

    @property
    def process(self) -> str:
        return f"{self.comparison}:{self.round}:{self.slot}"


@dataclass(frozen=True)
class Request:
    run_id: str
    plans: tuple[tuple[str, tuple[dict[str, Any], ...]], ...]  # (experiment id, its config records)
    pairing: Pairing | None = None
    finish: str = "none"
    quiet: bool = True
    verbose: bool = False

    def __post_init__(self) -> None:
        if self.finish not in FINISHES:
            raise ValueError(f"finish {self.finish!r} is not one of {FINISHES}")
        if not self.plans or not all(configs for _, configs in self.plans):
            raise ValueError("a request names at least one experiment, each with at least one config")

    def to_json(self) -> str:
        doc = {"version": VERSION, "run_id": self.run_id,
               "plans": [{"experiment": experiment, "configs": list(configs)} for experiment, configs in self.plans],
               "pairing": None if self.pairing is None else vars(self.pairing),
               "finish": self.finish, "quiet": self.quiet, "verbose": self.verbose}
        return json.dumps(doc, indent=1, allow_nan=False) + "\n"


def request_path(results_dir: Path, run_id: str) -> Path:
    """Where a request lives: beside the records it asks for (the one folder every launcher, container and
    node already shares with the orchestrator), in a hidden folder the reports do not read."""
    return Path(results_dir) / ".requests" / f"{run_id}.json"


def read(path: str | Path) -> Request:
    """The request in `path`; ConfigError (one line) for a file that is missing or not a request."""
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"worker request {path} does not exist on this host; every node needs the results "
                          "folder the orchestrator wrote it to (a shared folder, or RESULTS_DIR)") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"worker request {path} cannot be read ({exc})") from None
    if not isinstance(doc, dict) or doc.get("version") != VERSION:
        raise ConfigError(f"worker request {path} is not a version-{VERSION} request (written by another "
                          "version of accel?)")
    try:
        pairing = doc.get("pairing")
        return Request(run_id=str(doc["run_id"]),
                       plans=tuple((p["experiment"], tuple(p["configs"])) for p in doc["plans"]),
                       pairing=None if pairing is None else Pairing(**pairing),
                       finish=doc.get("finish", "none"), quiet=bool(doc.get("quiet", True)),
                       verbose=bool(doc.get("verbose", False)))
    except (KeyError, TypeError, ValueError) as exc:  # a key missing, a value of the wrong shape
        raise ConfigError(f"worker request {path} is not a whole request ({exc.__class__.__name__}: {exc})") from None


def from_args(args: Sequence[str]) -> Request | None:
    """The request named by `--worker FILE` in a launcher's arguments, else None."""
    args = list(args)
    if FLAG in args and args.index(FLAG) + 1 < len(args):
        return read(args[args.index(FLAG) + 1])
    return None


def launcher_view(request: Request) -> dict[str, str]:
    """What a launcher reads from the run: the device, the data and results folders and the checkpoint folder
    (the first config's: every arm of one process shares them)."""
    first = request.plans[0][1][0]
    return {"--device": str(first.get("device") or ""), "--data-root": str(first.get("data_root") or ""),
            "--results-dir": str(first.get("results_dir") or ""),
            "checkpoint_dir": str((first.get("options") or {}).get("checkpoint_dir") or "")}
