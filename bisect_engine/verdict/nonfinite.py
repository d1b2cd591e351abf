"""Where NaN/Inf first appear: pure functions over a graph's per-node values.

A node is a non-finite *origin* when its output holds NaN while none of its inputs does, or Inf
while its inputs are finite and it was not asked for an infinity (``masked_fill(x, m, -inf)`` in an
attention mask is intended, not a bug). A run *has a NaN problem* when any node holds NaN or an
output of the graph holds Inf: NaN in both eager and compiled is reported, never taken as agreement.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import torch
import torch.fx as fx

from .graphs import GraphView, value_nodes


def _flags(value: Any) -> tuple[bool, bool]:
    """(has NaN, has Inf) of a value that may be a tensor or a tuple of them."""
    if isinstance(value, torch.Tensor):
        if not (value.is_floating_point() or value.is_complex()):
            return False, False
        return bool(torch.isnan(value).any()), bool(torch.isinf(value).any())
    if isinstance(value, (tuple, list)):
        flags = [_flags(v) for v in value]
        return any(f[0] for f in flags), any(f[1] for f in flags)
    return False, False


def _asks_for_infinity(node: fx.Node) -> bool:
    literals = [*node.args, *node.kwargs.values()]
    return any(isinstance(v, float) and math.isinf(v) for v in literals)


def _node_output(node: fx.Node, values: Mapping[str, Any]) -> Any:
    return [values[v.name] for v in value_nodes(node) if v.name in values]


def first_origin(
    view: GraphView, outputs: Mapping[str, Any], inputs: Mapping[str, Any] | None = None
) -> fx.Node | None:
    """The first node (execution order) whose own output turns non-finite.

    ``outputs`` holds each node's output; ``inputs`` the values its inputs had (by default the
    same run). For compiled values from the stitched check, inputs are eager's reference values.
    """
    inputs = outputs if inputs is None else inputs
    for node in view.compute_nodes:
        if not any(v.name in outputs for v in value_nodes(node)):
            continue
        has_nan, has_inf = _flags(_node_output(node, outputs))
        if not (has_nan or has_inf):
            continue
        input_flags = [_flags(inputs[source.name]) for source in node.all_input_nodes if source.name in inputs]
        inputs_nan = any(f[0] for f in input_flags)
        inputs_inf = any(f[1] for f in input_flags)
        if has_nan and not inputs_nan:
            return node
        if has_inf and not (inputs_nan or inputs_inf or _asks_for_infinity(node)):
            return node
    return None


def has_nan_problem(view: GraphView, values: Mapping[str, Any], graph_outputs: list[Any]) -> bool:
    """Any NaN in any node, or Inf in what the graph returns."""
    if any(_flags(values[n.name])[0] for n in view.compute_nodes if n.name in values):
        return True
    return any(any(_flags(v)) for v in graph_outputs)
