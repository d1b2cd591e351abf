"""Eager replays with compiled values injected: does a node's compiled value, substituted into an
otherwise eager run of the graph, make the graph's outputs differ materially from eager's?

No compile: the per-node check already holds every node's compiled value on eager inputs. A
replay is judged by :func:`~bisect_engine.verdict.compare.material_difference` (eager against the
replay), never against fp64: it is asked where fp64 cannot arbitrate.
"""
from __future__ import annotations

from typing import Any

from .compare import Outcome, TensorVerdict
from .graphs import value_nodes
from .oracle import GraphContext, SubgraphVerdict


def injected_values(context: GraphContext, names: Any, compiled_values: dict[str, Any]) -> dict[str, Any]:
    """The compiled values of the named nodes (each of their value nodes) that the check holds."""
    return {v.name: compiled_values[v.name] for name in names for v in value_nodes(context.view.nodes[name])
            if v.name in compiled_values}


def replay(context: GraphContext, overrides: dict[str, Any]) -> dict[str, Any]:
    """Every node's value in an eager run of the captured graph with ``overrides`` substituted."""
    return context.replay(overrides)


def replay_verdict(context: GraphContext, names: Any, compiled_values: dict[str, Any],
                   outputs: tuple[str, ...]) -> SubgraphVerdict:
    """MISMATCH when some of ``outputs`` differ materially from eager's in the replay; the verdict's
    ``compiled_values`` are the replayed outputs."""
    values = replay(context, injected_values(context, names, compiled_values))
    verdicts: dict[str, TensorVerdict] = {}
    for name in outputs:
        difference = context.output_difference(name, values.get(name))
        verdicts[name] = TensorVerdict(Outcome.MISMATCH if difference.material else Outcome.MATCH,
                                       compiled_max_ulps=difference.max_ulps, reason=difference.reason)
    failing = any(v.outcome is Outcome.MISMATCH for v in verdicts.values())
    return SubgraphVerdict(Outcome.MISMATCH if failing else Outcome.MATCH, verdicts,
                           {name: values.get(name) for name in outputs})


def injected_whole_verdict(context: GraphContext, names: Any, compiled_values: dict[str, Any]) -> SubgraphVerdict:
    """The whole graph judged as if compiled, on an eager replay with the named nodes' compiled
    values injected: the fp64 rule of :meth:`GraphContext.judge` on its outputs (no compile). A
    MISMATCH says the named nodes' compiled error alone carries to the graph's outputs."""
    return context.judge_whole_values(replay(context, injected_values(context, names, compiled_values)))
