"""A user's own patterns (``metrics.parsers`` in an experiment): named regular expressions whose groups become
figures of a window, read beside the engine's lines: ``log`` (compiling, parsing, aggregating)."""
