"""Parameters as a compile with ``torch._inductor.config.freezing`` holds them: constants.

Under freezing (and ``no_grad``), Dynamo installs a module's parameters as attributes of its graph,
AOT Autograd lifts them as the graph's first inputs (``params_flat``) and Inductor folds them into
constants, so passes and templates that need a constant weight apply (on CPU, max-autotune's C++
GEMM template and the mkldnn linear rewrite). A cut copy that took those weights as inputs would
compile other code than the user's compile did. :func:`frozen_copy` turns the placeholders of a
copy that stand for such values into parameters of the module compiled, so Inductor freezes them
as it froze the user's.

A tensor the compiled function makes itself (``torch.tensor([1e9])``) is a constant of the graph
Inductor lowers whatever the settings: AOT Autograd traces it to a ``get_attr`` attribute, not an
input, and Inductor inlines a small one into the kernel's index arithmetic (pytorch#175966: an int64
``arange(n) * tensor([1e9])`` folded into 32-bit index math). ``parameters=False`` installs such
values as plain attributes (neither parameter nor buffer, so AOT Autograd does not lift them):
constants of the graph compiled, as in the user's.

Depends on torch and the standard library only: the repro renderer embeds this file verbatim in a
repro whose graph reads frozen values (``CONSTANT_INPUTS``).
"""
from __future__ import annotations

import copy
import warnings
from typing import Any, Iterable, Sequence

import torch
import torch.fx as fx

FROZEN_PREFIX = "_frozen_"
# the graph's own constants (``parameters=False``): plain attributes; a ``GraphModule`` copy
# (``copy.deepcopy``) registers them as buffers again, :func:`graph_constants_kept` undoes that
CONSTANT_PREFIX = "_graph_constant_"


def freezing_on() -> bool:
    """Whether a compile started now freezes parameters (Inductor's ``freezing`` and no grad)."""
    return bool(torch._inductor.config.freezing) and not torch.is_grad_enabled()


def frozen_copy(graph_module: fx.GraphModule, positions: Iterable[int], values: Sequence[Any],
                parameters: bool = True) -> fx.GraphModule:
    """A copy of ``graph_module`` whose placeholders at ``positions`` are parameters holding
    ``values[position]`` (read through ``get_attr``); the module given is not changed.
    ``parameters=False``: plain tensor attributes instead (the graph's own constants)."""
    chosen = set(positions)
    frozen = copy.deepcopy(graph_module)
    placeholders = [node for node in frozen.graph.nodes if node.op == "placeholder"]
    first = next((node for node in frozen.graph.nodes if node.op != "placeholder"), None)
    for position, node in enumerate(placeholders):
        if position not in chosen:
            continue
        name = (FROZEN_PREFIX if parameters else CONSTANT_PREFIX) + node.name
        value = values[position]
        if parameters:
            frozen.register_parameter(name, torch.nn.Parameter(value.detach().clone(), requires_grad=False))
        else:
            setattr(frozen, name, value.detach().clone())  # not a buffer: AOT Autograd would lift it
        with frozen.graph.inserting_before(first), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # fx looks for a parameter, buffer or module only
            attribute = frozen.graph.get_attr(name)
        attribute.meta.update(node.meta)
        node.replace_all_uses_with(attribute)
        frozen.graph.erase_node(node)
    frozen.graph.lint()
    frozen.recompile()
    return frozen


def graph_constants_kept(graph_module: fx.GraphModule) -> fx.GraphModule:
    """``graph_module`` (changed in place) with the graph constants :func:`frozen_copy` made plain
    attributes again: ``GraphModule``'s copy registers every tensor attribute as a buffer."""
    for name in [n for n in graph_module._buffers if n.startswith(CONSTANT_PREFIX)]:
        value = graph_module._buffers.pop(name)
        setattr(graph_module, name, value)
    return graph_module


def kept_inputs(count: int, positions: Iterable[int]) -> list[int]:
    """The positions of the inputs a frozen copy still takes."""
    chosen = set(positions)
    return [i for i in range(count) if i not in chosen]
