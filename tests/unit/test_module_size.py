"""No module of the package over 800 lines (the project's rule, issue 51): a module that grows past it is split
by moving a cohesive group of its functions into a new module."""

from __future__ import annotations

from pathlib import Path

LIMIT = 800
PACKAGE = Path(__file__).resolve().parents[2] / "orchestrator"


def module_sizes(root: Path) -> dict[str, int]:
    """Lines of each ``.py`` file under ``root``, by its path relative to ``root``'s parent."""
    return {
        str(path.relative_to(root.parent)): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(root.rglob("*.py"))
    }


def test_no_module_passes_800_lines() -> None:
    sizes = module_sizes(PACKAGE)
    assert len(sizes) > 50  # the package itself, not an empty glob
    over = {name: lines for name, lines in sizes.items() if lines > LIMIT}
    assert not over, f"modules over {LIMIT} lines (split them): {over}"


def test_the_count_sees_a_module_over_the_limit(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "big.py").write_text("x = 1\n" * (LIMIT + 1))
    (package / "small.py").write_text("x = 1\n" * LIMIT)
    assert module_sizes(package) == {"pkg/small.py": LIMIT, "pkg/sub/big.py": LIMIT + 1}
