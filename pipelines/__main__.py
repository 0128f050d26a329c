from pipelines.core.cli.main import main

main()
