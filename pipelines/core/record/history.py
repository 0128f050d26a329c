"""The results store: every finished repeat also lands in one SQLite file beside the records
(`RESULTS/history.sqlite`), so `accel history ID` answers "how did this number move over my runs?" without
re-reading every JSON-lines file.

Why SQLite and not DuckDB: it is in Python's standard library (every image and bare python3 has it), one
file, safe with several writers (ranks, two runs in one folder) through its own locking, and the store
holds a few rows per repeat, where a column engine buys nothing. The JSON-lines records stay the source of
truth: `sync` indexes any file the store has not seen in its current size and time (so records copied in
from another machine count too), and `rebuild` throws the store away and reads everything again.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any, Iterable

from pipelines.core.record import results

FILENAME = "history.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS repeats (
    key TEXT PRIMARY KEY,          -- run_id/experiment/variant/repeat
    run_id TEXT, experiment TEXT, variant TEXT, scale TEXT, repeat INTEGER, status TEXT,
    metrics TEXT,                  -- JSON: the record's scalar metrics
    fingerprint TEXT,              -- JSON: what may explain a change (torch, cpu, threads, git, image, noisy)
    source TEXT                    -- the JSON-lines file it came from
);
CREATE INDEX IF NOT EXISTS by_experiment ON repeats (experiment, variant, scale);
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER);
"""


def store_path(results_dir: Path) -> Path:
    return Path(results_dir) / FILENAME


def fingerprint(record: dict[str, Any]) -> dict[str, Any]:
    """The few environment facts that explain most changes of a number, flat, for a tooltip or a table."""
    env, machine = record.get("env") or {}, record.get("machine") or {}
    image = env.get("image") or {}
    return {"torch": env.get("torch"), "cpu": env.get("cpu_model"), "host": env.get("hostname"),
            "threads": env.get("torch_threads"), "openmp": env.get("openmp_runtime"),
            "git": (env.get("git_commit") or "")[:10] or None,
            "image": (image.get("digest") or image.get("target")) if isinstance(image, dict) else image,
            "noisy": machine.get("noisy"), "noisy_reasons": machine.get("noisy_reasons")}


def as_repeat(record: dict[str, Any]) -> dict[str, Any]:
    """A record as the store keeps it: its identity, scalar metrics and fingerprint (what `repeats` returns)."""
    scalars = {k: v for k, v in record["metrics"].items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {"run_id": record["run_id"], "experiment": record["experiment"], "variant": record["variant"],
            "scale": record["scale"], "repeat": record["repeat"], "status": record["status"], "metrics": scalars,
            "fingerprint": fingerprint(record)}


def _row(record: dict[str, Any], source: Path) -> tuple:
    r = as_repeat(record)
    key = f"{r['run_id']}/{r['experiment']}/{r['variant']}/{r['repeat']}"
    return (key, r["run_id"], r["experiment"], r["variant"], r["scale"], r["repeat"], r["status"],
            json.dumps(r["metrics"]), json.dumps(r["fingerprint"], default=str), str(source))


def _connect(results_dir: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(store_path(results_dir), timeout=30)
    connection.executescript(SCHEMA)
    return connection


def add(results_dir: Path, records: Iterable[dict[str, Any]], source: Path) -> None:
    """Index records just written to `source` (a repeat rewritten later replaces its row)."""
    with closing(_connect(results_dir)) as db, db:
        db.executemany("INSERT OR REPLACE INTO repeats VALUES (?,?,?,?,?,?,?,?,?,?)",
                       [_row(r, source) for r in records])
        stat = Path(source).stat()
        db.execute("INSERT OR REPLACE INTO files VALUES (?,?,?)", (str(source), stat.st_size, stat.st_mtime_ns))


def record_files(results_dir: Path) -> list[Path]:
    """The JSON-lines files of a results folder, sub-folders too, except reference/ ones (as the report)."""
    return sorted(p for p in Path(results_dir).rglob("*.jsonl") if "reference" not in p.relative_to(results_dir).parts)


def sync(results_dir: Path) -> list[str]:
    """Index every file the store has not seen as it is now; returns what could not be read, as the report
    says it ('file:line: reason')."""
    skipped: list[str] = []
    with closing(_connect(results_dir)) as db, db:
        seen = {path: (size, mtime) for path, size, mtime in db.execute("SELECT path, size, mtime_ns FROM files")}
        for path in record_files(results_dir):
            stat = path.stat()
            if seen.get(str(path)) == (stat.st_size, stat.st_mtime_ns):
                continue
            records = []
            for item in results.read_tolerant(path):
                if isinstance(item, results.Skipped):
                    skipped.append(item.reason)
                else:
                    records.append(item)
            db.execute("DELETE FROM repeats WHERE source = ?", (str(path),))
            db.executemany("INSERT OR REPLACE INTO repeats VALUES (?,?,?,?,?,?,?,?,?,?)",
                           [_row(r, path) for r in records])
            db.execute("INSERT OR REPLACE INTO files VALUES (?,?,?)", (str(path), stat.st_size, stat.st_mtime_ns))
        gone = [p for p in seen if not Path(p).exists()]
        db.executemany("DELETE FROM repeats WHERE source = ?", [(p,) for p in gone])
        db.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in gone])
    return skipped


def rebuild(results_dir: Path) -> list[str]:
    """The store made again from the JSON-lines records alone."""
    store_path(results_dir).unlink(missing_ok=True)
    return sync(results_dir)


def repeats(results_dir: Path, experiment: str) -> list[dict[str, Any]]:
    """Every stored ok repeat of `experiment`, oldest run first."""
    with closing(_connect(results_dir)) as db:
        rows = db.execute("SELECT run_id, variant, scale, repeat, metrics, fingerprint FROM repeats "
                          "WHERE experiment = ? AND status = 'ok' ORDER BY run_id, variant, repeat",
                          (experiment,)).fetchall()
    return [{"run_id": run_id, "experiment": experiment, "variant": variant, "scale": scale, "repeat": repeat,
             "status": "ok", "metrics": json.loads(metrics), "fingerprint": json.loads(finger)}
            for run_id, variant, scale, repeat, metrics, finger in rows]
