"""Tensors a graph holds as attributes (``get_attr``) and may write in place: a compiled optimizer
step (``torch.compile(opt.step)``) returns nothing and writes the parameters and the optimizer
state, which Dynamo installs on the graph module as attributes (static addresses), not inputs.

:func:`lift_attributes` turns such attributes into trailing placeholders of a copy of the graph, so
everything that judges a graph's inputs written in place (eager vs fp64 vs compiled, the capture,
the repro that holds the state before the step) judges them too, on copies: the live tensors are
never written by the tool.
"""
from __future__ import annotations

import re

import torch
import torch.fx as fx

from .graphs import attribute_at

# the prefix Dynamo gives lifted attributes' placeholders; kept in the names so labels can say
# "state" for them (see :func:`attribute_label`)
STATE_PREFIX = "state__"


def tensor_attributes(graph_module: fx.GraphModule) -> dict[str, torch.Tensor]:
    """Every tensor the graph reads through ``get_attr``, by target, in graph order (subgraph
    modules of higher-order ops are not tensors and stay attributes)."""
    found: dict[str, torch.Tensor] = {}
    for node in graph_module.graph.nodes:
        if node.op == "get_attr" and isinstance(target := str(node.target), str):
            value = attribute_at(graph_module, target)
            if isinstance(value, torch.Tensor):
                found[target] = value
    return found


def placeholder_name(target: str) -> str:
    return STATE_PREFIX + re.sub(r"\W", "_", target)


def lift_attributes(graph_module: fx.GraphModule, targets: list[str]) -> fx.GraphModule:
    """A copy of ``graph_module`` whose ``get_attr`` nodes for ``targets`` are placeholders, in
    that order, after the graph's own. The graph module given is not changed."""
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    nodes = list(graph_module.graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    for node in placeholders:
        env[node] = graph.node_copy(node, lambda n: env[n])
    lifted = {}
    for target in targets:
        lifted[target] = graph.placeholder(placeholder_name(target))
        value = attribute_at(graph_module, target)
        lifted[target].meta["example_value"] = value
        lifted[target].meta["val"] = value
    for node in nodes:
        if node.op == "placeholder":
            continue
        if node.op == "get_attr" and str(node.target) in lifted:
            env[node] = lifted[str(node.target)]
            continue
        env[node] = graph.node_copy(node, lambda n: env[n])
    return fx.GraphModule(graph_module, graph, class_name=type(graph_module).__name__)


def attribute_label(placeholder: str) -> str | None:
    """``self___state_..._exp_avg`` for a lifted placeholder's name; None for another name."""
    return placeholder[len(STATE_PREFIX):] if placeholder.startswith(STATE_PREFIX) else None
