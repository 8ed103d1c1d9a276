"""A package's face that loads on first use (PEP 562): ``from orchestrator.plan import build_plan`` imports
``orchestrator.plan.deployments`` only then, so importing one module of a package never imports its siblings
(aiohttp alone takes most of a second: ``specsweep --help``, ``validate`` and ``plan`` start fast)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_face"]


def lazy_face(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package`` whose ``names`` (name -> module) load on first use."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__
