"""A one-shot import watcher: call back once a module has been imported. ``os`` and ``sys`` only.

The start-up hook (:mod:`bisect_engine.autostart`) and ``bisect-accuracy run SCRIPT`` both start a
session when the program imports ``torch._dynamo``; every Python start of an environment with the
hook installed imports this module, so it imports nothing.
"""
from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing at every start-up costs time
if TYPE_CHECKING:
    from typing import Any, Callable

TRIGGER = "torch._dynamo"


class _RunAfterExec:
    """A loader that executes the real loader's module, then calls back (module metadata keep the
    real loader, so nothing downstream sees this wrapper)."""

    def __init__(self, loader: Any, callback: Callable[[Any], None]):
        self.loader = loader
        self.callback = callback

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__loader__ = self.loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        self.callback(module)


def _spec_calling_back(finders: Any, fullname: str, path: Any, target: Any, callback: Callable[[Any], None]) -> Any:
    """The first of ``finders``' specs for ``fullname``, its loader wrapped to call back once the
    module's code has run (None: no finder has it)."""
    for finder in list(finders):
        find_spec = getattr(finder, "find_spec", None)
        spec = find_spec(fullname, path, target) if find_spec is not None else None
        if spec is not None:
            if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _RunAfterExec(spec.loader, callback)
            return spec
    return None


class AfterImport:
    """A one-shot meta-path finder: once ``name`` has been imported, ``callback(module)``."""

    def __init__(self, name: str, callback: Callable[[Any], None]):
        self.name = name
        self.callback = callback

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        remove_finders()
        return _spec_calling_back(sys.meta_path, fullname, path, target, self.callback)


def remove_finders() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, AfterImport)]


class EveryImport:
    """A meta-path finder kept until removed: each time one of ``names`` is imported,
    ``callback(module)`` once its code has run (script mode's AOTInductor entry points)."""

    def __init__(self, names: Any, callback: Callable[[Any], None]):
        self.names = frozenset(names)
        self.callback = callback
        self._finding = False

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in self.names or self._finding:
            return None
        self._finding = True  # the other finders are asked below; this one must not answer itself
        try:
            finders = [finder for finder in sys.meta_path if finder is not self]
            return _spec_calling_back(finders, fullname, path, target, self.callback)
        finally:
            self._finding = False
