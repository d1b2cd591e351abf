"""The one oracle: compile a subgraph, feed it reference inputs, judge its outputs.

Every strategy (single nodes, windows, decompositions, ...) asks the same question through
:meth:`GraphContext.judge`, so a node, a window and the whole graph are held to one rule
(:mod:`bisect_engine.compare`). A compile or run that raises is a ``CRASH`` verdict, never a
swallowed exception.
"""
from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from .capture import CapturedGraph
from .compare import Outcome, Tolerance, TensorVerdict, compare_values, worst
from .graphs import GraphView, Subgraph, build_subgraph, reference_inputs
from .runner import Compiler, interpret, run_compiled, run_graph

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SubgraphVerdict:
    """The judgement of one compiled subgraph: per output, and overall."""

    outcome: Outcome
    outputs: dict[str, TensorVerdict] = field(default_factory=dict)
    compiled_values: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    @property
    def failing_outputs(self) -> list[str]:
        return [name for name, v in self.outputs.items() if v.outcome is not Outcome.MATCH]


@dataclass
class GraphContext:
    """A captured graph with its eager reference values, ready to be judged piecewise."""

    captured: CapturedGraph
    view: GraphView
    eager_values: dict[str, Any]
    tolerance: Tolerance = Tolerance()

    @classmethod
    def from_captured(cls, captured: CapturedGraph, tolerance: Tolerance = Tolerance()) -> "GraphContext":
        values = interpret(captured.graph_module, captured.inputs)
        return cls(captured, GraphView(captured.graph_module), values, tolerance)

    @property
    def name(self) -> str:
        return self.captured.name

    def subgraph(self, names: Any, *, isolate: bool = False) -> Subgraph:
        return build_subgraph(self.view, names, isolate=isolate, outputs="all" if isolate else "escaping")

    def whole(self) -> Subgraph:
        return self.subgraph(self.view.compilable_names())

    def judge(
        self,
        subgraph: Subgraph,
        compiler: Compiler,
        *,
        label: str,
        config_patches: dict[str, Any] | None = None,
        decompositions: dict[Any, Callable[..., Any]] | None = None,
    ) -> SubgraphVerdict:
        inputs = reference_inputs(subgraph, self.eager_values)
        try:
            compiled = compiler.compile(
                subgraph.graph_module, inputs, label=label,
                config_patches=config_patches, decompositions=decompositions,
            )
            compiled_outputs = run_compiled(compiled, inputs)
        except Exception as error:  # the verdict says so; callers decide what a crash means
            log.debug("compile/run of %s crashed:\n%s", label, traceback.format_exc())
            return SubgraphVerdict(Outcome.CRASH, error=f"{type(error).__name__}: {error}")
        fp64_outputs = run_graph(subgraph.graph_module, inputs, upcast=True)
        eager_outputs = [self.eager_values[name] for name in subgraph.output_names]
        verdicts = compare_values(eager_outputs, fp64_outputs, compiled_outputs, self.tolerance)
        if len(verdicts) != len(subgraph.output_names):
            return SubgraphVerdict(Outcome.MISMATCH, error=verdicts[0].reason)
        outputs = dict(zip(subgraph.output_names, verdicts))
        return SubgraphVerdict(
            worst(verdicts).outcome if verdicts else Outcome.MATCH,
            outputs,
            dict(zip(subgraph.output_names, compiled_outputs)),
        )
