"""Which stage judges a graph first: its whole compile, or the per-node check.

A clean graph needs only its whole compile; an isolated wrong op needs only the per-node check and
the culprit compiled alone (its compiled value, replayed eagerly, stands for the whole graph: see
``pipeline._culprit_first``). Which one a graph is, nobody knows before compiling it. Where the run
does not know that the program diverges (a model file, no failing batch or step found), a graph is
compiled whole first when that compile is estimated no dearer than the per-node check: then a
clean graph costs one compile, and a wrong one pays one compile more, no dearer than the
per-node check it spares a clean graph. Where the run knows the program diverges (script mode, a
scan's failing batch or step: ``EngineOptions.divergence_known``), or the graph's per-node check is
much cheaper than its whole compile (a deep stack of identical layers compiles each distinct node
once), the per-node check comes first, as the last round made it.
"""
from __future__ import annotations

from ..verdict.graphs import plan_copies
from ..verdict.oracle import GraphContext
from .options import EngineOptions

# What a compile costs grows with the kernels it builds: the whole graph's fused kernels (at most
# one per compute node, fewer once fused) against the per-node check's copies (one kernel per
# distinct node). Measured on the corpus (notes/clean1.md): a whole graph of up to this many
# compute nodes per copy compiles no slower than its per-node check.
NODES_PER_COPY = 3.0


def whole_first(context: GraphContext, options: EngineOptions) -> bool:
    """Compile ``context``'s whole graph before its per-node check (see the module docstring)."""
    if options.divergence_known:
        return False
    view = context.view
    checked = [node.name for node in view.compute_nodes if view.checkable(node)]
    copies = len(plan_copies(view, checked, context.eager_values).members)
    return len(view.compute_nodes) <= NODES_PER_COPY * max(copies, 1)
