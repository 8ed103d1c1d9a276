"""specsweep's own import-linter contract types, named in pyproject.toml's ``contract_types``.

``engine_packages``: the engine seam (docs/architecture.md, "The engine seam"). It is import-linter's
``protected`` contract (importlinter/contracts/protected.py: the protected packages may be imported directly
only by the allowed importers and by their own modules) whose protected packages are not written in
pyproject.toml but read from the engine registry (``orchestrator.engines.registry.builtin_packages``, from
``BUILTIN``), and whose allowed importers are none: no module outside an engine's package imports it, neither
another engine's package nor the rest of specsweep. So a new built-in engine is its package and its line in
``BUILTIN``, and the contract covers it with no edit here or in pyproject.toml.

It lives beside the tests because it is a check of the code, run by ``lint-imports`` (which puts the working
folder on ``sys.path``), not part of the installed package, which does not depend on import-linter.
"""

from __future__ import annotations

from typing import Any

from importlinter.contracts.protected import ProtectedContract

from orchestrator.engines.registry import builtin_packages

__all__ = ["EnginePackagesContract"]


class EnginePackagesContract(ProtectedContract):
    """``protected`` over the registry's engine packages, with no allowed importer."""

    type_name = "engine_packages"

    def __init__(self, name: str, session_options: dict[str, Any], contract_options: dict[str, Any]) -> None:
        written = sorted(set(contract_options) & {"protected_modules", "allowed_importers"})
        if written:
            raise ValueError(f"{name}: {', '.join(written)} come from the engine registry, not the contract")
        options = {**contract_options, "protected_modules": list(builtin_packages()), "allowed_importers": []}
        super().__init__(name, session_options, options)
