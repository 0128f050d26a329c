"""The shared library under every technique file, in rooms by responsibility. Imports only go down this list
(tests/unit/test_layers.py checks it):

    errors   the exceptions that end a command with one line and an exit code (top-level: every room uses it)
    spec     what a run is: catalog types, options, RunConfig
    record   what a run leaves: results records, environment fingerprint, atomic writes
    stats    what judges: intervals, stopping rule, pairing, rows, verdicts
    train    one process's training: models, loop, steps, clocks, checkpoints, memory
    data     datasets: formats, fetch/verify, generator, loaders
    dist     several processes: rank contract, rendezvous, sharding, affinity, agent
    run      entry to records: pipeline contract, plan, runner
    report   records to documents: tables, plots, report, drift
    cli      the `accel` command

No room names a chapter: the catalog (pipelines/catalog) holds the book, talk and course.
"""
