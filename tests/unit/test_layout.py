"""The package's top level holds the ground alone, at most eight modules (docs/architecture.md): a module that
belongs to a stage lives in that stage's package, and each top-level module is named in docs/architecture.md."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "orchestrator"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def test_the_top_level_holds_at_most_eight_modules_each_named_in_the_architecture() -> None:
    modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(modules) <= 8, modules
    text = ARCHITECTURE.read_text(encoding="utf-8")
    for name in modules:
        if name not in ("__init__.py", "__main__.py"):
            assert f"`{name}`" in text, f"{name} is not in docs/architecture.md"
