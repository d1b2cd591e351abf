"""Graph windows: find the fewest nodes that diverge only when compiled *together*.

When the whole graph diverges but every node matches on its own (a fusion, a multi-node pattern
pass, a layout choice), search over windows of the compilable nodes in execution order: the first
failing prefix (binary search) fixes the window's end, a galloping search from that end fixes its
start, and dropping nodes one by one (delta debugging for long windows) reduces it to a 1-minimal
node set. Every window is a :class:`~bisect_engine.verdict.candidate.GraphCandidate` judged by
the one search object; single nodes, already known to pass from the per-node check, are told to
it up front.
"""
from __future__ import annotations

from typing import Any, Iterable

from ..search import ddmin, find_integer, first_failing_prefix, remove_one_by_one
from ..verdict.candidate import GraphCandidate
from ..verdict.compare import Outcome
from ..verdict.oracle import GraphContext, SubgraphVerdict
from .protocol import GraphSearch

SMALL_WINDOW = 8  # up to this size, dropping nodes one by one beats ddmin's chunking


def window(context: GraphContext, names: Iterable[str]) -> GraphCandidate:
    return GraphCandidate(context.name, frozenset(names), purpose="window")


def find_window(context: GraphContext, search: GraphSearch, target: Outcome,
                known_passing: Iterable[str] = ()) -> tuple[str, ...]:
    """The 1-minimal set of nodes (in execution order) whose joint compile still gives ``target``."""
    order = context.view.compilable_names(keep_random=context.rng_strict)
    for name in known_passing:
        search.record(window(context, [name]), SubgraphVerdict(Outcome.MATCH))

    def fails(names: Iterable[str]) -> bool:
        return search.judge(window(context, names)).outcome is target

    end = first_failing_prefix(len(order), lambda length: fails(order[:length])) or len(order)

    # f(n): the window of n + 1 nodes ending at ``end`` passes; f(0) is a single node (known to
    # pass) and the whole prefix is known to fail, so find_integer stops inside it.
    extra = find_integer(lambda n: n < end - 1 and not fails(order[end - 1 - n:end])) if end > 1 else 0
    start = max(end - 2 - extra, 0)
    reduce = remove_one_by_one if end - start <= SMALL_WINDOW else ddmin
    minimal = reduce(order[start:end], fails)
    position = {name: index for index, name in enumerate(order)}
    return tuple(sorted(minimal, key=position.__getitem__))
