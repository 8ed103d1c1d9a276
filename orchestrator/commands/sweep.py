"""`specsweep sweep`: not wired yet (placeholder while the package is being built)."""

import typer


def register(app: typer.Typer) -> None:
    """Placeholder: registers nothing until the command lands."""
