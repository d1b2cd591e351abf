"""Errors the engine raises on purpose; the CLI maps each to an exit status."""
from __future__ import annotations


class BisectError(Exception):
    """Base class: every error here carries a message meant for the user."""


class UsageError(BisectError):
    """Bad input from the user: a missing file, a model file that breaks its contract (exit 2)."""


class ModelError(UsageError):
    """The user's model raised while we ran it eagerly (exit 2: the model, not the compiler)."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM reached the tool (raised by the CLI's handler, a ``BaseException`` like
    ``KeyboardInterrupt`` so no ``except Exception`` swallows it): stop, end every child process,
    write what is known, exit ``128 + signal``."""

    def __init__(self, signum: int, name: str):
        super().__init__(name)
        self.signum = signum
        self.name = name

    @property
    def exit_code(self) -> int:
        return 4 if self.name == TIMEOUT else 128 + self.signum  # --timeout's watchdog: no verdict (4)


TIMEOUT = "timeout"  # Interrupted.name when --timeout's watchdog stopped a call that did not return


class WorkerDied(RuntimeError):
    """A worker process (``--workers``) died while compiling a candidate (killed, out of memory,
    a segfault): an internal error naming the candidate (exit 3), never a verdict."""


class NativeCrash(RuntimeError):
    """The compiled code killed the process it ran in (abort, segfault, heap corruption), seen in a
    child process after the run's first attempt died so (``localise/isolate.py``): raised into a
    script at the call that crashes, as the compiled call would have ended the program."""


# Set by the supervisor (``supervise.py``) for the rerun after a native crash: the run judges its
# compiled candidates in child processes (``localise/isolate.py``). Not a ``BISECT_ACCURACY_*``
# name: those are the start-up hook's, cleared from the tool's own environment.
NATIVE_CRASH_RERUN = "BISECT_NATIVE_CRASH_RERUN"
# The rerun's scratch folder (``localise/isolate.py``), named ``<prefix><pid>-...`` so the next run's
# supervisor sweeps one whose process is gone (a run killed by ``kill -9`` leaves it).
ISOLATE_FOLDER_PREFIX = "bisect-isolate-"


def isolating() -> bool:
    """Whether this run judges its compiled code in child processes (a rerun after a native crash)."""
    import os

    return bool(os.environ.get(NATIVE_CRASH_RERUN))
