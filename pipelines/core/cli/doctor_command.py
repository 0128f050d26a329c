"""`accel doctor`: this machine checked, read-only, for one of two things. Without a flag, for a distributed
run (distributed/doctor.py: shared memory, the rendezvous address and port, backends, OpenMP, SLURM, GPUs);
with `--bench`, for benchmarking (record/machine.py's fitness: load, governor, turbo, memory, throttling,
the same state every record keeps), then the machine card every bench record keeps (record/card.py: GEMM
ceilings, memory bandwidth, the cost of an op and of a parallel region, the cores). Each exits 1 with its
problems listed."""

from __future__ import annotations

import json
from pathlib import Path

import click

from pipelines.core.cli.args import PathArg, fail as _fail


@click.command()
@click.option("--addr", help="Rendezvous address to check (default: MASTER_ADDR or 127.0.0.1).")
@click.option("--port", type=int, help="Rendezvous port that must be free (default: MASTER_PORT or 29500).")
@click.option("--record", type=PathArg(), help="Also write the findings as JSON here.")
@click.option("--bench", is_flag=True,
              help="Instead: is this machine fit to benchmark (load, governor, turbo, memory, throttling)? "
                   "Then its machine card (GEMM ceilings, memory bandwidth, op costs, cores: about 1 s). "
                   "Read-only; exits 1 when it is not fit.")
def doctor(addr: str | None, port: int | None, record: Path | None, bench: bool) -> None:
    """Check this machine before a distributed run; exits 1 with the list of problems."""
    if bench:
        from pipelines.core.record import machine

        from pipelines.core.record import card

        found = machine.bench_fitness()
        width = max(len(what) for what, _, _ in found)
        for what, state, advice in found:
            click.echo(f"{what.ljust(width)}  {state}" + ("" if advice == "ok" else f"\n{' ' * width}  -> {advice}"))
        measured = card.measure()
        click.echo("\n".join(card.lines(measured)))
        if record:
            from pipelines.core.record import atomic

            atomic.write_text(record, json.dumps({"fitness": found, "card": measured}, indent=1) + "\n")
        if not machine.fit_to_benchmark(found):
            _fail("this machine is not fit to benchmark now; see the arrows above", 1)
        click.echo("fit to benchmark: timings taken now will not be flagged noisy by this machine's state")
        return
    from pipelines.core.distributed import doctor as checks

    findings = checks.run_checks(addr, port)
    click.echo(checks.render(findings))
    if record:
        checks.write_record(findings, record)
    problems = [f for f in findings if f["status"] == "problem"]
    if problems:
        _fail(f"{len(problems)} problem(s): " + "; ".join(f"{f['check']}: {f['detail']}" for f in problems), 1)
