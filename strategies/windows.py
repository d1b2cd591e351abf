"""Graph windows: find the fewest nodes that diverge only when compiled *together*.

When the whole graph diverges but every node matches on its own (a fusion, a multi-node pattern
pass, a layout choice), search over dependency-closed windows of the compilable nodes in
execution order: the first failing prefix (binary search) fixes the window's end, a galloping
search from that end fixes its start, and dropping nodes one by one (delta debugging for long
windows) reduces it to a 1-minimal node set.
Single nodes are already known to pass (the per-node check), which the search is told up front.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from ..compare import Outcome
from ..oracle import GraphContext, SubgraphVerdict
from ..runner import Compiler
from ..search import Search, ddmin, find_integer, first_failing_prefix, remove_one_by_one

SMALL_WINDOW = 8  # up to this size, dropping nodes one by one beats ddmin's chunking


@dataclass(frozen=True)
class WindowFinding:
    nodes: tuple[str, ...]
    verdict: SubgraphVerdict


def window_oracle(
    context: GraphContext, compiler: Compiler, target: Outcome
) -> Callable[[frozenset[str]], bool]:
    """A candidate node set is interesting when compiling it together reproduces ``target``."""
    verdicts: dict[frozenset[str], SubgraphVerdict] = {}

    def fails(names: frozenset[str]) -> bool:
        verdict = context.judge(context.subgraph(names), compiler, label=f"{context.name}:window")
        verdicts[names] = verdict
        return verdict.outcome is target

    fails.verdicts = verdicts  # type: ignore[attr-defined]
    return fails


def find_window(
    context: GraphContext,
    search: Search[frozenset[str]],
    known_passing: Iterable[str] = (),
) -> tuple[str, ...]:
    """The 1-minimal set of nodes (in execution order) whose joint compile still diverges."""
    order = context.view.compilable_names(keep_random=context.rng_strict)
    search.record(frozenset(order), True)
    for name in known_passing:
        search.record(frozenset([name]), False)

    def prefix_fails(length: int) -> bool:
        return search.is_interesting(frozenset(order[:length]))

    end = first_failing_prefix(len(order), prefix_fails) or len(order)

    def window_passes(extra: int) -> bool:
        return not search.is_interesting(frozenset(order[end - 1 - extra : end]))

    # f(n): the window of n + 1 nodes ending at ``end`` passes; f(0) is a single node (known to
    # pass) and the whole prefix is known to fail, so find_integer stops inside it.
    extra = find_integer(lambda n: n < end - 1 and window_passes(n)) if end > 1 else 0
    start = max(end - 2 - extra, 0)
    window = order[start:end]
    reduce = remove_one_by_one if len(window) <= SMALL_WINDOW else ddmin
    minimal = reduce(window, lambda names: search.is_interesting(frozenset(names)))
    position = {name: index for index, name in enumerate(order)}
    return tuple(sorted(minimal, key=position.__getitem__))
