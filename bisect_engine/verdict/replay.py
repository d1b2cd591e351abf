"""Eager replays with compiled values injected: does a node's compiled value, substituted into an
otherwise eager run of the graph, make the graph's outputs differ materially from eager's?

No compile: the per-node check already holds every node's compiled value on eager inputs. A
window replayed with one node's work skipped (:func:`dropped_work_verdict`) is the same kind of
look: eager values only, held against what the window's compile gave. A replay is judged by :func:`~bisect_engine.verdict.compare.material_difference` (eager against the
replay), never against fp64: it is asked where fp64 cannot arbitrate.
"""
from __future__ import annotations

from typing import Any, Sequence

from .compare import Outcome, TensorVerdict
from .fx_eval import clone_value, mutates, run_graph
from .graphs import value_nodes
from .judgement import judge_against_eager, scale_floor
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


def dropped_work_values(context: GraphContext, window: Sequence[str], node: str, kept: str) -> dict[str, Any]:
    """The window's outputs (the values it hands on) in an eager run of its nodes (``window``, in
    graph order) with ``node``'s work skipped: its value is eager's value of its input ``kept``."""
    values: dict[str, Any] = {node: context.eager_values[kept]}
    rest = [name for name in window if name != node]
    if rest:
        subgraph = context.subgraph(rest)
        inputs = [values[name] if name in values else context.eager_values[name] for name in subgraph.input_names]
        if mutates(subgraph.graph_module):  # never write into eager's values
            inputs = [clone_value(value) for value in inputs]
        values.update(zip(subgraph.output_names, run_graph(subgraph.graph_module, inputs)))
    return {name: values.get(name) for name in context.subgraph(window).output_names}


def dropped_work_verdict(context: GraphContext, window: Sequence[str], node: str, kept: str) -> SubgraphVerdict:
    """MISMATCH when skipping ``node``'s work makes some of the window's outputs differ materially
    from eager's; the verdict's ``compiled_values`` are the replayed outputs."""
    values = dropped_work_values(context, window, node, kept)
    verdicts: dict[str, TensorVerdict] = {}
    for name, value in values.items():
        difference = context.material_output_difference(name, value)
        verdicts[name] = TensorVerdict(Outcome.MISMATCH if difference is not None else Outcome.MATCH,
                                       compiled_max_ulps=difference.max_ulps if difference is not None else 0.0,
                                       reason=difference.reason if difference is not None else "")
    failing = any(v.outcome is Outcome.MISMATCH for v in verdicts.values())
    return SubgraphVerdict(Outcome.MISMATCH if failing else Outcome.MATCH, verdicts, values)


def reproduces(context: GraphContext, replayed: dict[str, Any], compiled: dict[str, Any]) -> bool:
    """Every one of ``replayed``'s values has a compiled value that agrees with it as a compiled
    value agrees with eager's (the ulp rule at scope ``eager``, the replay as the reference, at
    each value's own scale): the replay gives what the compile gave."""
    if not replayed:
        return False
    for name, value in replayed.items():
        if name not in compiled or value is None:
            return False
        floor = scale_floor(context.view.nodes, context.eager_values, name)
        if judge_against_eager(context.oracle, value, compiled[name], scale_floor=floor).outcome is not Outcome.MATCH:
            return False
    return True
