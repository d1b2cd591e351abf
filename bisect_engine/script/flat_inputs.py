"""A Dynamo graph whose input is a list, as a graph of flat inputs: how script mode judges
compiled autograd's backward graphs (``torch._dynamo.config.compiled_autograd``).

Compiled autograd hands Dynamo one graph per backward; Dynamo's graph of it takes the backward's
tensors as one list (``L_inputs_``) and reads each by ``getitem``. The graph itself is functional:
the new gradients are its outputs (``AccumulateGrad`` returns them) and Dynamo's own code writes
them into ``.grad`` after the call. So a copy of the graph with one placeholder per list item
(:func:`flat_graph`), each ``AccumulateGrad`` as the value it returns (:func:`accumulated`: the
op itself returns nothing for a parameter's copy, which needs no gradient), is an ordinary graph: its call is judged as any other
(``script/call_check.py``), eager being the same FX graph run eagerly, and the engine captures
and localises it as any other. A list read in any other way than by constant index is left as it
is (None: the graph is then named as not checked).
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any, Sequence

import torch.fx as fx


@dataclass(frozen=True)
class FlatInputs:
    """The flat copy of a graph and how the program's arguments map onto it: per original
    placeholder, the length of the list it took, or None where it took a single value."""

    graph_module: fx.GraphModule
    lengths: tuple[int | None, ...]

    def flatten(self, args: Sequence[Any]) -> list[Any]:
        """The program's arguments as the flat graph takes them."""
        flat: list[Any] = []
        for value, length in zip(args, self.lengths):
            if length is None:
                flat.append(value)
            else:
                flat.extend(value)
        return flat

    def regroup(self, flat: Sequence[Any]) -> list[Any]:
        """Flat arguments as the program's graph takes them (each list a fresh one)."""
        args: list[Any] = []
        position = 0
        for length in self.lengths:
            if length is None:
                args.append(flat[position])
                position += 1
            else:
                args.append(list(flat[position:position + length]))
                position += length
        return args


def accumulated(grads: Sequence[Any], variable: Any, variable_grad: Any, has_post_hooks: bool) -> list[Any]:
    """What compiled autograd's ``AccumulateGrad`` returns, as values: the new gradient, added to
    the one ``.grad`` held (``torch/csrc/autograd/functions/accumulate_grad.h``: stolen or
    cloned when there is none, else ``variable_grad + new_grad``; layouts aside, the same values)."""
    del variable, has_post_hooks  # the parameter is only where the program's code stores the result
    return [grads[0] if variable_grad is None else variable_grad + grads[0]]


def _accumulates_grad(node: fx.Node) -> bool:
    target = node.target
    return (node.op == "call_function" and getattr(target, "__name__", None) == "AccumulateGrad"
            and getattr(target, "__module__", None) == "torch._dynamo.compiled_autograd.ops")


def _list_reads(placeholder: fx.Node, length: int) -> dict[int, list[fx.Node]] | None:
    """The ``getitem`` nodes reading each item of the list; None where the list is used otherwise."""
    reads: dict[int, list[fx.Node]] = {}
    for user in placeholder.users:
        index = user.args[1] if len(user.args) == 2 else None
        if (user.op != "call_function" or user.target is not operator.getitem or user.args[0] is not placeholder
                or not isinstance(index, int) or not -length <= index < length or user.kwargs):
            return None
        reads.setdefault(index % length, []).append(user)
    return reads


def flat_graph(graph_module: fx.GraphModule, example_inputs: Sequence[Any]) -> FlatInputs | None:
    """A copy of ``graph_module`` taking every list input as one placeholder per item (in the
    list's order, where the list stood); None when no input is a list or a list is read other
    than by constant index. The graph given is never changed."""
    placeholders = [node for node in graph_module.graph.nodes if node.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        return None
    lengths = tuple(len(value) if isinstance(value, (list, tuple)) else None for value in example_inputs)
    if all(length is None for length in lengths):
        return None
    graph = fx.Graph()
    mapping: dict[fx.Node, fx.Node] = {}
    for node in graph_module.graph.nodes:
        if node in mapping:  # a list item's read: the item's own placeholder now
            continue
        length = lengths[placeholders.index(node)] if node.op == "placeholder" else None
        if length is None:
            mapping[node] = graph.node_copy(node, lambda n: mapping[n])
            if _accumulates_grad(node):
                mapping[node].target = accumulated
            continue
        reads = _list_reads(node, length)
        if reads is None:
            return None
        items = [graph.placeholder(f"{node.name}_{i}") for i in range(length)]
        for index, users in reads.items():
            for user in users:
                mapping[user] = items[index]
    flat = fx.GraphModule(graph_module, graph, type(graph_module).__name__)
    return FlatInputs(flat, lengths)
