"""A fallback for captured graphs our own recompile cannot compile, where a real ``torch.compile`` can.

We capture with no decomposition table, so that a wrong decomposition shows up; Inductor applies
its table when it compiles our graph. A composite op such as ``reshape`` was resolved at capture
to ``view`` for the strides eager gave; a decomposition may give other strides (Inductor's ``cat``
with an empty tensor returns a non-contiguous clone, as in HF T5 and GPT-2's default cache), and
the recorded ``view`` then fails where the real compile, which resolved ``reshape`` against the
decomposed strides, did not. :func:`views_as_reshapes` turns every ``view`` back into ``reshape``,
which resolves to a view or a copy for whatever strides it meets: the same values, and a graph
that compiles. The original is never mutated.
"""
from __future__ import annotations

import copy

import torch
import torch.fx as fx

aten = torch.ops.aten
_VIEWS = {aten.view.default: aten.reshape.default, aten._unsafe_view.default: aten.reshape.default}


def views_as_reshapes(graph_module: fx.GraphModule) -> tuple[fx.GraphModule, int]:
    """A copy of ``graph_module`` with its views made reshapes, and how many were changed."""
    rewritten = copy.deepcopy(graph_module)
    changed = 0
    for node in rewritten.graph.nodes:
        if node.op == "call_function" and node.target in _VIEWS:
            node.target = _VIEWS[node.target]
            changed += 1
    rewritten.recompile()
    return rewritten, changed
