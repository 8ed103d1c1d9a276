"""specsweep: a benchmark and sweep orchestrator for speculative-decoding LLM servers.

The import package is ``orchestrator``; the distribution and the console script are ``specsweep``.
"""

__version__ = "0.1.0"
