"""``bisect-accuracy run SCRIPT ARGS``: the file runs as ``python SCRIPT ARGS`` would run it.

Its own ``__main__`` (``runpy.run_path``), ``sys.argv = [SCRIPT, *ARGS]``, its folder first on
``sys.path``, the working directory unchanged; its exit status (``SystemExit`` codes, 1 with
Python's traceback when it raises). Torch-free on purpose, like the start-up hook: the script
imports torch itself, after whatever environment it sets up first (``TORCH_LOGS``,
``OMP_NUM_THREADS``, ...). The checking session starts when the script imports ``torch._dynamo``
(the hook's one-shot import watcher), so the command line and ``BISECT_ACCURACY_LEVEL`` share one
path: :func:`bisect_engine.script.session.start_session`.
"""
from __future__ import annotations

import contextlib
import logging
import runpy
import os
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from ..errors import Interrupted
from ..output.folder import OutputFolder
from .messages import DivergenceStop
from .watch import TRIGGER, AfterImport
from .levels import ScriptSettings
from .processes import hook_travels
from .ranks import rank_from_environment

if TYPE_CHECKING:
    from ..progress import Progress
    from .session import ActiveSession

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class ScriptOutcome:
    exit_code: int  # the script's own, or 1 when stopped at a divergence, 128+N on a signal
    report: dict[str, Any]
    stopped: bool
    message: str | None  # the script's traceback, or its SystemExit message, for stderr
    internal_error: str | None
    interrupted: str | None = None  # "SIGINT" / "SIGTERM" when a signal ended the script


@contextlib.contextmanager
def _as_main(path: Path, argv: Sequence[str]) -> Iterator[None]:
    """``sys.argv`` and ``sys.path[0]`` as ``python SCRIPT ARGS`` sets them; restored after."""
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [str(path), *argv]
    sys.path.insert(0, str(path.resolve().parent))
    try:
        yield
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path


OS_EXIT_NOTE = "bisect-accuracy: note: the program ended itself with os._exit"


class ProgramExit(BaseException):
    """The program called ``os._exit(code)`` in its main thread: the run ends there, but this tool
    still finishes its report and summary first (a forked child or another thread exits as usual)."""

    def __init__(self, code: int):
        super().__init__(code)
        self.code = code


@contextlib.contextmanager
def _os_exit_reported() -> Iterator[None]:
    real, pid = os._exit, os.getpid()

    def reported_exit(code: int) -> None:
        if os.getpid() != pid or threading.current_thread() is not threading.main_thread():
            real(code)
        raise ProgramExit(code)

    os._exit = reported_exit  # type: ignore[assignment]
    try:
        yield
    finally:
        os._exit = real


def exit_status(code: Any) -> tuple[int, str | None]:
    """What Python makes of ``SystemExit(code)``: (status, message for stderr)."""
    if code is None:
        return 0, None
    if isinstance(code, int):
        return code, None
    return 1, str(code)


def script_traceback(error: BaseException, path: Path) -> str:
    """The traceback Python would print for the script: the frames above it (ours, runpy) dropped."""
    tb = error.__traceback__
    script = str(path.resolve())
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb or error.__traceback__))


def _run_as_main(path: Path, argv: Sequence[str]) -> tuple[int, str | None, bool, str | None]:
    """(exit status, message, stopped at a divergence, signal) of running the file as ``__main__``."""
    with _as_main(path, argv), _os_exit_reported():
        try:
            runpy.run_path(str(path.resolve()), run_name="__main__")
        except ProgramExit as exit:
            return exit.code, (f"{OS_EXIT_NOTE}({exit.code}); "
                               "its calls checked until then are in the report"), False, None
        except DivergenceStop:
            return 1, None, True, None
        except SystemExit as exit:
            return (*exit_status(exit.code), False, None)
        except KeyboardInterrupt as error:  # the script's own Ctrl-C: its traceback, exit 130 as under python
            return 130, script_traceback(error, path), False, "SIGINT"
        except Interrupted as error:  # SIGTERM, through the CLI's handler
            return error.exit_code, None, False, error.name
        except Exception as error:  # the script's own exception: Python's traceback, exit 1
            return 1, script_traceback(error, path), False, None
    return 0, None, False, None


@contextlib.contextmanager
def _session_from_dynamo_import(start: Any) -> Iterator[None]:
    """Call ``start()`` once ``torch._dynamo`` is imported (at once if it already is)."""
    if TRIGGER in sys.modules:
        start(sys.modules[TRIGGER])
        yield
        return
    finder = AfterImport(TRIGGER, start)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)


def run_script(path: Path, argv: Sequence[str], settings: ScriptSettings,
               progress: Progress | None = None, folder: OutputFolder | None = None) -> ScriptOutcome:
    """Run ``path`` as ``python path ARGS`` would, every compiled graph checked; ``folder``: the
    output folder, already opened (locked and vetted) by the caller."""
    script, rank = path.resolve(), rank_from_environment()
    active: list[ActiveSession] = []
    failures: list[str] = []

    def start(_module: Any) -> None:
        try:
            from .session import start_session

            active.append(start_session(settings, script, argv, "cli", progress, rank, folder))
        except Exception as error:  # noqa: BLE001 - never break the script's import of torch
            failures.append(f"starting the session: {type(error).__name__}: {error}")
            log.error("%s", traceback.format_exc())

    # the script's children get the same checks (under a launcher each rank's children are not handed them)
    travels = hook_travels(settings) if rank is None else contextlib.nullcontext()
    with _session_from_dynamo_import(start), travels:
        try:
            exit_code, message, stopped, interrupted = _run_as_main(path, argv)
        finally:
            for started in active:
                started.close()
    from .session import Session

    session = active[0].session if active else Session(settings, script, argv, "cli", progress, rank, folder)
    session.interrupted = interrupted
    if message and message.startswith(OS_EXIT_NOTE):
        session.ended_early = f"os._exit({exit_code})"
    report = session.finish(exit_code)
    return ScriptOutcome(exit_code, report, stopped, message, session.internal_error or next(iter(failures), None),
                         interrupted)
