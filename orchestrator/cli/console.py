"""The rich consoles the CLI renders to (stdout for results, stderr for errors and progress)."""

from __future__ import annotations

from rich.console import Console

__all__ = ["console", "err_console"]

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)
