"""Symbolic sizes of a finding: does it need symbolic code, and at which sizes does it fail.

For a culprit in a graph compiled with symbolic sizes (the code a job with dynamic shapes runs):
one compile at the checked call's static sizes says whether the finding is ``dynamic-only``
(static code is right) or ``static-too``; then, per symbol the culprit's inputs carry, one
symbolic compile is run at many values of that symbol (:class:`SizeCandidate`, no recompile per
size) and the failing values are written as intervals. Sizes the job's compiled graph would not
accept (its recorded guards fail there) are not tried; sizes where eager cannot run are skipped.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import sympy

from ..verdict.candidate import GraphCandidate, SizeCandidate
from ..verdict.compare import Outcome
from ..verdict.oracle import GraphContext
from ..verdict.shapes import bind_symbols, parse, shape_signature, symbols_of
from .protocol import GraphSearch

log = logging.getLogger(__name__)

FAILING = ("mismatch", "crash")
GRID_LIMIT = 64  # sizes of the first pass
REFINE_LIMIT = 24  # sizes between each pass/fail boundary of the grid, tried in a second pass
MAX_SYMBOLS = 3


@dataclass(frozen=True)
class SizeSweep:
    """One symbol swept: where it sits, the value checked, the sizes tried and those that fail."""

    symbol: str
    where: str  # "arg1_1 dim 1"
    checked: int
    tried: int
    failing: tuple[tuple[int, int], ...]
    low: int
    high: int
    invalid: int = 0  # sizes where eager itself cannot run
    crashes: int = 0  # failing sizes where the compiled code raised

    @property
    def smallest_failing(self) -> int | None:
        return self.failing[0][0] if self.failing else None

    passing: int = 0  # tried sizes where compiled matches

    @property
    def depends_on_size(self) -> bool:
        """Some tried size passes and some fails."""
        return bool(self.failing) and self.passing > 0

    def to_json(self) -> dict[str, Any]:
        return {"dim": self.symbol, "where": self.where, "failing": [list(i) for i in self.failing], "tried": self.tried,
                "range": [self.low, self.high], "checked": self.checked, "smallest_failing": self.smallest_failing,
                "invalid": self.invalid, "crashes": self.crashes, "passing": self.passing}


def intervals(outcomes: Iterable[tuple[int, str]]) -> tuple[tuple[int, int], ...]:
    """Runs of failing sizes among the judged ones (``invalid`` sizes neither join nor break a run)."""
    runs: list[list[int]] = []
    previous_failed = False
    for size, outcome in sorted(o for o in outcomes if o[1] != "invalid"):
        if outcome in FAILING:
            if previous_failed:
                runs[-1][1] = size
            else:
                runs.append([size, size])
        previous_failed = outcome in FAILING
    return tuple((lo, hi) for lo, hi in runs)


def grid(checked: int, low: int = 2, high: int | None = None, limit: int = GRID_LIMIT) -> tuple[int, ...]:
    """Sizes for the first pass: every size from ``low`` to ``high`` (default twice the checked
    value, at least 32) when they fit in ``limit``, else the small ones, an even spread and the
    checked value with its neighbours."""
    high = max(2 * checked, 32) if high is None else high
    if high - low + 1 <= limit:
        return tuple(range(low, high + 1))
    small = list(range(low, low + limit // 4))
    spread = limit - len(small) - 3
    step = (high - small[-1]) / spread
    points = [round(small[-1] + step * (i + 1)) for i in range(spread)]
    return tuple(sorted(s for s in {*small, *points, checked - 1, checked, checked + 1, high} if low <= s <= high))


def refinements(outcomes: Sequence[tuple[int, str]], limit: int = REFINE_LIMIT) -> tuple[int, ...]:
    """Untried sizes between neighbouring tried sizes that disagree (pass vs fail): all of them
    when few, else an even spread (the interval ends are then exact only to that spread)."""
    judged = sorted((s, o in FAILING) for s, o in outcomes if o != "invalid")
    sizes: set[int] = set()
    for (a, fail_a), (b, fail_b) in zip(judged, judged[1:]):
        if fail_a != fail_b and b - a > 1:
            between = list(range(a + 1, b))
            if len(between) > limit:
                between = [between[round(i * (len(between) - 1) / (limit - 1))] for i in range(limit)]
            sizes.update(between)
    return tuple(sorted(sizes))


def admissible(guards: Sequence[str], values: dict[str, int]) -> bool:
    """Whether the guards the job's compile recorded hold at these symbol values (a guard that
    cannot be evaluated, one on a symbol not bound here, does not exclude a size)."""
    bound = {sympy.Symbol(k): v for k, v in values.items()}
    for guard in guards:
        try:
            holds = parse(guard).subs(bound)
        except Exception:  # noqa: BLE001 - an expression we cannot read: no verdict on the size
            continue
        if holds is sympy.false:
            return False
    return True


def static_shapes_verdict(context: GraphContext, names: Sequence[str], search: GraphSearch) -> str | None:
    """``dynamic-only`` when the culprit compiled at the checked call's static sizes matches,
    ``static-too`` when it still fails; None when that compile cannot be judged."""
    verdict = search.judge(GraphCandidate(context.name, frozenset(names), shapes="static", purpose="static shapes"))
    if verdict.outcome is Outcome.MATCH:
        return "dynamic-only"
    if verdict.outcome in (Outcome.MISMATCH, Outcome.CRASH):
        return "static-too"
    return None


def _where(signature: Sequence[Any], names: Sequence[str], symbol: str) -> str:
    """The first input dim that is exactly the symbol (else a SymInt input that is)."""
    for entry, name in zip(signature, names):
        if entry[0] == "tensor" and symbol in entry[1]:
            return f"{name} dim {list(entry[1]).index(symbol)}"
    for entry, name in zip(signature, names):
        if entry[0] == "int" and entry[1] == symbol:
            return f"{name} (SymInt)"
    return "?"


def sweep_sizes(context: GraphContext, names: Sequence[str], search: GraphSearch) -> list[SizeSweep]:
    """Each symbol of the culprit's inputs that the graph's inputs determine, swept (at most
    :data:`MAX_SYMBOLS`); the other symbols stay at their checked values."""
    captured = context.captured
    whole = captured.shape_signature
    culprit = shape_signature(context.subgraph(names).graph_module)
    if whole is None or culprit is None:
        return []
    values = bind_symbols(whole, captured.inputs)
    symbols = [s for s in symbols_of(culprit) if s in values][:MAX_SYMBOLS]
    sweeps = []
    for symbol in symbols:
        outcomes = _sweep(context, names, search, symbol, values, grid(values[symbol]))
        if outcomes is None:
            continue
        outcomes += _sweep(context, names, search, symbol, values, refinements(outcomes)) or []
        judged = [o for o in outcomes if o[1] != "invalid"]
        sizes = sorted(s for s, _ in outcomes)
        sweeps.append(SizeSweep(symbol, _where(whole, context.view.placeholder_names(), symbol), values[symbol],
                                len(judged), intervals(outcomes), sizes[0], sizes[-1],
                                invalid=len(outcomes) - len(judged), crashes=sum(o == "crash" for _, o in judged),
                                passing=sum(o == "match" for _, o in judged)))
    return sweeps


def _sweep(context: GraphContext, names: Sequence[str], search: GraphSearch, symbol: str,
           values: dict[str, int], sizes: Sequence[int]) -> list[tuple[int, str]] | None:
    allowed = tuple(s for s in sizes if admissible(context.captured.guards, {**values, symbol: s}))
    if not allowed:
        return []
    verdict = search.judge(SizeCandidate(context.name, frozenset(names), symbol, allowed, purpose=f"sizes of {symbol}"))
    if not verdict.sizes and verdict.outcome is Outcome.CRASH:
        log.warning("%s: the size sweep's compile crashed: %s", context.name, verdict.error)
        return None
    return list(verdict.sizes)


def headline(sweeps: Sequence[SizeSweep]) -> SizeSweep | None:
    """The sweep to report: the first symbol the finding depends on, else the first swept."""
    return next((s for s in sweeps if s.depends_on_size), sweeps[0] if sweeps else None)
