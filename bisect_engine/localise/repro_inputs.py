"""What a repro of the run's finding is made of, and whether it may draw its inputs at random.

Decided here, with the run's search, before anything is written: the output layer only reads
the record (:class:`ReproInputs`) and never compiles.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..verdict.candidate import GraphCandidate
from ..verdict.compare import Outcome
from ..verdict.graphs import reference_inputs
from ..verdict.recipes import input_recipes
from .hop import later_iteration_window
from .pipeline import GraphResult, RunResult

Expect = Literal["mismatch", "crash", "eager_nonfinite"]


@dataclass(frozen=True)
class ReproInputs:
    """The repro's inputs: random draws from ``recipes`` (checked to reproduce), or the real
    values (``recipes`` None), and why, for the report."""

    recipes: tuple[dict[str, Any], ...] | None
    note: str


REAL = ReproInputs(None, "real")


def repro_target(result: RunResult) -> tuple[GraphResult, tuple[str, ...], Expect] | None:
    """The graph, nodes and expectation a repro of the run's finding is made of."""
    graph = result.finding
    if graph is None:
        return None
    graph = later_iteration_window(graph) or graph  # an op inside a loop found on a later iteration
    # What the repro must show comes from the finding's own subgraph, never from the whole graph.
    crashed = graph.crash is not None or (graph.window_verdict is not None and graph.window_verdict.outcome is Outcome.CRASH)
    expect: Expect = "crash" if crashed else "mismatch"
    names = graph.culprit_nodes
    if not names and graph.eager_nan:
        names, expect = (graph.eager_nan,), "eager_nonfinite"
    elif not names and graph.compiled_nan:
        names = (graph.compiled_nan,)
    # NaN/Inf the inputs bring (no op makes them): nothing compiled to repro.
    return (graph, names, expect) if names else None


def checked_random_inputs(result: RunResult) -> ReproInputs:
    """Random stand-ins for the repro's inputs, only if the finding still reproduces with them
    (one candidate through the run's search: one compile); else the real inputs, and why."""
    target = repro_target(result)
    if target is None or result.search is None:
        return REAL
    graph, names, expect = target
    if expect == "eager_nonfinite":
        return ReproInputs(None, "real (a NaN the model makes needs its real inputs)")
    subgraph = graph.context.subgraph(names)
    recipes = tuple(input_recipes(reference_inputs(subgraph, graph.context.eager_values)))
    verdict = result.search.judge_if_room(GraphCandidate(graph.context.name, frozenset(names), inputs="random",
                                                         purpose="random inputs"))
    if verdict is None:
        return ReproInputs(None, "real (the budget ran out before random inputs could be checked)")
    wanted = Outcome.CRASH if expect == "crash" else Outcome.MISMATCH
    if verdict.outcome is wanted:
        return ReproInputs(recipes, "random (checked to reproduce)")
    return ReproInputs(None, f"real (random inputs did not reproduce: {verdict.outcome.value})")
