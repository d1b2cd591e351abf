"""Signals at the command line's edge: SIGINT and SIGTERM become :class:`~bisect_engine.errors.Interrupted`.

The first signal raises ``Interrupted`` in the main thread (a blocking wait for a child returns
at once, and ``subprocess.run`` kills its child on the way out); the engine keeps what it learned,
the writer writes it with verdict ``interrupted``, and the CLI exits ``128 + signal`` (130 for
Ctrl-C, 143 for SIGTERM). A second signal while that happens ends the process at once (the same one again within
``ECHO_SECONDS`` is its echo, ignored). Inductor's
compile workers are shut down on the way out. Handlers are restored in ``finally``.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from typing import Any, Iterator

from .errors import TIMEOUT, Interrupted

SIGNALS = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}
# A supervised run (``supervise.py``) may get one signal twice within moments: ``timeout`` or a shell
# signals the whole process group, and the supervisor relays what it got. The echo is not a second
# request to stop.
ECHO_SECONDS = 1.0


@contextlib.contextmanager
def signals_interrupt(sigint: bool = True, deadline: float | None = None) -> Iterator[None]:
    """``sigint=False`` (script mode): Ctrl-C stays the program's own KeyboardInterrupt, and
    SIGTERM is taken only where the program left its default action. ``deadline``
    (``time.monotonic()``): a watchdog (``SIGALRM``) stops a call that never returns to the
    budget's checks, as :class:`Interrupted` named ``timeout`` (exit 4)."""
    with _watchdog(deadline), _signals(sigint):
        yield


@contextlib.contextmanager
def _watchdog(deadline: float | None) -> Iterator[None]:
    if deadline is None or not hasattr(signal, "setitimer"):
        yield
        return

    def expired(_signum: int, _frame: Any) -> None:
        raise Interrupted(signal.SIGALRM, TIMEOUT)

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, max(deadline - time.monotonic(), 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _signals(sigint: bool) -> Iterator[None]:
    chosen = [s for s in SIGNALS if (sigint or s != signal.SIGINT)
              and (sigint or signal.getsignal(s) in (signal.SIG_DFL, None))]
    previous = {signum: signal.getsignal(signum) for signum in chosen}
    raised: list[Any] = []  # the first signal and when it came

    def handler(signum: int, _frame: Any) -> None:
        if raised and raised[0] == signum and time.monotonic() - raised[1] < ECHO_SECONDS:
            return  # the same signal again at once: a group kill and its supervisor's relay of it
        if raised:  # a second signal: no more waiting
            os._exit(128 + signum)
        raised[:] = [signum, time.monotonic()]
        raise Interrupted(signum, SIGNALS[signal.Signals(signum)])

    for signum in chosen:
        signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def shut_down_compile_workers() -> None:
    """End Inductor's compile-worker processes, if this process started any."""
    module = sys.modules.get("torch._inductor.async_compile")
    if module is not None:
        with contextlib.suppress(Exception):
            module.shutdown_compile_workers()
