"""`python -m pipelines`: the `accel` command, or with `--worker FILE` (first) the worker a launcher script
starts for an orchestrator (pipelines/core/harness/worker.py; never a command of the CLI)."""

import sys

from pipelines.core.config.request import FLAG

if sys.argv[1:2] == [FLAG]:
    from pipelines.core.cli.main import worker_main

    worker_main(sys.argv[2:])
else:
    from pipelines.core.cli.main import main

    main()
