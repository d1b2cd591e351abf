"""Which stage judges a graph first: its whole compile, or the per-node check.

A clean graph needs only its whole compile; an isolated wrong op needs only the per-node check and
the culprit compiled alone (its compiled value, replayed eagerly, stands for the whole graph: see
``pipeline._culprit_first``). Which one a graph is, nobody knows before compiling it: whole first,
a clean graph costs one compile and a wrong one pays its whole compile on top of the two; per-node
check first, a wrong graph costs two and a clean one pays the per-node check on top of its whole
compile. Where the run knows the program diverges (script mode, a scan's failing batch or step:
``EngineOptions.divergence_known``) the per-node check comes first. Where it does not (a model
file), clean runs are the common case (CI, a user's first try), so the whole graph comes first
unless its compile is much dearer than the per-node check's: a deep stack of identical layers,
whose per-node check compiles each distinct node once (resmlp600: 462 compute nodes, 18 copies).
The per-node check's cost is not only its compiles: every node's value is computed compiled, in
fp64 and compared, so a graph of large values (an LM head, a tied embedding's gradient) pays more
for judging its nodes than for compiling them, and goes whole first even when deep.
"""
from __future__ import annotations

from typing import Any

import torch

from ..verdict.graphs import plan_copies
from ..verdict.oracle import GraphContext
from .options import EngineOptions

# A compile's cost grows with the kernels it builds: the whole graph's (at most one per compute
# node, fewer once fused) against the per-node check's copies (one per distinct node). Measured
# (notes/clean1.md): at 2.3-2.4 compute nodes per copy (tiny HF BERT, GPT-2) the two compiles take
# about as long; the whole graph first pays off while clean runs are at least twice as common as
# wrong ones and its compile is at most twice the per-node check's: about 5 nodes per copy. Every
# corpus graph is below it (the largest, T5 training's backward, 4.4), the benchmarks' deep stacks
# far above (deep458 20, resmlp600 26).
NODES_PER_COPY = 5.0
# Judging the per-node check's values (each node's compiled runs, its fp64 reference and the
# comparison) costs about one copy's compile per this many elements of the nodes' values. Measured
# on GPT-2 (full width and vocabulary, 2 layers, 128 tokens; benchmarks/profile_memory.py, load
# 10-14): its forward's per-node check took 101 s compiling 48 copies (2.1 s a copy) and 240 s
# running and judging 101 nodes of 67 M elements (3.6 us an element): 0.6 M elements a copy; the
# whole graph's judgement (one fp64 run, its outputs compared) costs about 0.7 of the per-node
# check's per element, so these elements weigh on the per-node side with a net 1 M a copy. Small
# graphs (the corpus, the deep stacks of tiny values) are below a copy's worth: their order stands.
ELEMENTS_PER_COPY = 1_000_000


def whole_first(context: GraphContext, options: EngineOptions) -> bool:
    """Compile ``context``'s whole graph before its per-node check (see the module docstring)."""
    if options.divergence_known:
        return False
    view = context.view
    checked = [node.name for node in view.compute_nodes if view.checkable(node)]
    copies = len(plan_copies(view, checked, context.eager_values).members)
    judging = checked_elements(context.eager_values, checked) / ELEMENTS_PER_COPY
    return len(view.compute_nodes) <= NODES_PER_COPY * (max(copies, 1) + judging)


def checked_elements(values: dict[str, Any], names: list[str]) -> int:
    """The elements of the named nodes' values (a tuple's tensors summed): what judging them reads."""
    def size(value: Any) -> int:
        if isinstance(value, torch.Tensor):
            return value.numel()
        return sum(size(item) for item in value) if isinstance(value, (tuple, list)) else 0
    return sum(size(values.get(name)) for name in names)
