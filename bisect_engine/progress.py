"""The one reporter of progress: a tqdm line on stderr, silent with ``--quiet``.

Library code never prints; it names the step it is in through :class:`Progress`, which also logs
each step's duration for ``--verbose`` runs. The run's one search holds it
(``bisect_engine.search.Search.progress``): every stage reports through the search.
"""
from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import Iterable, Iterator, Sequence, TypeVar

from tqdm import tqdm

log = logging.getLogger(__name__)

T = TypeVar("T")


class Progress:
    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._bar: tqdm | None = None

    @contextlib.contextmanager
    def step(self, description: str) -> Iterator[None]:
        started = time.perf_counter()
        if self.enabled and self._bar is None:
            self._bar = tqdm(total=None, file=sys.stderr, bar_format="{desc} [{elapsed}]", leave=False, disable=None)
        if self._bar is not None:
            self._bar.set_description_str(description)
        try:
            yield
        finally:
            log.info("%s: %.1f s", description, time.perf_counter() - started)

    def items(self, items: Sequence[T], description: str, unit: str) -> Iterable[T]:
        """``items`` with a bar of their own (the batches or training steps of a scan)."""
        return tqdm(items, desc=description, unit=unit, disable=None if self.enabled else True, leave=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

