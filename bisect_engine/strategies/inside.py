"""Inside a higher-order op: which op of its subgraph makes it wrong.

A ``cond``, ``flex_attention``, ``invoke_subgraph``, ``while_loop`` or ``scan`` node is judged as
one op (its subgraphs run in fp64 for the reference; eager flex attention on CPU is a dense math
formulation that runs in fp64 too). When it is wrong, each subgraph it runs becomes a graph of its
own, traced by ``make_fx`` on the values it is called with in this graph (a loop's body: on its
first iteration), and every node of it is judged alone (the same per-node check, the same rule).
A loop whose body is right on its first iteration is replayed eagerly iteration by iteration
(:func:`later_calls`, at most :data:`LATER_ITERATIONS`), its body checked on each iteration's carry
until one is wrong: a bug only large values reach is found on the iteration that reaches them
(``Inside.iteration``; the repro holds that iteration's carry). The op named is the first wrong one there; the HOP is
its context (:class:`Inside`). A subgraph whose ops are all right alone leaves the HOP named
(the fault is in how Inductor lowers the HOP itself: the flex template, the cond codegen).
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.fx as fx

from ..search import BudgetExhausted, stop_if_out_of_memory
from ..verdict.graphs import CapturedGraph, attribute_at, is_submodule_attr, op_name, source_location
from ..verdict.oracle import GraphContext
from .nodes import check_nodes
from .protocol import GraphSearch

log = logging.getLogger(__name__)

# A loop's iterations after the first whose body is checked on its carry (one compile each), the
# search's budget permitting: a bug the carry reaches later than this is left named on the HOP.
LATER_ITERATIONS = 16


@dataclass(frozen=True)
class Inside:
    """The op inside a HOP's subgraph that is wrong alone (``op`` None: none is)."""

    hop: str  # "flex_attention", "cond", "invoke_subgraph", "while_loop", "scan"
    hop_node: str
    # its role: "score_mod", "mask_mod", "true_branch", "false_branch", "body", "body_fn", "combine_fn"
    subgraph: str
    attribute: str  # the get_attr target holding it (sdpa_score0, true_graph_0, subgraph_0)
    graph: str  # the name its per-node check is judged under
    op: str | None = None
    node: str | None = None
    source: str | None = None
    checked: int = 0
    note: str = ""
    # a loop's body: the iteration (from 0) whose carry the op was found wrong on; 0 when the first
    iteration: int = 0
    # that iteration's body as a graph of its own (a GraphContext), for the repro: None on the first
    at: Any = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"hop": self.hop, "hop_node": self.hop_node, "subgraph": self.subgraph, "attribute": self.attribute,
                "op": self.op, "node": self.node, "source": self.source, "checked_nodes": self.checked,
                "note": self.note, "iteration": self.iteration}


def hop_name(node: fx.Node) -> str | None:
    """The HOP's name (``flex_attention``), or None for an ordinary op."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.HigherOrderOperator):
        return None
    return str(node.target.name())


def subgraph_calls(node: fx.Node, values: dict[str, Any]) -> list[tuple[str, str, list[Any]]]:
    """(role, attribute, inputs) for each subgraph the HOP node runs, on this call's values."""
    hop = hop_name(node)
    arguments: Any = node.args  # the HOP's own argument layout, read by position below
    read = lambda arg: values[arg.name] if isinstance(arg, fx.Node) else arg  # noqa: E731
    if hop == "cond":
        taken = bool(read(arguments[0]))
        branch = arguments[1] if taken else arguments[2]
        return [("true_branch" if taken else "false_branch", str(branch.target), [read(a) for a in arguments[3]])]
    if hop == "invoke_subgraph":
        return [("body", str(arguments[0].target), [read(a) for a in arguments[2:]])]
    if hop == "flex_attention":
        return _flex_calls(node, read)
    if hop == "while_loop":  # its first iteration: the carried values as they enter, then the test
        operands = [read(a) for a in (*arguments[2], *arguments[3])]
        return [("body_fn", str(arguments[1].target), operands), ("cond_fn", str(arguments[0].target), operands)]
    if hop == "scan":  # its first step: the initial carry, each xs at index 0, the extra inputs
        slices = [read(a)[0] for a in arguments[2]]
        return [("combine_fn", str(arguments[0].target),
                 [*(read(a) for a in arguments[1]), *slices, *(read(a) for a in arguments[3])])]
    return []


