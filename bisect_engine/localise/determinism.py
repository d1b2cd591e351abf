"""The determinism question: which op makes two identical runs differ, eager or compiled.

Each captured graph is run ``RUNS`` times on the same inputs, eagerly and compiled (one compile,
many runs), and its outputs compared bit for bit with the first run's. Where a side's outputs
change run to run, every checkable node is run alone on its reference inputs (one isolated
compile, as the per-node check makes), ``RUNS`` times on each side, and the first node in graph
order whose own values change is named with its side. Since each node reads the same reference
inputs on every run, a change is the op's own, never carried from upstream. A graph whose runs
differ but whose ops alone never do is said so (``op`` None), never clean.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from ..search import stop_if_out_of_memory
from ..verdict.compiler import Compiler, run_compiled
from ..verdict.fx_eval import clone_value, interpret
from ..verdict.graphs import build_subgraph, reference_inputs
from ..verdict.oracle import GraphContext, bitwise_equal
from .measure_env import checkable_names, tensor_value_names

RUNS = 8  # runs per side: nondeterminism is often intermittent; runs cost no compile
SIDES = ("eager", "compiled")


@dataclass(frozen=True)
class RunToRun:
    """The first op whose own values differ between identical runs."""

    node: str
    op: str
    side: str  # "eager", "compiled", or "both"
    value: str  # the tensor that changed (the node, or one of its getitems)
    differing_runs: int  # runs (after the first) whose values differ from the first's, on ``side``


@dataclass(frozen=True)
class GraphDeterminism:
    """One graph's answer: whose outputs change run to run, and the op that makes them."""

    name: str
    runs: int
    eager_differs: bool = False
    compiled_differs: bool = False
    op: RunToRun | None = None
    error: str = ""  # our compile or run failed: this graph is not checked

    @property
    def differs(self) -> bool:
        return self.eager_differs or self.compiled_differs


def differing_runs(run: Callable[[], list[Any]], runs: int, seed: int) -> tuple[list[list[Any]], int]:
    """``runs`` runs of ``run`` (the seed set before each): all outputs, and how many differ from the first."""
    outputs = []
    for _ in range(runs):
        torch.manual_seed(seed)
        outputs.append(run())
    return outputs, sum(not bitwise_equal(outputs[0], other) for other in outputs[1:])


def check_graph(context: GraphContext, compiler: Compiler, runs: int = RUNS) -> GraphDeterminism:
    """The whole graph ``runs`` times on each side; localised where a side's outputs change."""
    whole = context.whole()
    if not whole.node_names:
        return GraphDeterminism(context.name, runs, error="nothing to run")
    inputs = reference_inputs(whole, context.eager_values)
    try:
        compiled = compiler.compile(whole.graph_module, inputs, label=f"determinism {context.name}",
                                    constants=context.constant_positions(whole.input_names),
                                    constants_frozen=context.constants_frozen)
        _, compiled_changes = differing_runs(lambda: run_compiled(compiled, inputs), runs, context.seed)
    except Exception as error:  # our compile or run: this graph is not checked, never clean
        stop_if_out_of_memory(error, "rerunning a graph for determinism")
        return GraphDeterminism(context.name, runs, error=f"{type(error).__name__}: {error}")
    eager = lambda: _eager_outputs(whole.graph_module, inputs, whole.output_names)  # noqa: E731
    _, eager_changes = differing_runs(eager, runs, context.seed)
    result = GraphDeterminism(context.name, runs, eager_changes > 0, compiled_changes > 0)
    if not result.differs:
        return result
    try:
        return GraphDeterminism(result.name, runs, result.eager_differs, result.compiled_differs,
                                first_changing_op(context, compiler, runs))
    except Exception as error:  # the per-node compile failed: the graph's answer stands, unlocalised
        stop_if_out_of_memory(error, "localising a nondeterministic op")
        return GraphDeterminism(result.name, runs, result.eager_differs, result.compiled_differs,
                                error=f"per-node check: {type(error).__name__}: {error}")


def first_changing_op(context: GraphContext, compiler: Compiler, runs: int = RUNS) -> RunToRun | None:
    """Every checkable node alone on its reference inputs, ``runs`` times eagerly and compiled:
    the first in graph order whose own values change (None: no op alone changes)."""
    names = checkable_names(context.view)
    if not names:
        return None
    subgraph = build_subgraph(context.view, names, isolate=True, outputs="all")
    inputs = reference_inputs(subgraph, context.eager_values)
    compiled = compiler.compile(subgraph.graph_module, inputs, label=f"determinism {context.name} per node",
                                constants=context.constant_positions(subgraph.input_names),
                                constants_frozen=context.constants_frozen)
    by_side = {
        "eager": differing_runs(lambda: _eager_outputs(subgraph.graph_module, inputs, subgraph.output_names),
                                runs, context.seed)[0],
        "compiled": differing_runs(lambda: run_compiled(compiled, inputs), runs, context.seed)[0],
    }
    positions = {name: index for index, name in enumerate(subgraph.output_names)}
    for node in context.view.compute_nodes:
        for value in tensor_value_names(node):
            if value not in positions:
                continue
            changes = {side: _changes(outputs, positions[value]) for side, outputs in by_side.items()}
            sides = [side for side in SIDES if changes[side]]
            if sides:
                side = "both" if len(sides) == 2 else sides[0]
                return RunToRun(node.name, str(node.target), side, value, max(changes.values()))
    return None


def _changes(outputs: Sequence[list[Any]], position: int) -> int:
    first = [outputs[0][position]]
    return sum(not bitwise_equal(first, [other[position]]) for other in outputs[1:])


def _eager_outputs(graph_module: Any, inputs: list[Any], names: Sequence[str]) -> list[Any]:
    values = interpret(graph_module, [clone_value(value) for value in inputs])  # a graph may write its inputs
    return [values[name] for name in names]
