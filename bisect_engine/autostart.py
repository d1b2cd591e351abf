"""The start-up hook: ``bisect_accuracy_hook.pth`` (written by ``bisect-accuracy install-hook``)
imports this module whenever an interpreter of the environment starts, as coverage.py does for
subprocesses.

With ``BISECT_ACCURACY_LEVEL`` unset, empty or 0 it does nothing, and it imports only ``os`` and
``sys`` (already loaded): every Python process of the environment pays for this module. When the
variable is set, it waits for ``torch._dynamo`` to be imported (a one-shot meta-path finder that
wraps that module's loader) and then starts script mode
(:func:`bisect_engine.script.session.start_from_environment`), which routes every ``torch.compile``
through the checking backend until the interpreter exits. Processes that never import
``torch._dynamo`` never load torch on our account. The program's first process runs under a
supervisor forked here, at start-up (:func:`bisect_engine.supervise.supervise_start_up`), so a native
crash of compiled code is a verdict with a report, not the program's silent death. The bisect-accuracy CLI calls
:func:`stand_down` and clears the variables, so its own processes and subprocesses never start it.
"""
from __future__ import annotations

import os
import sys

from .script.watch import TRIGGER, AfterImport, remove_finders

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing at every start-up costs time
if TYPE_CHECKING:
    from typing import Any

LEVEL_VARIABLE = "BISECT_ACCURACY_LEVEL"  # the same as levels.LEVEL_VARIABLE (kept import-free)
ROOT_PID_VARIABLE = "BISECT_ACCURACY_ROOT_PID"  # levels.ROOT_PID_VARIABLE: set by a session's first process
SUPERVISED_VARIABLE = "BISECT_START_UP_SUPERVISED"  # supervise.START_UP_SUPERVISED


def _start(_module: Any) -> None:
    """Never raises: a broken hook must not break ``import torch``."""
    try:
        from .script import session

        session.start_from_environment()
    except Exception as error:  # noqa: BLE001 - reported, and the program runs unchecked
        import logging

        from .script.messages import log_to_stderr

        log_to_stderr()  # one "bisect-accuracy:" prefix, from our handler
        logging.getLogger(__name__).warning("the start-up hook failed: %s: %s", type(error).__name__, error)


def requested(environ: Any = os.environ) -> bool:
    return environ.get(LEVEL_VARIABLE, "").strip() not in ("", "0")


def _first_process(environ: Any = os.environ) -> bool:
    """Whether this interpreter is the program's first process, which runs under a supervisor of its
    own (``supervise.supervise_start_up``: a native crash of its compiled code is a verdict, not its
    death). Not the program's subprocesses (a session's root is set), ranks (their launcher is the
    first process), a process already supervised, or the bisect-accuracy CLI (it supervises its runs)."""
    if not hasattr(os, "fork") or any(name in environ for name in (SUPERVISED_VARIABLE, ROOT_PID_VARIABLE, "RANK")):
        return False
    argv = getattr(sys, "orig_argv", None) or getattr(sys, "argv", None) or []
    return not any(arg == "bisect_engine.cli" or os.path.basename(arg).startswith("bisect-accuracy") for arg in argv)


def _out_dir() -> Any:
    """The run's output folder, as the session reads it (its default where the setting is malformed)."""
    from .script.levels import DEFAULT_OUT, settings_from_environment

    try:
        return settings_from_environment().out_dir
    except ValueError:
        from pathlib import Path

        return Path(DEFAULT_OUT)


def install() -> None:
    """Start script mode now if torch._dynamo is loaded, else when it is; nothing if not requested."""
    if not requested():
        return
    if _first_process():
        from .supervise import supervise_start_up

        supervise_start_up(_out_dir)  # returns in the child that runs the program
    if TRIGGER in sys.modules:
        _start(sys.modules[TRIGGER])
    elif not any(isinstance(f, AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, AfterImport(TRIGGER, _start))


def stand_down() -> None:
    """For the bisect-accuracy CLI: this process runs its own session, never the hook's."""
    remove_finders()


install()
