"""A graph's higher-order-op subgraphs as code for the repro.

A cut that holds a ``cond``, ``flex_attention`` or ``invoke_subgraph`` node reads its subgraphs
through ``get_attr`` (``self.true_graph_0``, ``self.sdpa_score0``). The repro holds no pickled
``GraphModule`` (``torch.load(weights_only=True)`` refuses them): each subgraph becomes a class of
its own, rendered from its code, and ``Repro.__init__`` sets it as the attribute the code reads.
Pure: the same graph gives the same text.
"""
from __future__ import annotations

import re

import torch
import torch.fx as fx

from ..verdict.graphs import attribute_at


def _submodules(graph_module: torch.nn.Module) -> list[tuple[str, fx.GraphModule]]:
    """(attribute, module) for each ``get_attr`` of a module, in graph order, each once."""
    graph = getattr(graph_module, "graph", None)
    found: dict[str, fx.GraphModule] = {}
    for node in graph.nodes if graph is not None else ():
        if node.op != "get_attr" or node.target in found:
            continue
        value = attribute_at(graph_module, str(node.target))
        if isinstance(value, fx.GraphModule):
            found[str(node.target)] = value
    return list(found.items())


def _class_name(prefix: str, attribute: str) -> str:
    return f"{prefix}_{re.sub(r'[^0-9A-Za-z_]', '_', attribute)}"


def _indent(code: str) -> str:
    return "\n".join(f"    {line}" if line else "" for line in code.splitlines())


def init_code(graph_module: torch.nn.Module, prefix: str = "Repro") -> str:
    """``__init__`` setting each subgraph attribute to an instance of its class ("" when none)."""
    submodules = _submodules(graph_module)
    if not submodules:
        return ""
    lines = ["def __init__(self):", "    super().__init__()"]
    lines += [f"    self.{attribute} = {_class_name(prefix, attribute)}()" for attribute, _ in submodules]
    return "\n".join(lines) + "\n\n"


def subgraph_classes(graph_module: torch.nn.Module, prefix: str = "Repro") -> str:
    """Every subgraph's class (nested ones first), for the text before ``class Repro``."""
    blocks: list[str] = []
    for attribute, module in _submodules(graph_module):
        name = _class_name(prefix, attribute)
        blocks.append(subgraph_classes(module, name))
        body = init_code(module, name) + module.code.strip()
        blocks.append(f"class {name}(torch.nn.Module):\n{_indent(body)}\n\n\n")
    return "".join(blocks)
