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
