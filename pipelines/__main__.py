from pipelines.core.cli import main

main()