def _flex_calls(node: fx.Node, read: Callable[[Any], Any]) -> list[tuple[str, str, list[Any]]]:
    """The score_mod called on every score at once (the scores ``q @ k^T * scale`` and broadcast
    index tensors b, h, q_idx, kv_idx, as the dense math formulation calls it), then the block
    mask's mask_mod on the same index tensors."""
    arguments: Any = node.args
    query, key, score_mod, block_mask = read(arguments[0]), read(arguments[1]), arguments[3], arguments[4]
    scale = read(arguments[5])
    heads, kv_heads = query.shape[1], key.shape[1]
    key = key.repeat_interleave(heads // kv_heads, dim=1) if kv_heads != heads else key
    scores = (query @ key.transpose(-2, -1)) * (scale if scale is not None else query.shape[-1] ** -0.5)
    index = [torch.arange(size, dtype=torch.int32, device=scores.device)
             .view(*[size if d == i else 1 for d in range(4)]) for i, size in enumerate(scores.shape)]
    calls: list[tuple[str, str, list[Any]]] = []
    if isinstance(score_mod, fx.Node) and is_submodule_attr(score_mod):
        calls.append(("score_mod", str(score_mod.target), [scores, *index, *(read(a) for a in arguments[7])]))
    mask_mod = block_mask[-1] if isinstance(block_mask, (tuple, list)) and block_mask else None
    if isinstance(mask_mod, fx.Node) and is_submodule_attr(mask_mod):
        buffers = [read(a) for a in arguments[8]] if len(arguments) > 8 else []
        calls.append(("mask_mod", str(mask_mod.target), [*index, *buffers]))
    return calls


def _module(root: fx.GraphModule, attribute: str) -> Any:
    module = attribute_at(root, attribute)
    if module is None:
        raise AttributeError(f"{type(root).__name__} has no attribute {attribute}")
    return module


def traced_subgraph(root: fx.GraphModule, attribute: str, inputs: list[Any], name: str, index: int) -> CapturedGraph:
    """The subgraph as an aten graph of its own, traced on these inputs (shapes in its metadata)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    module = _module(root, attribute)
    with torch.no_grad():
        traced = make_fx(module)(*inputs)
    return CapturedGraph(name=name, kind="forward", index=index, graph_module=traced, inputs=list(inputs), called=True)


def descend(context: GraphContext, node_name: str, search: GraphSearch, register: Callable[[GraphContext], None]) -> Inside | None:
    """The op inside HOP node ``node_name`` that is wrong alone; None when the node is no HOP.
    ``register`` makes a subgraph's context known to the search's judge."""
    node = context.view.nodes[node_name]
    hop = hop_name(node)
    if hop is None:
        return None
    calls = subgraph_calls(node, context.eager_values)
    if not calls:  # a HOP whose calls we do not know how to replay: the HOP stays named, said so
        return _not_descended(node, node_name, hop, context.name)
    found: Inside | None = None
    for role, attribute, inputs in calls:
        inside = _check_call(context, node_name, (hop, role, attribute), inputs, 0, search, register)
        if inside.op is not None:
            return inside
        found = found or inside
    if hop in ("while_loop", "scan") and found is not None:
        later, checked = _later_iterations(context, node_name, hop, calls[0], search, register)
        if later is not None:
            return later
        return dataclasses.replace(found, note=f"{found.note} (its {found.subgraph} checked on {checked + 1} "
                                                f"iteration(s), replayed eagerly)") if checked else found
    return found


def _later_iterations(context: GraphContext, node_name: str, hop: str, first: tuple[str, str, list[Any]],
                      search: GraphSearch, register: Callable[[GraphContext], None]) -> tuple[Inside | None, int]:
    """The loop's body checked on each later iteration's carry (eager): the first wrong one named,
    else None; and how many later iterations were checked."""
    role, attribute, _ = first
    try:
        carries = later_calls(context.captured.graph_module, context.view.nodes[node_name], context.eager_values)
    except Exception as error:  # noqa: BLE001 - the first iteration's finding stands
        stop_if_out_of_memory(error, "replaying a loop's iterations")
        log.debug("replaying %s eagerly failed", node_name, exc_info=True)
        return None, 0
    for iteration, inputs in enumerate(carries, start=1):
        try:
            inside = _check_call(context, node_name, (hop, role, attribute), inputs, iteration, search, register)
        except BudgetExhausted:  # the budget cut (it remembers): the first iteration's finding stands
            return None, iteration - 1
        if inside.op is not None:
            return inside, iteration
    return None, len(carries)


def _check_call(context: GraphContext, node_name: str, where: tuple[str, str, str], inputs: list[Any],
                iteration: int, search: GraphSearch, register: Callable[[GraphContext], None]) -> Inside:
    """One subgraph call traced on ``inputs`` and its ops judged alone: the first wrong one, or a note."""
    hop, role, attribute = where
    name = f"{context.name}.{node_name}.{attribute}" + (f".iteration{iteration}" if iteration else "")
    try:
        captured = traced_subgraph(context.captured.graph_module, attribute, inputs, name, context.captured.index)
        inner = GraphContext.from_captured(captured, context.oracle)
    except Exception as error:  # noqa: BLE001 - the HOP stays named; the note says why
        stop_if_out_of_memory(error, "tracing a higher-order op's body")
        log.debug("tracing %s failed", name, exc_info=True)
        note = f"its {role} could not be traced alone ({type(error).__name__}: {str(error)[:200]})"
        return Inside(hop, node_name, role, attribute, name, note=note, iteration=iteration)
    register(inner)
    nodes = check_nodes(inner, search)
    if not nodes.culprits:
        return Inside(hop, node_name, role, attribute, name, checked=len(nodes.checked), iteration=iteration,
                      note=f"every op of its {role} is right alone: the fault is in how the HOP is lowered")
    culprit = nodes.culprits[0]
    inner_node = inner.view.nodes[culprit]
    return Inside(hop, node_name, role, attribute, name, op=op_name(inner_node), node=culprit,
                  source=_source(_module(context.captured.graph_module, attribute), inner_node),
                  checked=len(nodes.checked), iteration=iteration, at=inner if iteration else None)


def later_calls(root: fx.GraphModule, node: fx.Node, values: dict[str, Any],
                limit: int = LATER_ITERATIONS) -> list[list[Any]]:
    """The inputs a loop's body is called with on iterations 1, 2, ... (at most ``limit``), the loop
    replayed eagerly from the values it enters with: a while_loop's carry while its cond_fn holds,
    a scan's carry with each xs at that step."""
    hop = hop_name(node)
    arguments: Any = node.args  # the HOP's own argument layout, read by position below
    read = lambda arg: values[arg.name] if isinstance(arg, fx.Node) else arg  # noqa: E731
    calls: list[list[Any]] = []
    with torch.no_grad():
        if hop == "while_loop":
            test, body = _module(root, str(arguments[0].target)), _module(root, str(arguments[1].target))
            carry, extra = [read(a) for a in arguments[2]], [read(a) for a in arguments[3]]
            while len(calls) < limit:
                carry = list(body(*carry, *extra))
                if not bool(test(*carry, *extra)):
                    break
                calls.append([*carry, *extra])
        elif hop == "scan":
            combine = _module(root, str(arguments[0].target))
            carry, xs, extra = [read(a) for a in arguments[1]], [read(a) for a in arguments[2]], [read(a) for a in arguments[3]]
            steps = int(xs[0].shape[0]) if xs else 0
            for step in range(min(steps, limit + 1)):
                if step:
                    calls.append([*carry, *(x[step] for x in xs), *extra])
                carry = list(combine(*carry, *(x[step] for x in xs), *extra))[:len(carry)]
    return calls


def _not_descended(node: fx.Node, node_name: str, hop: str, graph: str) -> Inside | None:
    """Not checked inside: a HOP with subgraphs whose calls :func:`subgraph_calls` cannot replay
    (associative_scan, map, ...). None for a HOP that holds no subgraph."""
    attributes = [str(arg.target) for arg in node.all_input_nodes if is_submodule_attr(arg)]
    if not attributes:
        return None
    return Inside(hop, node_name, "subgraphs", ", ".join(attributes), f"{graph}.{node_name}",
                  note=f"not checked inside: the tool does not descend into {hop}'s subgraphs; "
                       f"{hop} is named as a whole")


def _source(subgraph: Any, inner_node: fx.Node) -> str | None:
    """Where the inner op was written: the retraced subgraph keeps no stack; the captured one's
    node of the same op may (None: unknown)."""
    for node in getattr(subgraph, "graph", fx.Graph()).nodes:
        if node.target is inner_node.target and source_location(node)[0]:
            return source_location(node)[0]
    return None
