"""The one search object, its budget, and the search algorithms.

Modeled on Shrink Ray / Hypothesis' shrinker. Every candidate any strategy proposes (a window of
nodes, a group of nodes judged alone, a subsystem switch, a model-level recompile) goes through
:class:`Search`, which caches its *verdict* (not a boolean: the caller reads what it needs), counts
evaluations, and checks the run's :class:`Budget` before each one. The budget reads its cost from
the compiler (every Inductor compile of the run), so ``--max-compiles`` and ``--timeout`` bound the
whole run, whichever stage spends them; exhaustion raises :class:`BudgetExhausted`. The
algorithms (``find_integer``, ``first_failing_prefix``, ``ddmin``, ``remove_one_by_one``) are
written once over plain integers and sequences and only *propose* candidates to a predicate.
Deterministic. Standard library only.

The run makes one :class:`Search` at its top and hands it down: it owns the run's budget (the
compiler only counts compiles and asks it), the run's stage and the run's progress reporter
(:class:`Reporter`). Candidates whose every compile is checked by the compiler itself
(``compile_metered``: a batch or training step of a scan, which Dynamo compiles only when it does
not hold a compile for it yet) are checked against the clock only before their evaluation, so a
batch that compiles nothing costs nothing of ``--max-compiles``.

Independent candidates may be evaluated ahead, in parallel, by an :class:`Ahead` evaluator (worker
processes: ``localise/workers.py``): :meth:`Search.prefetch` hands it the candidates a strategy is
about to judge, :meth:`Search.first` the first that succeeds *in submission order*. The verdicts are
still adopted one at a time, in the order the serial run judges them, each after the same budget
check, so the answer (and every count) never depends on how many workers there are; a verdict
computed ahead but never judged is discarded.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import ContextManager, Generic, Literal, Protocol, TypeVar

logger = logging.getLogger(__name__)

C = TypeVar("C")
T = TypeVar("T")
V = TypeVar("V")

BudgetReason = Literal["max_compiles", "timeout", "memory"]


class BudgetExhausted(BaseException):
    """Raised when a new evaluation or compile would exceed the budget.

    A ``BaseException``, as Hypothesis' ``StopTest`` is: a cut is not an error of what was being
    judged, so no ``except Exception`` on its way (a candidate's compile judged a crash, Dynamo
    wrapping a backend's error, a user's backend) turns it into a verdict; it reaches the one place
    that turns it into the run's ``budget`` (``localise/pipeline.run_captured``, or
    ``scan_flow.run_scanned`` for a cut during a scan), or :meth:`Search.judge_if_room`.
    """

    def __init__(self, message: str, reason: BudgetReason) -> None:
        super().__init__(message)
        self.reason: BudgetReason = reason


# What an allocator says when it fails, in an error's message: torch's CPU allocator ("DefaultCPUAllocator:
# can't allocate memory", "... not enough memory"), CUDA's caching allocator and runtime ("CUDA out of
# memory", "CUDA error: out of memory"), MPS/XPU ("... out of memory"), cuBLAS/cuDNN ("..._ALLOC_FAILED").
OUT_OF_MEMORY_WORDS = ("can't allocate memory", "not enough memory", "out of memory", "ALLOC_FAILED")
ALLOCATION_FAILED = "memory: an allocation failed"  # how the run's cut for one begins (:func:`memory_stop`)


def out_of_memory(error: BaseException | str | None) -> bool:
    """Whether ``error`` is an allocation that failed (the run's memory, never a verdict on what was
    being judged): ``torch.OutOfMemoryError`` (CUDA's, and the CPU allocator's on newer torch),
    Python's ``MemoryError``, or an error whose message is an allocator's (:data:`OUT_OF_MEMORY_WORDS`),
    itself or as the error Dynamo or Inductor wrapped (``inner_exception``, ``__cause__``); a string:
    an error as a worker process reports it (``"OutOfMemoryError: CUDA out of memory ..."``)."""
    if isinstance(error, str):
        return error.startswith(("OutOfMemoryError", "MemoryError")) or (
            error.startswith("RuntimeError") and any(w in error for w in OUT_OF_MEMORY_WORDS))
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, MemoryError) or any(c.__name__ == "OutOfMemoryError" for c in type(error).__mro__):
            return True
        # an allocator's words in torch's own error (never in one of ours: a worker that died "killed,
        # out of memory or crashed" is not known to have run out of memory)
        if (isinstance(error, RuntimeError) and not type(error).__module__.startswith(__package__ or "bisect_engine")
                and any(word in str(error) for word in OUT_OF_MEMORY_WORDS)):
            return True
        error = getattr(error, "inner_exception", None) or error.__cause__
    return False


def error_line(error: BaseException | str, limit: int = 300) -> str:
    """``error`` as one line: its type and the first line of its message, at most ``limit`` characters."""
    said = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return (said.strip().splitlines() or [""])[0][:limit]


def memory_stop(error: BaseException | str, doing: str = "") -> BudgetExhausted:
    """The run's memory cut for an allocation that failed (:func:`out_of_memory`) while ``doing``: the
    run stops there, as at any memory cut (exit 4, what it learned), never a crash or a mismatch of
    what was being judged (our harness ran short, not the compiler)."""
    return BudgetExhausted(f"{ALLOCATION_FAILED}{' ' + doing if doing else ''} ({error_line(error)})", "memory")


def stop_if_out_of_memory(error: BaseException | str, doing: str = "") -> None:
    """Raise :func:`memory_stop` where ``error`` is an allocation that failed; else nothing: for the
    ``except Exception`` that would otherwise turn it into a verdict (a crash, values that differ,
    eager standing in for fp64, no noise floor)."""
    if out_of_memory(error):
        raise memory_stop(error, doing)


@contextlib.contextmanager
def memory_cuts(doing: str = "") -> Iterator[None]:
    """An allocation that fails inside is the run's memory cut (:func:`memory_stop`); any other error
    goes on as it is: for the places that catch the run's cuts (``except BudgetExhausted``)."""
    try:
        yield
    except Exception as error:
        stop_if_out_of_memory(error, doing)
        raise


