"""The start-up hook: ``bisect_accuracy_hook.pth`` (written by ``bisect-accuracy install-hook``)
imports this module whenever an interpreter of the environment starts, as coverage.py does for
subprocesses.

With ``BISECT_ACCURACY_LEVEL`` unset, empty or 0 it does nothing, and it imports only ``os`` and
``sys`` (already loaded): every Python process of the environment pays for this module. When the
variable is set, it waits for ``torch._dynamo`` to be imported (a one-shot meta-path finder that
wraps that module's loader) and then starts script mode
(:func:`bisect_engine.script_mode.start_from_environment`), which routes every ``torch.compile``
through the checking backend until the interpreter exits. Processes that never import
``torch._dynamo`` never load torch on our account. The bisect-accuracy CLI calls
:func:`stand_down` and clears the variables, so its own processes and subprocesses never start it.
"""
from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing at every start-up costs time
if TYPE_CHECKING:
    from typing import Any, Callable

LEVEL_VARIABLE = "BISECT_ACCURACY_LEVEL"  # the same as levels.LEVEL_VARIABLE (kept import-free)
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


class AfterImport:
    """A one-shot meta-path finder: once ``name`` has been imported, ``callback(module)``."""

    def __init__(self, name: str, callback: Callable[[Any], None]):
        self.name = name
        self.callback = callback

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        _remove_finders()
        for finder in sys.meta_path:
            find_spec = getattr(finder, "find_spec", None)
            spec = find_spec(fullname, path, target) if find_spec is not None else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _RunAfterExec(spec.loader, self.callback)
                return spec
        return None


def _start(_module: Any) -> None:
    """Never raises: a broken hook must not break ``import torch``."""
    try:
        from . import script_mode

        script_mode.start_from_environment()
    except Exception as error:  # noqa: BLE001 - reported, and the program runs unchecked
        import logging

        logging.getLogger(__name__).warning("bisect-accuracy: the start-up hook failed: %s: %s",
                                            type(error).__name__, error)


def _remove_finders() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, AfterImport)]


def requested(environ: Any = os.environ) -> bool:
    return environ.get(LEVEL_VARIABLE, "").strip() not in ("", "0")


def install() -> None:
    """Start script mode now if torch._dynamo is loaded, else when it is; nothing if not requested."""
    if not requested():
        return
    if TRIGGER in sys.modules:
        _start(sys.modules[TRIGGER])
    elif not any(isinstance(f, AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, AfterImport(TRIGGER, _start))


def stand_down() -> None:
    """For the bisect-accuracy CLI: this process runs its own session, never the hook's."""
    _remove_finders()


install()
