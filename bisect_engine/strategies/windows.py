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

from ..errors import NativeCrash
from ..search import ddmin, find_integer, first_failing_prefix, remove_one_by_one, stop_if_out_of_memory
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
    accumulator in the generated kernel); for a native crash (the compiled code killed its process:
    its text names no op) the window's last node, the kernel its other nodes fuse into (pytorch#196681:
    a GELU and two pads fused into the ``bmm``'s tiled reduction, whose tail store overflows);
    else the window's first node."""
    if verdict is not None and verdict.outcome is Outcome.CRASH:
        native = verdict.error.startswith(NativeCrash.__name__)
        return named_by_error(view, names, verdict.error) or (names[-1] if native else names[0])
    if verdict is not None:
        producers = {value.name: name for name in names for value in value_nodes(view.nodes[name])}
        departing = [producers[output] for output in verdict.failing_outputs if output in producers]
        if departing:
            return min(departing, key=names.index)
    return names[0]


def attributed_node(view: GraphView, names: tuple[str, ...], kind: str | None, ops: str | None) -> str | None:
    """The window node whose op the subsystem attribution names (``kind`` ``lowering`` or
    ``decomposition``, ``ops`` its comma-separated op names): falling that op's code back made the
    window match eager, so it is the culprit whichever node's output shows the error (a uint8
    ``abs`` read by ``sum``, pytorch#187018). A node's own op first, else the op its Inductor
    decomposition reaches (``aten.arange`` lowered as ``prims.iota``, pytorch#175966)."""
    if kind not in ("lowering", "decomposition") or not ops:
        return None
    wanted = {op.strip() for op in ops.split(",")}
    for name in names:
        if str(view.nodes[name].target) in wanted:
            return name
    return next((name for name in names if wanted & decomposed_ops(view.nodes[name])), None)


def decomposed_ops(node: Any) -> set[str]:
    """The ops ``node``'s Inductor decomposition traces to, on concrete tensors of its recorded
    sizes (empty where it has no decomposition, symbolic sizes, or the trace fails)."""
    import torch
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    decomposition = select_decomp_table().get(node.target)
    if decomposition is None:
        return set()
    try:
        def concrete(value: Any) -> Any:
            if isinstance(value, torch.fx.Node):
                meta = value.meta.get("val")
                if not isinstance(meta, torch.Tensor) or any(not isinstance(size, int) for size in meta.shape):
                    raise ValueError("no concrete tensor")
                return torch.zeros(meta.shape, dtype=meta.dtype)
            return value

        args = [concrete(arg) for arg in node.args]
        kwargs = {key: concrete(value) for key, value in node.kwargs.items()}
        tensors = [i for i, arg in enumerate(args) if isinstance(arg, torch.Tensor)]

        def call(*values: Any) -> Any:
            called = list(args)
            for i, value in zip(tensors, values):
                called[i] = value
            return decomposition(*called, **kwargs)

        traced = make_fx(call, decomposition_table=select_decomp_table())(*[args[i] for i in tensors])
    except Exception as error:  # noqa: BLE001 - no decomposition to read: the node is not named by it
        stop_if_out_of_memory(error, "tracing a node's decomposition")
        return set()
    return {str(n.target) for n in traced.graph.nodes if n.op == "call_function"}


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
