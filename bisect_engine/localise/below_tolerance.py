"""Findings below tolerance: a graph whose outputs agree within the tolerance while compiled's
error against fp64 is clearly above eager's (:func:`~bisect_engine.verdict.compare.clearly_above_eager`).

The verdict stays the graph's (``clean``, exit 0: the end-to-end tolerance is the user's contract),
but one per-node check (one compile) says which op is wrong on its own, and whether its error
reaches the model's outputs in an eager replay. ``--oracle strict`` makes such an op the verdict.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..strategies.nodes import NodeCheck, Reach, check_nodes, rank_culprits
from ..verdict.compare import TensorVerdict, clearly_above_eager
from ..verdict.oracle import GraphContext, SubgraphVerdict
from ..strategies.protocol import GraphSearch


@dataclass(frozen=True)
class BelowTolerance:
    output: str  # the graph output whose error, within tolerance, is clearly above eager's
    error: TensorVerdict
    nodes: NodeCheck  # the per-node check it ran (culprits: nodes wrong alone)
    headline: str | None
    reach: tuple[Reach, ...]


def trigger(whole: SubgraphVerdict) -> tuple[str, TensorVerdict] | None:
    """The output with the largest error among those clearly above eager's, if any."""
    above = [(name, verdict) for name, verdict in whole.outputs.items() if clearly_above_eager(verdict)]
    return max(above, key=lambda item: item[1].compiled_rms_ulps) if above else None


def below_tolerance(context: GraphContext, whole: SubgraphVerdict, model_outputs: list[str],
                    search: GraphSearch) -> BelowTolerance | None:
    """When ``whole`` matches but an output is clearly less accurate than eager's: every node judged
    alone (one compile), the culprits ranked by whether they reach the model outputs."""
    found = trigger(whole)
    if found is None:
        return None
    with search.progress.step(f"{context.name}: outputs within tolerance but above eager's error: per-node verdicts"):
        nodes = check_nodes(context, search)
    headline, reach = rank_culprits(context, nodes, model_outputs) if nodes.culprits else (None, [])
    return BelowTolerance(found[0], found[1], nodes, headline, tuple(reach))
