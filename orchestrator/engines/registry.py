"""The engines specsweep knows, by name: the built-in ones and any a user's package adds.

An engine is registered as an entry point of the group ``specsweep.engines`` whose value is an object
implementing :class:`~orchestrator.engines.base.Engine` (the way vLLM finds its out-of-tree platforms:
``vllm/plugins/__init__.py`` ``load_plugins_by_group``). specsweep's own engines are registered the same way
in its pyproject.toml, and are also known here by module path, so a checkout used without installing still
finds them::

    [project.entry-points."specsweep.engines"]
    myengine = "mypackage.specsweep_engine:ENGINE"

:func:`get_engine` loads one engine on first use (an engine's package is imported only when it is asked for),
:func:`engine_names` lists every name (the experiment's ``engine:`` choices and ``specsweep parse --engine``),
:func:`register_engine` adds one at run time (tests, notebooks). A name given twice keeps the first: the
built-ins cannot be replaced by an entry point of the same name. :func:`builtin_packages` names the packages of
the built-in engines, from ``BUILTIN`` alone: the import contract of pyproject.toml (``engine-packages``,
tests/importcontracts.py) and tests/unit/test_engine_seam.py keep every other module out of them, so a new
built-in engine is its package and one line here.
"""

from __future__ import annotations

import importlib
import threading
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from orchestrator.engines.base import Engine

__all__ = [
    "BUILTIN",
    "GROUP",
    "builtin_packages",
    "engine_names",
    "generation",
    "get_engine",
    "is_engine",
    "register_engine",
]

GROUP = "specsweep.engines"

#: name -> "module:attribute" of specsweep's own engines, in the order they are listed.
BUILTIN: dict[str, str] = {
    "sglang": "orchestrator.engines.sglang:ENGINE",
    "sim": "orchestrator.engines.sglang:SIM",
    "vllm": "orchestrator.engines.vllm:ENGINE",
    "llamacpp": "orchestrator.engines.llamacpp:ENGINE",
}

#: The folder whose subpackages are engines: ``orchestrator.engines.<name>`` (its modules are shared, not engines).
_ENGINES_PACKAGE = "orchestrator.engines"


def builtin_packages() -> tuple[str, ...]:
    """The package of each built-in engine, sorted: ``orchestrator.engines.<first part>`` of each ``BUILTIN``
    target's module (``sim`` shares SGLang's), imported by none of them."""
    depth = len(_ENGINES_PACKAGE.split(".")) + 1
    return tuple(sorted({".".join(target.partition(":")[0].split(".")[:depth]) for target in BUILTIN.values()}))


_lock = threading.Lock()
_loaded: dict[str, Engine] = {}
_registered: dict[str, Engine] = {}
_found: dict[str, Any] | None = None  # name -> EntryPoint of the installed distributions
#: Changes whenever an engine is registered at run time: what is merged from every engine (the response readers,
#: orchestrator/engines/responses.py) is made again when it does.
_generation = 0


def _entry_points() -> dict[str, Any]:
    global _found
    with _lock:
        if _found is None:
            found: dict[str, Any] = {}
            for ep in entry_points(group=GROUP):
                found.setdefault(ep.name, ep)
            _found = found
        return _found


def engine_names() -> tuple[str, ...]:
    """Every engine's name: the built-ins first, then those registered at run time, then entry points."""
    names = list(BUILTIN)
    for name in [*_registered, *_entry_points()]:
        if name not in names:
            names.append(name)
    return tuple(names)


def is_engine(name: str) -> bool:
    return name in engine_names()


def register_engine(engine: Engine) -> None:
    """Make ``engine`` known under ``engine.name`` for the rest of this process."""
    global _generation
    with _lock:
        _registered[engine.name] = engine
        _loaded.pop(engine.name, None)
        _generation += 1


def generation() -> int:
    """A number that changes whenever an engine is registered at run time (see ``_generation``)."""
    return _generation


def _load(target: str) -> Any:
    module, _, attribute = target.partition(":")
    value: Any = importlib.import_module(module)
    for part in attribute.split(".") if attribute else ():
        value = getattr(value, part)
    return value


def get_engine(name: str) -> Engine:
    """The engine called ``name``; ``ConfigError`` naming the choices when there is none."""
    with _lock:
        if name in _loaded:
            return _loaded[name]
    from orchestrator.engines.base import Engine

    if name in BUILTIN:
        engine = _load(BUILTIN[name])
    elif name in _registered:
        engine = _registered[name]
    elif name in _entry_points():
        ep = _entry_points()[name]
        try:
            engine = ep.load()
        except Exception as exc:  # a user's package that fails to import: say which entry point
            raise ConfigError(f"engine {name!r} (entry point {ep.value!r} of {GROUP}) failed to load: {exc}") from exc
    else:
        raise ConfigError(f"unknown engine {name!r}; choose one of {', '.join(engine_names())}")
    if not isinstance(engine, Engine):
        raise ConfigError(f"engine {name!r} does not implement orchestrator.engines.base.Engine")
    with _lock:
        _loaded[name] = engine
    return engine
