"""The driver of a run's search: plans of named steps run in order over frozen records.

A plan is a tuple of :class:`Step` (a name, the function that advances a record, when it applies,
the budget stage its compiles count under, and whether it decides a graph's search). The
:class:`Driver` is the run's one mutable thing: it holds the latest
:class:`~bisect_engine.localise.records.RunFinding` and replaces it after every step, so a budget
cut or an interrupt (raised through a step) leaves exactly what the completed steps learned. The
plans themselves are in ``graph_steps.py`` (per graph) and ``run_steps.py`` (the run).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Generic, TypeVar

from ..search import Reporter
from ..verdict.candidate import ModelCandidate, Switch
from ..verdict.compiler import Compiler
from ..verdict.graphs import is_random
from .judge import Judge, RunSearch
from .options import EngineOptions
from .records import GraphFinding, RunFinding

R = TypeVar("R", GraphFinding, RunFinding)


def always(record: object, driver: Driver) -> bool:
    return True


@dataclass(frozen=True)
class Step(Generic[R]):
    """One named step of a plan: ``run`` returns the advanced record when ``when`` holds.

    ``stage``: what the compiles it causes count under (``compiles_by_stage``, the budget message);
    None keeps the stage of the step before. ``decides``: in a graph's plan, a step that decides
    the graph's search (its name becomes ``GraphFinding.ended_by``); notes beside it do not."""

    name: str
    run: Callable[[R, Driver], R]
    when: Callable[[R, Driver], bool] = always
    stage: str | None = None
    decides: bool = True


class Driver:
    """Runs the plans of one run; the latest :class:`RunFinding` is ``finding``."""

    def __init__(self, finding: RunFinding, judge: Judge, options: EngineOptions,
                 on_divergence: Callable[[], None] | None) -> None:
        assert finding.search is not None, "the driver runs on a RunFinding made by run_captured"
        self.finding = finding
        self.search: RunSearch = finding.search
        self.judge = judge
        self.options = options
        self.on_divergence = on_divergence
        self.ran: list[str] = []  # the run-level steps that ran, in order

    @property
    def progress(self) -> Reporter:
        """The run's reporter, which the run's search holds."""
        return self.search.progress

    @property
    def compiler(self) -> Compiler:
        return self.finding.compiler

    def note(self, **changes: object) -> None:
        """Advance the run's record (a run-level fact learned inside a graph's step)."""
        self.finding = dataclasses.replace(self.finding, **changes)  # type: ignore[arg-type]

    def join(self, graph: GraphFinding) -> None:
        """A graph's record joins the run (a budget cut from here on leaves it as it stands)."""
        self.note(graphs=(*self.finding.graphs, graph))

    def update(self, graph: GraphFinding) -> None:
        """The graph being searched (the last joined) advanced."""
        self.note(graphs=(*self.finding.graphs[:-1], graph))

    def withdraw(self) -> None:
        self.note(graphs=self.finding.graphs[:-1])

    def _stage(self, stage: str | None) -> None:
        if stage is not None:
            self.search.stage = stage

    def run_plan(self, plan: tuple[Step[RunFinding], ...]) -> RunFinding:
        for step in plan:
            if step.when(self.finding, self):
                self._stage(step.stage)
                self.ran.append(step.name)
                self.finding = step.run(self.finding, self)
        return self.finding

    def run_graph_plan(self, plan: tuple[Step[GraphFinding], ...], graph: GraphFinding) -> GraphFinding:
        """Advance the last joined graph through ``plan``; each step's record is published."""
        for step in plan:
            if step.when(graph, self):
                self._stage(step.stage)
                graph = step.run(graph, self)
                if step.decides:
                    graph = dataclasses.replace(graph, ended_by=step.name)
                self.update(graph)
        return graph


def model_candidate(finding: RunFinding, options: EngineOptions) -> ModelCandidate:
    """The model-level check. Where a graph draws random numbers (dropout) and draws are data
    (``--rng data``), the compile falls back to aten's random ops, so compiled draws the same
    numbers as eager from the same seed: what is left to differ is the compiled arithmetic."""
    if options.rng != "strict" and (any(g.draws_random for g in finding.graphs) or any(
            is_random(node) for graph in finding.captured for node in graph.graph_module.graph.nodes)):
        return ModelCandidate(SAME_DRAWS)  # every captured graph asked: judged or not yet (the upstream gate)
    return ModelCandidate()


SAME_DRAWS = Switch.config("config", "fallback_random", {"fallback_random": True})
