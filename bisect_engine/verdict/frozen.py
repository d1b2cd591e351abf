"""Parameters as a compile with ``torch._inductor.config.freezing`` holds them: constants.

Under freezing (and ``no_grad``), Dynamo installs a module's parameters as attributes of its graph,
AOT Autograd lifts them as the graph's first inputs (``params_flat``) and Inductor folds them into
constants, so passes and templates that need a constant weight apply (on CPU, max-autotune's C++
GEMM template and the mkldnn linear rewrite). A cut copy that took those weights as inputs would
compile other code than the user's compile did. :func:`frozen_copy` turns the placeholders of a
copy that stand for such values into parameters of the module compiled, so Inductor freezes them
as it froze the user's.

Depends on torch and the standard library only: the repro renderer embeds this file verbatim in a
repro whose graph reads frozen values (``CONSTANT_INPUTS``).
"""
from __future__ import annotations

import copy
from typing import Any, Iterable, Sequence

import torch
import torch.fx as fx

FROZEN_PREFIX = "_frozen_"


def freezing_on() -> bool:
    """Whether a compile started now freezes parameters (Inductor's ``freezing`` and no grad)."""
    return bool(torch._inductor.config.freezing) and not torch.is_grad_enabled()


def frozen_copy(graph_module: fx.GraphModule, positions: Iterable[int], values: Sequence[Any]) -> fx.GraphModule:
    """A copy of ``graph_module`` whose placeholders at ``positions`` are parameters holding
    ``values[position]`` (read through ``get_attr``); the module given is not changed."""
    chosen = set(positions)
    frozen = copy.deepcopy(graph_module)
    placeholders = [node for node in frozen.graph.nodes if node.op == "placeholder"]
    first = next((node for node in frozen.graph.nodes if node.op != "placeholder"), None)
    for position, node in enumerate(placeholders):
        if position not in chosen:
            continue
        name = FROZEN_PREFIX + node.name
        value = values[position]
        frozen.register_parameter(name, torch.nn.Parameter(value.detach().clone(), requires_grad=False))
        with frozen.graph.inserting_before(first):
            attribute = frozen.graph.get_attr(name)
        attribute.meta.update(node.meta)
        node.replace_all_uses_with(attribute)
        frozen.graph.erase_node(node)
    frozen.graph.lint()
    frozen.recompile()
    return frozen


def kept_inputs(count: int, positions: Iterable[int]) -> list[int]:
    """The positions of the inputs a frozen copy still takes."""
    chosen = set(positions)
    return [i for i in range(count) if i not in chosen]
