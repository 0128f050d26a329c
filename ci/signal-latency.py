"""Seconds from a signal to the whole process group of a command to its exit: docs/design.md "What a
command costs in processes". The command starts in a session of its own; after AT seconds its group gets
SIGTERM (as SLURM's time limit or scancel would send it).

Usage: .venv/bin/python ci/signal-latency.py CHECKOUT AT [ACCEL-ARGS...]
  (default ACCEL-ARGS: run ch5-pipeline --device cpu --variant w8, whose 8 loader workers start for seconds)
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

checkout, at = sys.argv[1], float(sys.argv[2])
args = sys.argv[3:] or ["run", "ch5-pipeline", "--device", "cpu", "--variant", "w8"]
with tempfile.TemporaryDirectory() as results:
    process = subprocess.Popen([os.path.join(checkout, ".venv/bin/python"), "-m", "pipelines", *args,
                                "--results-dir", results], cwd=checkout, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(at)
    os.killpg(process.pid, signal.SIGTERM)
    signalled = time.monotonic()
    err = process.communicate(timeout=300)[1]
    said = [line for line in err.splitlines() if line.startswith("accel:")]
    print(f"SIGTERM at {at:g} s: exit {process.returncode} after {time.monotonic() - signalled:.1f} s; "
          f"{said[-1] if said else 'nothing said'}")
