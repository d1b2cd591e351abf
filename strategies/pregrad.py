"""Where a torch-level (pre-grad) pass changes what the model computes, without a compile.

Inductor runs its pre-grad passes (and the user's ``pre_grad_custom_pass``) on the Dynamo graph,
before AOT Autograd: no captured aten graph holds their rewrite, so the per-graph search cannot
see it, and only the model-level check (a real ``torch.compile``) diverges. Once a model-level
switch has named such a pass, :func:`localise_pre_grad` applies the passes to a copy of each
Dynamo graph, runs the graph before and after eagerly on its real inputs, and, where the outputs
differ, names the nodes the passes rewrote (before and after, with source lines) and the aten ops
each rewritten node runs. The graph is never mutated; nothing is compiled.
"""
from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.fx as fx
import torch.utils._pytree as pytree
from torch.fx.experimental.proxy_tensor import make_fx

from ..verdict.compare import Outcome, Tolerance, compare_values
from ..verdict.fx_eval import clone_value
from ..verdict.graphs import CapturedGraph, op_name, source_location
from ..verdict.inductor_adapter import pre_grad_passes

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RewrittenNode:
    node: str
    before: str | None  # the node as Dynamo recorded it ("add = operator.add(linear, 1)"); None: added
    after: str | None  # the node after the passes; None: removed
    source: str | None
    aten_ops: tuple[str, ...] = ()  # what the rewritten node runs, traced to aten

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "before": self.before, "after": self.after, "source": self.source,
                "aten_ops": list(self.aten_ops)}


@dataclass(frozen=True)
class PassRewrite:
    graph: str  # the forward graph traced from that Dynamo graph
    nodes: tuple[RewrittenNode, ...]
    max_abs_diff: float  # the graph's outputs, eagerly, after the passes against before

    @property
    def aten_op(self) -> str | None:
        return next((op for n in self.nodes for op in n.aten_ops), None)

    def to_json(self) -> dict[str, Any]:
        return {"graph": self.graph, "aten_op": self.aten_op, "max_abs_diff": self.max_abs_diff,
                "rewritten": [n.to_json() for n in self.nodes]}


def _line(node: fx.Node) -> str:
    target = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
    module = getattr(node.target, "__module__", "") if not isinstance(node.target, str) else ""
    name = f"{module}.{target}" if module and module not in ("builtins",) else str(target)
    args = ", ".join([*(repr(a) if not isinstance(a, fx.Node) else a.name for a in node.args),
                      *(f"{k}={v.name if isinstance(v, fx.Node) else repr(v)}" for k, v in node.kwargs.items())])
    return f"{node.name} = {name}({args})"


def rewritten_nodes(before: fx.GraphModule, after: fx.GraphModule) -> list[tuple[fx.Node | None, fx.Node | None]]:
    """(before, after) pairs of the call nodes that the passes added, removed or changed."""
    old = {n.name: n for n in before.graph.nodes if n.op.startswith("call")}
    new = {n.name: n for n in after.graph.nodes if n.op.startswith("call")}
    pairs: list[tuple[fx.Node | None, fx.Node | None]] = []
    for name, node in new.items():
        if name not in old or _line(old[name]) != _line(node):
            pairs.append((old.get(name), node))
    pairs += [(node, None) for name, node in old.items() if name not in new]
    return pairs


def _aten_ops(after: fx.GraphModule, node: fx.Node, inputs: list[Any]) -> tuple[str, ...]:
    """The aten ops ``node`` runs: its target traced by ``make_fx`` on the values it was fed."""
    if node.op != "call_function":
        return ()
    try:
        interpreter = fx.Interpreter(after, garbage_collect_values=False)
        with torch.no_grad():
            interpreter.run(*[clone_value(v) for v in inputs])
            args = fx.node.map_arg(node.args, lambda n: interpreter.env[n])
            kwargs = fx.node.map_arg(node.kwargs, lambda n: interpreter.env[n])
            traced = make_fx(lambda *a: node.target(*a, **kwargs))(*args)
    except Exception as error:  # noqa: BLE001 - the op stays unnamed; the rewrite is still shown
        log.debug("could not trace %s to aten: %s", node.name, error)
        return ()
    return tuple(dict.fromkeys(op_name(n) for n in traced.graph.nodes if n.op == "call_function"))


def localise_pre_grad(captured: Sequence[CapturedGraph], tolerance: Tolerance = Tolerance()) -> PassRewrite | None:
    """The first Dynamo graph whose pre-grad rewrite changes its outputs, eagerly, and how."""
    for graph in captured:
        if graph.torch_level is None:
            continue
        original, inputs = graph.torch_level
        before = copy.deepcopy(original)
        try:
            after = pre_grad_passes(original, inputs)
            with torch.no_grad():
                outputs_before = pytree.tree_leaves(before(*[clone_value(v) for v in inputs]))
                outputs_after = pytree.tree_leaves(after(*[clone_value(v) for v in inputs]))
        except Exception as error:  # noqa: BLE001 - cannot replay this graph's passes: say nothing of it
            log.warning("could not replay the pre-grad passes on %s: %s: %s", graph.name, type(error).__name__, error)
            continue
        pairs = rewritten_nodes(before, after)
        verdicts = compare_values(outputs_before, outputs_before, outputs_after, tolerance)
        if not pairs or all(v.outcome is Outcome.MATCH for v in verdicts):
            continue
        diffs = [float((a.double() - b.double()).abs().max()) for a, b in zip(outputs_before, outputs_after)
                 if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and a.numel()]
        nodes = tuple(RewrittenNode((new or old).name, _line(old) if old is not None else None,
                                    _line(new) if new is not None else None,
                                    source_location(new if new is not None else old)[0],
                                    _aten_ops(after, new, inputs) if new is not None else ())
                      for old, new in pairs)
        return PassRewrite(graph.name, nodes, max(diffs, default=float("nan")))
    return None
