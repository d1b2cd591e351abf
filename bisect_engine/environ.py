"""The process environment, set for a while and restored: torch-free, a bottom layer (the script
session's children inherit the run's settings, ``script/processes.hook_travels``; the isolated
evaluator's children start under glibc's heap checker, ``localise/isolate``)."""
from __future__ import annotations

import contextlib
import os
from typing import Iterator, Mapping


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
