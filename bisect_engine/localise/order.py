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
"""
from __future__ import annotations

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


def whole_first(context: GraphContext, options: EngineOptions) -> bool:
    """Compile ``context``'s whole graph before its per-node check (see the module docstring)."""
    if options.divergence_known:
        return False
    view = context.view
    checked = [node.name for node in view.compute_nodes if view.checkable(node)]
    copies = len(plan_copies(view, checked, context.eager_values).members)
    return len(view.compute_nodes) <= NODES_PER_COPY * max(copies, 1)
