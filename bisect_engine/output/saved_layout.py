"""A saved value the compiled forward lays out otherwise that a backward op misreads
(``GraphFinding.layout_misread``, pytorch#197888), as the run's finding: its culprit keys and its
repro. Each graph matches compiled alone, so there is no culprit subgraph to compile: the op that
misreads is run eagerly twice, on its inputs as eager laid them out and on the same values laid
out as the compiled forward saved them (``expect="saved_layout"``, ``repro_runtime.layout_main``).

Pure: ``describe(result, graph, node)`` is the report's own node description, passed in so this module
needs nothing from :mod:`bisect_engine.output.report`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..localise.pipeline import GraphResult, RunResult
from .repro import ReproSpec, repro_spec

Describe = Callable[[RunResult, GraphResult, str], dict[str, Any]]


def _backward(result: RunResult, graph: GraphResult) -> GraphResult:
    misread = graph.layout_misread
    assert misread is not None
    return next(g for g in result.graphs if g.context.name == misread.consequence.graph)


def saved_layout_culprit(result: RunResult, describe: Describe,
                         gradient_of: Callable[[RunResult, GraphResult, str], str | None]) -> dict[str, Any] | None:
    """The culprit keys of a layout misread (kind ``saved_layout``): the backward op that reads the
    layout, the saved value and both layouts, and the gradient that differs, with the input it is
    the gradient of (``gradient_of``, the report's); None without one."""
    graph = result.layout_finding
    if graph is None or graph.layout_misread is None:
        return None
    misread, backward = graph.layout_misread, _backward(result, graph)
    reader = describe(result, backward, misread.reader)
    consequence = misread.consequence
    return {
        **reader, "made_by": "compiler", "kind": "saved_layout", "confirmed_alone": None,
        "nodes": [misread.reader], "ops": [reader["op"]], "propagators": [],
        "saved_layout": {"value": misread.value, "saved_by": describe(result, graph, misread.node),
                         "eager_strides": list(misread.eager_strides),
                         "compiled_strides": list(misread.compiled_strides),
                         "reader_inputs": {name: list(strides) for name, strides in misread.reader_layouts}},
        "output_difference": {"output": consequence.output, "gradient_of": gradient_of(result, backward, consequence.output),
                              **consequence.difference.to_json()},
    }


def saved_layout_repro_spec(result: RunResult, describe: Describe, *, environment: dict[str, str],
                            finding: list[tuple[str, str]]) -> ReproSpec | None:
    """The repro: the backward op alone, its inputs eager's values, run eagerly as eager laid them
    out and again with the inputs named in ``LAYOUTS`` laid out as compiled saved them; it
    reproduces when the outputs then differ materially. No compile: the bug is the op's, reached
    through the layout Inductor chose."""
    graph = result.layout_finding
    if graph is None or graph.layout_misread is None or not graph.layout_misread.reader_layouts:
        return None
    misread, backward = graph.layout_misread, _backward(result, graph)
    subgraph = backward.context.subgraph([misread.reader])
    values = {name: backward.context.eager_values[name] for name in subgraph.input_names}
    reader, saved = describe(result, backward, misread.reader), describe(result, graph, misread.node)
    layouts = tuple((name, strides) for name, strides in misread.reader_layouts if name in subgraph.input_names)
    if not layouts:
        return None
    laid_out = ", ".join(f"{name} strides {list(strides)}" for name, strides in layouts)
    spec = repro_spec(
        subgraph, values, config={}, unrenderable_config=[], environment=environment,
        title=f"{reader['op']}: the same values laid out otherwise give other results",
        finding=[*finding, ("saved", f"{misread.value} by {saved['op']} ({saved['source'] or '?'}), strides "
                                     f"{list(misread.eager_strides)} eager, {list(misread.compiled_strides)} compiled"),
                 ("misread by", f"{reader['op']} (node {misread.reader}, graph {backward.context.name})"),
                 ("gradient", f"{misread.consequence.output} differs materially")],
        notes=["torch.compile (Inductor) saves the value above for the backward in another memory layout than "
               "eager (the same values); the backward op reads the layout, not the values. This file runs the op "
               "eagerly on both layouts: no compile needed."],
        expect="saved_layout", seed=backward.context.seed,
    )
    return dataclasses.replace(spec, layouts=layouts)
