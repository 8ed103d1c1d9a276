"""``python -m orchestrator.sim ...``: run the simulated speculative-decoding server (see ``runner``)."""

import sys

from orchestrator.sim.runner import main

if __name__ == "__main__":
    sys.exit(main())
