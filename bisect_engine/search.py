"""Generic search machinery for bisecting and shrinking failing configurations.

Modeled on Shrink Ray / Hypothesis' shrinker. ``Search`` is the one object that
talks to the expensive oracle: it owns the result cache, call counting, history
and the budget (max calls, timeout; exhaustion raises ``BudgetExhausted``).
The algorithms (``find_integer``, ``first_failing_prefix``,
``ddmin``) are written once over plain integers and sequences and only *propose*
candidates to a predicate, normally ``Search.is_interesting``. Deterministic.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, Literal, TypeVar

logger = logging.getLogger(__name__)

C = TypeVar("C")
T = TypeVar("T")

BudgetReason = Literal["max_compiles", "timeout"]


class BudgetExhausted(Exception):
    """Raised by ``Search`` when a new oracle call would exceed the budget."""

    def __init__(self, message: str, reason: BudgetReason) -> None:
        super().__init__(message)
        self.reason: BudgetReason = reason


def default_key(candidate: object) -> Hashable:
    """Cache key: frozenset for sets, tuple for lists/tuples, else the value."""
    if isinstance(candidate, (set, frozenset)):
        return frozenset(candidate)
    if isinstance(candidate, (list, tuple)):
        return tuple(candidate)
    return candidate  # type: ignore[return-value]


class Search(Generic[C]):
    """Owns oracle caching, call counting, history and the call/time budget."""

    def __init__(
        self,
        oracle: Callable[[C], bool],
        *,
        key: Callable[[C], Hashable] = default_key,
        max_calls: int | None = None,
        timeout_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_call: Callable[[C, bool], None] | None = None,
    ) -> None:
        self._oracle = oracle
        self._key = key
        self.max_calls = max_calls
        self.timeout_s = timeout_s
        self._clock = clock
        self._on_call = on_call
        self._started_at = clock()
        self._results: dict[Hashable, bool] = {}
        self.history: list[tuple[Hashable, bool]] = []
        self.cache_hits = 0

    @property
    def calls(self) -> int:
        """Number of oracle calls actually made (cache hits excluded)."""
        return len(self.history)

    @property
    def elapsed_s(self) -> float:
        """Seconds since this search was created, according to its clock."""
        return self._clock() - self._started_at

    def is_interesting(self, candidate: C) -> bool:
        """Whether ``candidate`` still fails; cached, budgeted oracle call."""
        candidate_key = self._key(candidate)
        if candidate_key in self._results:
            self.cache_hits += 1
            return self._results[candidate_key]
        self._check_budget()
        result = bool(self._oracle(candidate))
        self._results[candidate_key] = result
        self.history.append((candidate_key, result))
        logger.debug("oracle call %d: %r -> %s", self.calls, candidate_key, result)
        if self._on_call is not None:
            self._on_call(candidate, result)
        return result

    def record(self, candidate: C, interesting: bool) -> None:
        """Seed the cache with a result learned elsewhere (costs no oracle call)."""
        self._results.setdefault(self._key(candidate), bool(interesting))

    def _check_budget(self) -> None:
        if self.max_calls is not None and self.calls >= self.max_calls:
            raise BudgetExhausted(
                f"compile budget of {self.max_calls} exhausted", "max_compiles"
            )
        if self.timeout_s is not None and self.elapsed_s > self.timeout_s:
            raise BudgetExhausted(f"timeout of {self.timeout_s:g} s exceeded", "timeout")


def find_integer(f: Callable[[int], bool]) -> int:
    """Some n >= 0 with f(n) true and f(n + 1) false, assuming f(0) is true.

    Linear probe of 1..4, then exponential probing and binary search:
    O(log n) calls. f(0) is never called.
    """
    for n in range(1, 5):
        if not f(n):
            return n - 1
    low, high = 4, 8  # invariant: f(low) true; high unknown until probed
    while f(high):
        low, high = high, high * 2
    while low + 1 < high:
        middle = (low + high) // 2
        if f(middle):
            low = middle
        else:
            high = middle
    return low


def first_failing_prefix(length: int, fails: Callable[[int], bool]) -> int | None:
    """Smallest k in 1..length with fails(k), assuming fails is monotone.

    fails(length) is assumed true and never called; fails(0) is assumed false.
    Returns None when length == 0. Uses ceil(log2(length)) calls.
    """
    if length <= 0:
        return None
    passing, failing = 0, length
    while failing - passing > 1:
        middle = (passing + failing) // 2
        if fails(middle):
            failing = middle
        else:
            passing = middle
    return failing


def _split(items: tuple[T, ...], parts: int) -> list[tuple[T, ...]]:
    """Split ``items`` into ``parts`` contiguous, non-empty, near-equal chunks."""
    size, extra = divmod(len(items), parts)
    chunks: list[tuple[T, ...]] = []
    start = 0
    for index in range(parts):
        stop = start + size + (1 if index < extra else 0)
        chunks.append(items[start:stop])
        start = stop
    return chunks


def _reduce_once(
    current: tuple[T, ...], granularity: int, fails: Callable[[tuple[T, ...]], bool]
) -> tuple[tuple[T, ...], int] | None:
    """One ddmin step: a smaller failing candidate and its next granularity."""
    chunks = _split(current, granularity)
    for chunk in chunks:
        if fails(chunk):
            return chunk, 2
    if granularity == 2:  # complements equal the chunks already tried
        return None
    for index in range(granularity):
        complement = tuple(item for i, c in enumerate(chunks) if i != index for item in c)
        if fails(complement):
            return complement, max(granularity - 1, 2)
    return None


def ddmin(items: Sequence[T], fails: Callable[[tuple[T, ...]], bool]) -> tuple[T, ...]:
    """Zeller's delta debugging: a 1-minimal failing subsequence of ``items``.

    fails(tuple(items)) is assumed true and never called; the empty sequence
    is assumed to pass and never tried. Order is preserved. Single items are
    tried first for inputs of at most 4 items.
    """
    current = tuple(items)
    if len(current) <= 1:
        return current
    if len(current) <= 4:
        for item in current:
            if fails((item,)):
                return (item,)
    granularity = 2
    while len(current) >= 2:
        reduced = _reduce_once(current, granularity, fails)
        if reduced is not None:
            current, granularity = reduced
        elif granularity >= len(current):
            break
        else:
            granularity = min(2 * granularity, len(current))
    return current


def remove_one_by_one(items: Sequence[T], fails: Callable[[tuple[T, ...]], bool]) -> tuple[T, ...]:
    """Drop each item in turn, keeping the drop when the rest still fails.

    fails(tuple(items)) is assumed true and never called. For a monotone predicate one pass is
    1-minimal and costs at most len(items) calls: cheaper than ddmin when most items are needed,
    which is the usual case for a short window of fused nodes.
    """
    current = tuple(items)
    for item in items:
        if len(current) <= 1:
            break
        candidate = tuple(kept for kept in current if kept != item)
        if fails(candidate):
            current = candidate
    return current
