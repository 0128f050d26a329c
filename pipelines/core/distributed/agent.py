"""torchrun's agent in this process: waits bounded by the run's timeout, its chatter in a log, a failure in
one line.

`launch/torchrun.sh` runs `python -m pipelines.core.distributed.agent --timeout-s N --log-dir DIR [--probe HOST:PORT]
-- TORCHRUN-ARGS` where plain torchrun would be `python -m torch.distributed.run TORCHRUN-ARGS`. What differs:

- The rendezvous is bounded by `-o timeout_s`, counted once. A node that is not the rendezvous host first
  proves HOST:PORT answers (`rendezvous.reach`, before torch is even imported); torchrun's rendezvous then
  gets what is left (static: `timeout`; c10d: `join_timeout` and `read_timeout`; torch's defaults are 600
  to 900 s, and its store client retries for about twice its timeout). An elastic round (NNODES=MIN:MAX)
  that has its MIN waits a quarter of what is left, at most torch's 30 s, for more (`last_call_timeout`).
- The ranks' streams are tee'd (torchrun's `--tee 3 --log-dir DIR`): each rank's stdout and stderr land in
  DIR/<run>/attempt_<n>/<local rank>/ and on the terminal, rank 0's lines as they are, the others' behind
  `[rankN]: `. The agent's own output (its logging, the C++ store's warnings with their stack frames,
  tracebacks) goes to DIR/agent.log only.
- torchrun's ChildFailedError traceback becomes one `accel: error:` line: the rank that failed (one killed
  by a signal first: the others failed because of it), its exit code or signal, what it said, where rank 0
  recorded the error, and DIR. The ranks' own `accel: error:` lines stay in their logs, summarised in that
  line, so the terminal gets exactly one. Each rank that failed left torchrun's error.json beside its logs
  (`distributed.ranks.Session.abort`). A run that succeeds removes DIR.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import sys
import threading
from pathlib import Path
from typing import Any, TextIO

from pipelines.core.errors import first_line
from pipelines.core.distributed.rendezvous import ROUND_VAR, Budget, reach, without_torch_figure

EXIT_FAILED = 1
RANK_PREFIX = "[rank${rank}]: "  # torchrun's template macro: the global rank
_RANK_LINE = re.compile(r"\[rank(\d+)\]: (.*)", re.S)
_RECORD = re.compile(r"error record (\S+)")
ERROR = "accel: error: "


class Console:
    """Where torchrun's tee threads write the ranks' lines (and torch's handlers the agent's): a rank's line
    goes to the terminal (rank 0's without its prefix), except `accel: error:` lines, which are kept by rank
    for the failure's one line; anything else is the agent's and goes to the log."""

    def __init__(self, terminal: TextIO, log: TextIO) -> None:
        self.terminal, self.log, self.lock = terminal, log, threading.Lock()
        self.errors: dict[int, list[str]] = {}

    def write(self, text: str) -> int:
        match = _RANK_LINE.match(text)
        with self.lock:
            if not match:
                self.log.write(text)
            elif match[2].startswith(ERROR):
                self.errors.setdefault(int(match[1]), []).append(match[2][len(ERROR):].strip())
            else:
                self.terminal.write(match[2] if match[1] == "0" else text)
                self.terminal.flush()
        return len(text)

    def flush(self) -> None:
        self.terminal.flush()


def _arguments(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="python -m pipelines.core.distributed.agent",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--timeout-s", type=float, required=True, help="the run's rendezvous wait (timeout_s)")
    parser.add_argument("--log-dir", type=Path, required=True, help="torchrun's log folder for this launch")
    parser.add_argument("--probe", help="HOST:PORT of the rendezvous host, for a node that is not it")
    split = argv.index("--") if "--" in argv else len(argv)
    return parser.parse_args(argv[:split]), argv[split + 1:]


def _agent_output_to(log_path: Path) -> tuple[TextIO, TextIO]:
    """This process's fd 2 (where the C++ store writes its warnings) and logging -> the log; returns it and
    a handle on the terminal's stderr. The ranks are unaffected: tee gives them files of their own."""
    log = open(log_path, "a", buffering=1, encoding="utf-8")
    terminal = os.fdopen(os.dup(2), "w", buffering=1, encoding="utf-8", errors="replace")
    os.dup2(log.fileno(), 2)
    logging.basicConfig(level=logging.INFO, stream=log, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.captureWarnings(True)
    return log, terminal


def _bound(args: argparse.Namespace, budget: Budget) -> None:
    """What is left of the budget as the rendezvous' own timeouts (later keys win in torchrun's parser)."""
    left = budget.left_whole_s()
    # an elastic round (NNODES=MIN:MAX) that has its MIN waits this long for more nodes (torch's default: 30 s)
    last_call = min(30, max(1, left // 4))
    waits = f"timeout={left}" if args.rdzv_backend == "static" else \
        f"join_timeout={left},read_timeout={left},last_call_timeout={last_call}"
    args.rdzv_conf = ",".join(part for part in (args.rdzv_conf, waits) if part)


def failure_text(failures: dict[int, Any], said: dict[int, list[str]]) -> tuple[str, int]:
    """One line for torchrun's failures (rank -> ProcessFailure) and what the ranks said; the exit code is
    the failed rank's when it means a user mistake (2) or cannot-run-here (3), else 1."""
    rank, failure = min(failures.items(), key=lambda item: (item[1].exitcode >= 0, item[1].timestamp, item[0]))
    how = (f"was killed by {failure.signal_name()}" if failure.exitcode < 0
           else f"exited with code {failure.exitcode}")
    line = f"rank {rank} (pid {failure.pid}) {how}"
    if said.get(rank):
        line += f": {said[rank][0]}"
    records = [m[1] for lines in said.values() for text in lines if (m := _RECORD.search(text))]
    if records and records[0] not in line:
        line += f"; rank 0 recorded the error in {records[0]}"
    return line, failure.exitcode if failure.exitcode in (2, 3) else EXIT_FAILED


def not_formed(node: int, endpoint: str, timeout_s: float, exc: BaseException) -> str:
    """The line for a rendezvous that failed before any rank ran: the user's timeout_s, torch's reason
    without torch's own (rounded-up) wait figure (`rendezvous.without_torch_figure`)."""
    return (f"node {node} could not form the group at {endpoint} within {timeout_s:g} s "
            f"({exc.__class__.__name__}: {without_torch_figure(first_line(exc))}); start every node with the "
            "same NNODES, MASTER_ADDR and MASTER_PORT")


_rounds_joined = 0  # c10d rounds this agent formed: after the first, a failing rendezvous is a group lost


def not_met_again(node: int, endpoint: str, timeout_s: float, exc: BaseException) -> str:
    """The line for a restart whose new round never formed: the rendezvous host (node 0) gone, or another
    node lost and not started again within the timeout."""
    resume = "with the same command to resume from the last checkpoint"
    if "Connection" in exc.__class__.__name__:
        why = first_line(exc).replace(" See inner exception for details.", "")
        return (f"node {node} lost its group: the rendezvous host {endpoint} (node 0) is gone "
                f"({exc.__class__.__name__}: {why}); start every node again {resume}")
    return (f"node {node} lost its group: after a restart, the other nodes did not come back to {endpoint} within "
            f"{timeout_s:g} s (a host lost); start it again {resume}")


def _rejoinable() -> None:
    """A c10d rendezvous that a replaced host can join (its agent new, the survivors' restarted):
    - after each round, its number goes into the environment the ranks start with (rendezvous.ROUND_VAR),
      the generation their store keys live under (ranks._attempt); torchrun gives them only its own
      restart count, which differs between a new agent and a restarted one;
    - the ranks' store is not the agents' shared one (TORCH_DISABLE_SHARE_RDZV_TCP_STORE): with it, torch
      publishes the store's address only in the first round, so a new agent joining a later round waits for
      it until the timeout and the survivors wait for the new agent. Each round's rank 0 hosts a new store
      on a free port instead."""
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous

    # Set here, not in launch/torchrun.sh: it belongs with this workaround, and with IMAGE= the agent runs
    # inside the container, which only a listed set of knobs crosses into (distributed/containers.py).
    os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    handler = dynamic_rendezvous.DynamicRendezvousHandler
    join = handler.next_rendezvous

    def next_rendezvous(self):
        info = join(self)
        os.environ[ROUND_VAR] = str(self._state_holder.state.round)
        global _rounds_joined
        _rounds_joined += 1
        return info

    handler.next_rendezvous = next_rendezvous


def _where(args: argparse.Namespace) -> tuple[int, str]:
    """(this node's rank, the rendezvous endpoint) as torchrun was told."""
    if args.rdzv_backend == "static":
        return args.node_rank, f"{args.master_addr}:{args.master_port}"
    return args.node_rank, args.rdzv_endpoint


def main(argv: list[str] | None = None) -> int:
    ours, torchrun_argv = _arguments(sys.argv[1:] if argv is None else argv)
    budget = Budget(ours.timeout_s)
    ours.log_dir.mkdir(parents=True, exist_ok=True)
    log, terminal = _agent_output_to(ours.log_dir / "agent.log")

    def fail(message: str, code: int = EXIT_FAILED) -> int:
        logging.error("%s", message)
        terminal.write(f"{ERROR}{message}; torchrun's log and each rank's output: {ours.log_dir}\n")
        return code

    if ours.probe:
        host, port = ours.probe.rsplit(":", 1)
        if why := reach(host, int(port), budget):
            node = torchrun_argv[torchrun_argv.index("--node-rank") + 1] if "--node-rank" in torchrun_argv else "?"
            return fail(f"node {node} could not reach the rendezvous host {ours.probe} within "
                        f"{ours.timeout_s:g} s ({why}); start node 0 first with the same MASTER_ADDR and "
                        "MASTER_PORT, or check the address and the firewall")
    from torch.distributed.elastic.multiprocessing.api import SignalException  # torch: seconds to import
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    args = parse_args(torchrun_argv)
    _bound(args, budget)
    if args.rdzv_backend == "c10d":
        _rejoinable()
    args.log_dir, args.tee, args.log_line_prefix_template = str(ours.log_dir), "3", RANK_PREFIX
    sys.stdout, sys.stderr = Console(sys.stdout, log), Console(terminal, log)  # torchrun tees ranks here
    try:
        run(args)
    except ChildFailedError as exc:
        logging.exception("torchrun's report:\n%s", exc.format_msg())  # what plain torchrun prints
        return fail(*failure_text(exc.failures, sys.stderr.errors))
    except SignalException as exc:
        logging.error("stopped by %s", exc.sigval.name)
        terminal.write(f"accel: interrupted: torchrun was stopped by {exc.sigval.name}; each rank's output: "
                       f"{ours.log_dir}\n")
        return 128 + int(exc.sigval)
    except Exception as exc:  # the rendezvous (static store, c10d) failed or timed out: first, or after a restart
        if _rounds_joined:
            logging.exception("torchrun's restart could not form a new round")
            return fail(not_met_again(*_where(args), ours.timeout_s, exc))
        logging.exception("torchrun failed before its ranks ran")
        return fail(not_formed(*_where(args), ours.timeout_s, exc))
    shutil.rmtree(ours.log_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
