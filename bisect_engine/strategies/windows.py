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

import re
from typing import Any, Iterable

from ..search import ddmin, find_integer, first_failing_prefix, remove_one_by_one
from ..verdict.candidate import GraphCandidate
from ..verdict.compare import Outcome
from ..verdict.graphs import GraphView, value_nodes
from ..verdict.oracle import GraphContext, SubgraphVerdict
from ..verdict.precision import op_base_name
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


# Ops whose kernels keep an accumulator (``tmp_acc0`` in Inductor's C++ and Triton code).
_REDUCTIONS = {"sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std", "var_mean",
               "std_mean", "any", "all", "logsumexp", "norm", "linalg_vector_norm", "cumsum", "cumprod", "nansum"}


def window_culprit(view: GraphView, names: tuple[str, ...], verdict: SubgraphVerdict | None) -> str:
    """The node a window is named by (the window stays listed whole): the node whose own output
    departs (the producer of the window's first failing output: ``cumsum`` in ``ones`` +
    ``cumsum``), for a crash the node the error text names (an aten op, or a reduction's
    accumulator in the generated kernel), else the window's first node."""
    if verdict is not None and verdict.outcome is Outcome.CRASH:
        return named_by_error(view, names, verdict.error) or names[0]
    if verdict is not None:
        producers = {value.name: name for name in names for value in value_nodes(view.nodes[name])}
        departing = [producers[output] for output in verdict.failing_outputs if output in producers]
        if departing:
            return min(departing, key=names.index)
    return names[0]


def named_by_error(view: GraphView, names: tuple[str, ...], error: str) -> str | None:
    """The window node a compile error's text names: its aten op (``aten.sum``, ``aten::sum``),
    else, for an accumulator of the generated kernel (``at_Half_tmp_acc0_vec``: pytorch#194706's
    C++ error), the window's first reduction."""
    bases = {name: op_base_name(view.nodes[name].target) for name in names}
    for name, base in bases.items():
        if base and re.search(rf"aten(\.|::){re.escape(base)}\b", error):
            return name
    if re.search(r"tmp_acc\d", error):
        return next((name for name, base in bases.items() if base in _REDUCTIONS), None)
    return None
