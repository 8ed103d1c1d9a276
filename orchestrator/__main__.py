"""``python -m orchestrator`` is the same as the ``specsweep`` console script."""

from orchestrator.cli.app import main

if __name__ == "__main__":
    main()