@dataclass
class Budget:
    """The run's limits: compiles (as counted by ``cost``) and seconds since ``started_at``.

    ``check`` runs before every evaluation and every compile; an evaluation already started
    finishes (a model-level recompile may compile several graphs). ``stage``: the stage of the run
    spending it (what compiles count under, what a cut names); set through the :class:`Search`
    that holds the budget (:attr:`Search.stage`), read by the compiler.
    """

    max_compiles: int | None = None
    timeout_s: float | None = None
    clock: Callable[[], float] = time.monotonic
    started_at: float | None = None
    exhausted: BudgetExhausted | None = field(default=None, compare=False)
    stage: str = field(default="localise", compare=False)
    # says why memory is too short to go on (None: room left); asked with the clock, before every
    # evaluation and compile (``load/memory.MemoryGuard``: --memory-budget, the machine's free memory)
    memory: Callable[[], str | None] | None = field(default=None, compare=False)
    # bytes the run may still take (``load/memory.MemoryGuard.room``; None: not known): what
    # :meth:`require` weighs a step's declared need against
    room_left: Callable[[], int | None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.started_at is None:
            self.started_at = self.clock()

    @property
    def elapsed_s(self) -> float:
        return self.clock() - (self.started_at or 0.0)

    def check(self, spent: int) -> None:
        """Raise :class:`BudgetExhausted` (and remember it) when ``spent`` compiles or the
        elapsed time leave no room for one more."""
        if self.max_compiles is not None and spent >= self.max_compiles:
            self._exhaust(f"compile budget of {self.max_compiles} exhausted", "max_compiles")
        self.check_time()

    def check_time(self) -> None:
        """Raise :class:`BudgetExhausted` (and remember it) when the elapsed time is past the limit,
        or memory is too short to go on (a clean stop before the OOM killer's)."""
        if self.timeout_s is not None and self.elapsed_s > self.timeout_s:
            self._exhaust(f"timeout of {self.timeout_s:g} s exceeded", "timeout")
        short = self.memory() if self.memory is not None else None
        if short:
            self._exhaust(short, "memory")

    def require(self, need: int, what: str) -> None:
        """Raise :class:`BudgetExhausted` (reason "memory") when ``what``, a step about to add about
        ``need`` bytes in one go (an fp64 copy of the model and its run), would not fit the room
        memory leaves (:attr:`room_left`, once values have moved to disk): the run stops there, as
        at any budget cut, with what it learned, before the OOM killer would end it. The guard
        asked before every evaluation (:attr:`memory`) sees only what is held, not a step's growth."""
        short = self.memory() if self.memory is not None else None
        if short:  # already short whatever the step: the guard's own words
            self._exhaust(short, "memory")
        room = self.room_left() if self.room_left is not None else None
        if room is not None and need > room:
            self._exhaust(f"memory: {what} needs about {_size(need)} and {_size(max(room, 0))} is left (stopped "
                          "before it, not by the OOM killer)", "memory")

    def room(self, spent: int) -> int | None:
        """How many more evaluations the compile budget allows at most (None: no limit), each
        costing at least one compile: a batch evaluated ahead is cut there, in submission order."""
        return None if self.max_compiles is None else max(self.max_compiles - spent, 0)

    def _exhaust(self, message: str, reason: BudgetReason) -> None:
        self.exhausted = BudgetExhausted(message, reason)
        raise self.exhausted


def _size(count: int) -> str:
    return f"{count / 2**30:.2f} GiB" if count >= 2**30 else f"{count / 2**20:.0f} MiB"


def default_key(candidate: object) -> Hashable:
    """Cache key: frozenset for sets, tuple for lists/tuples, else the value."""
    if isinstance(candidate, (set, frozenset)):
        return frozenset(candidate)
    if isinstance(candidate, (list, tuple)):
        return tuple(candidate)
    return candidate  # type: ignore[return-value]


class Reporter(Protocol):
    """Where the run says what it is doing (``bisect_engine.progress.Progress``: a tqdm line)."""

    def step(self, description: str) -> ContextManager[None]: ...

    def items(self, items: Sequence[T], description: str, unit: str) -> Iterable[T]: ...


class Quiet:
    """The reporter that says nothing (tests, and a search made without one)."""

    def step(self, description: str) -> ContextManager[None]:
        return contextlib.nullcontext()

    def items(self, items: Sequence[T], description: str, unit: str) -> Iterable[T]:
        return items


class Ahead(Protocol[C, V]):  # type: ignore[misc]
    """Evaluates candidates ahead of the search (e.g. in worker processes). ``submit`` starts the
    ones it can take (others are left to the search's own evaluator); ``take`` waits for a
    submitted candidate's verdict and returns it (None: not submitted); ``discard`` drops the rest."""

    def submit(self, candidates: Sequence[C]) -> None: ...

    def take(self, candidate: C) -> V | None: ...

    def discard(self) -> None: ...


class Search(Generic[C, V]):
    """Owns verdict caching, evaluation counting, the budget (and the stage kept on it) and progress.

    ``evaluate(candidate)`` returns the candidate's verdict; ``cost()`` what the run has spent so
    far (by default, this search's evaluations); ``compile_metered(candidate)``: the evaluation's
    compiles are each checked against the budget where they happen (the search checks only the
    clock before it); ``progress``: the run's reporter.
    """

    def __init__(
        self,
        evaluate: Callable[[C], V],
        *,
        budget: Budget | None = None,
        cost: Callable[[], int] | None = None,
        key: Callable[[C], Hashable] = default_key,
        on_call: Callable[[C, V], None] | None = None,
        max_calls: int | None = None,
        timeout_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        ahead: Ahead[C, V] | None = None,
        compile_metered: Callable[[C], bool] | None = None,
        progress: Reporter | None = None,
    ) -> None:
        self._evaluate = evaluate
        self._compile_metered = compile_metered
        self.progress: Reporter = progress if progress is not None else Quiet()
        self.ahead = ahead
        self._key = key
        self._on_call = on_call
        self.budget = budget if budget is not None else Budget(max_calls, timeout_s, clock)
        self._cost = cost if cost is not None else (lambda: self.calls)
        self._verdicts: dict[Hashable, V] = {}
        self.history: list[tuple[Hashable, V]] = []
        self.cache_hits = 0

    @property
    def calls(self) -> int:
        """Evaluations actually made (cache hits excluded)."""
        return len(self.history)

    @property
    def elapsed_s(self) -> float:
        return self.budget.elapsed_s

    @property
    def spent(self) -> int:
        """What the run has spent of its budget (the compiler's compile count, for the run's search)."""
        return self._cost()

    @property
    def evaluator(self) -> Callable[[C], V]:
        """What turns a candidate into its verdict (the run's judge)."""
        return self._evaluate

    @property
    def stage(self) -> str:
        """The run's stage: what the compiles of the candidates judged now count under."""
        return self.budget.stage

    @stage.setter
    def stage(self, stage: str) -> None:
        self.budget.stage = stage

    def judge(self, candidate: C) -> V:
        """The candidate's verdict: cached, or evaluated within the budget."""
        candidate_key = self._key(candidate)
        if candidate_key in self._verdicts:
            self.cache_hits += 1
            return self._verdicts[candidate_key]
        if self._compile_metered is not None and self._compile_metered(candidate):
            self.budget.check_time()
        else:
            self.budget.check(self._cost())
        verdict = self.ahead.take(candidate) if self.ahead is not None else None
        if verdict is None:
            with memory_cuts():  # an allocation that failed on the way up: the run's memory cut
                verdict = self._evaluate(candidate)
        self._verdicts[candidate_key] = verdict
        self.history.append((candidate_key, verdict))
        logger.debug("evaluation %d: %r -> %r", self.calls, candidate_key, verdict)
        if self._on_call is not None:
            self._on_call(candidate, verdict)
        return verdict

    def judge_if_room(self, candidate: C) -> V | None:
        """The candidate's verdict, or None when the budget has no room for it (cut before or during
        its evaluation; the budget remembers the cut as it remembers any): for a look the run can
        do without (the window's kernels, the repro on random inputs)."""
        try:
            return self.judge(candidate)
        except BudgetExhausted:
            return None

    def prefetch(self, candidates: Sequence[C]) -> None:
        """Start evaluating ``candidates`` ahead (no-op without an :class:`Ahead` evaluator): the
        uncached ones, cut in submission order to what the compile budget has room for."""
        if self.ahead is None:
            return
        fresh = list({self._key(c): c for c in candidates if self._key(c) not in self._verdicts}.values())
        room = self.budget.room(self._cost())
        self.ahead.submit(fresh if room is None else fresh[:room])

    def first(self, candidates: Sequence[C], success: Callable[[V], bool]) -> tuple[C, V] | None:
        """The first candidate, in submission order, whose verdict is a ``success`` (judged ahead
        where an evaluator can, adopted one by one exactly as the serial loop would)."""
        self.prefetch(candidates)
        for candidate in candidates:
            verdict = self.judge(candidate)
            if success(verdict):
                return candidate, verdict
        return None

    def discard_ahead(self) -> None:
        """Drop the verdicts evaluated ahead and never judged (they cost the run nothing)."""
        if self.ahead is not None:
            self.ahead.discard()

    def is_interesting(self, candidate: C) -> bool:
        """For boolean oracles: whether ``candidate`` still fails."""
        return bool(self.judge(candidate))

    def known(self, candidate: C) -> V | None:
        """The cached verdict, if the candidate was judged (never evaluates)."""
        return self._verdicts.get(self._key(candidate))

    def forget(self, which: Callable[[C], bool]) -> None:
        """Drop cached verdicts of the candidates ``which`` selects (their subject was replaced,
        e.g. a captured graph by one our own recompile can compile); history keeps the calls."""
        for candidate_key in [k for k in self._verdicts if which(k)]:  # type: ignore[arg-type]
            del self._verdicts[candidate_key]

    def lighten(self, which: Callable[[Hashable], bool], light: Callable[[V], V]) -> None:
        """History's verdicts of the candidates ``which`` selects kept as ``light`` makes them
        (their values dropped once nothing reads them; the calls and their outcomes stay)."""
        self.history = [(k, light(v)) if which(k) else (k, v) for k, v in self.history]

    def record(self, candidate: C, verdict: V) -> None:
        """Seed the cache with a verdict learned elsewhere (costs no evaluation)."""
        self._verdicts.setdefault(self._key(candidate), verdict)


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


@dataclass(frozen=True)
class Split(Generic[T]):
    """What :func:`split_failing` learned: the items that fail alone, the groups that pass (with
    the failing items they cover all others), and failing groups none of whose halves fails."""

    failing: tuple[T, ...]
    passing: tuple[tuple[T, ...], ...]
    unresolved: tuple[tuple[T, ...], ...]


def split_failing(items: Sequence[T], fails: Callable[[tuple[T, ...]], bool], infer: bool = False) -> Split[T]:
    """Adaptive group testing: find the items that fail on their own by halving failing groups.

    ``fails(tuple(items))`` is assumed true and never called. A group is assumed to fail when it
    holds a failing item; one that fails while both its halves pass is reported as unresolved
    (the failure needs items together). k failing items among n cost about 2k log2(n) calls.
    ``infer``: when a failing group's first half passes, its second half is taken to fail without
    a call (one failing item: about log2(n) calls); an item reported failing may then never have
    been tested alone, so the caller confirms each one.
    """
    failing: list[T] = []
    passing: list[tuple[T, ...]] = []
    unresolved: list[tuple[T, ...]] = []

    def visit(group: tuple[T, ...], known_failing: bool) -> bool:
        if not known_failing and not fails(group):
            passing.append(group)
            return False
        if len(group) == 1:
            failing.append(group[0])
            return True
        middle = len(group) // 2
        first = visit(group[:middle], False)
        second = visit(group[middle:], infer and not first)
        if not (first or second):
            unresolved.append(group)
        return True

    if items:
        visit(tuple(items), True)
    return Split(tuple(failing), tuple(passing), tuple(unresolved))
