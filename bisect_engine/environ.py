"""The process environment, set for a while and restored: torch-free, a bottom layer (the script
session's children inherit the run's settings, ``script/processes.hook_travels``; the isolated
evaluator's children start under glibc's heap checker, ``localise/isolate``)."""
from __future__ import annotations

import contextlib
import os
from typing import Iterator, Mapping

# GNU OpenMP (torch's CPU threads) lets a thread that waits for work spin a while before it sleeps.
# Some of our processes run at once (the repro's verifying runs; `many`'s jobs), each with a thread
# per core: spinning threads take the cores the others need (three tool runs at once on 2 cores:
# 54-67 CPU-s spinning, 36-48 sleeping, a third less wall time). Waiting is all it changes: not the
# thread count, not a value. Not for a process that runs alone: there the wake-ups cost (a GPT-2
# small eager training step: 1.24 s spinning, 1.46-1.51 s sleeping). A policy the user set is kept.
# benchmarks/omp_waits.py
QUIET_WAITS = {"OMP_WAIT_POLICY": "PASSIVE"}


def with_quiet_waits(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` for a process of our own: OpenMP's waiting threads sleep unless it says otherwise."""
    return {**QUIET_WAITS, **environ}


@contextlib.contextmanager
def environ_set(extra: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``extra`` set (what a child started meanwhile inherits); each name put
    back as it was after, unset where it was unset."""
    saved = {name: os.environ.get(name) for name in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
