"""Per-node measurements of one captured graph, as the environment bundle records them.

Every checkable node is run alone on the values of its inputs: eagerly, in fp64, and compiled by
Inductor (the per-node check of :meth:`GraphContext.judge_nodes`: one compile per distinct node).
Fed one environment's recorded inputs, another environment's kernels can be judged op by op.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch.fx as fx

from ..search import BudgetExhausted
from ..verdict.compare import Outcome
from ..verdict.compiler import Compiler
from ..verdict.fx_eval import interpret
from ..verdict.graphs import GraphView, build_subgraph, is_tensor_value, reference_inputs, value_nodes
from ..verdict.oracle import GraphContext


@dataclass(frozen=True)
class NodeValues:
    """Each checkable node's tensors (by value name) computed alone on the given input values."""

    eager: dict[str, Any] = field(default_factory=dict)
    fp64: dict[str, Any] = field(default_factory=dict)
    compiled: dict[str, Any] = field(default_factory=dict)
    compile_error: str = ""


def checkable_names(view: GraphView) -> list[str]:
    return [node.name for node in view.compute_nodes if view.checkable(node)]


def tensor_value_names(node: fx.Node) -> list[str]:
    return [value.name for value in value_nodes(node) if is_tensor_value(value)]


def measure(context: GraphContext, compiler: Compiler, label: str) -> NodeValues:
    """Run every checkable node alone on ``context.eager_values`` (eager, fp64, compiled)."""
    names = checkable_names(context.view)
    if not names:
        return NodeValues()
    subgraph = build_subgraph(context.view, names, isolate=True, outputs="all")
    inputs = reference_inputs(subgraph, context.eager_values)
    eager = interpret(subgraph.graph_module, inputs)
    fp64 = interpret(subgraph.graph_module, inputs, upcast=True)
    outputs = set(subgraph.output_names)
    keep = lambda values: {k: v for k, v in values.items() if k in outputs}  # noqa: E731
    try:
        verdict = context.judge_nodes(names, compiler, label=label)
    except BudgetExhausted as exhausted:
        return NodeValues(keep(eager), keep(fp64), {}, f"budget: {exhausted}")
    crashed = verdict.error if verdict.outcome is Outcome.CRASH else ""
    return NodeValues(keep(eager), keep(fp64), dict(verdict.compiled_values), crashed)
