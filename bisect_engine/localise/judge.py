"""The evaluator behind the one search object: a candidate in, a verdict out.

:class:`Judge` is the only place that turns a candidate (:mod:`bisect_engine.verdict.candidate`)
into compiles: a group of nodes each judged alone, a region compiled together, either under a
subsystem switch or with random inputs, or the whole model through ``torch.compile``.
:func:`new_search` wires it to a :class:`~bisect_engine.search.Search` that caches its verdicts
and checks the run's budget (the compiler's compile count) before every evaluation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..load.model_file import ModelSpec
from ..search import Search
from ..verdict.candidate import NO_SWITCH, Candidate, GraphCandidate, ModelCandidate, ReplayCandidate, SizeCandidate, compile_arguments
from ..verdict.compare import Outcome
from ..verdict.judgement import Oracle
from ..verdict.compiler import Compiler
from ..verdict.graphs import reference_inputs
from ..verdict.oracle import GraphContext, SubgraphVerdict
from ..verdict.recipes import input_recipes, random_inputs
from ..verdict.replay import replay_verdict
from ..verdict.sizes import judge_sizes
from .model_check import check_model_level
from .workers import WorkerPool

RunSearch = Search[Candidate, SubgraphVerdict]


@dataclass
class Judge:
    compiler: Compiler
    oracle: Oracle = Oracle()
    seed: int = 0
    spec: ModelSpec | None = None  # needed for model candidates only
    contexts: dict[str, GraphContext] = field(default_factory=dict)
    # per graph: the per-node check's compiled values, which replay candidates inject
    compiled: dict[str, dict[str, Any]] = field(default_factory=dict)
    # size sweeps: the one symbolic compile of (graph, nodes), run again at other sizes
    sweeps: dict[tuple[str, frozenset[str]], Any] = field(default_factory=dict)

    def add(self, context: GraphContext) -> None:
        self.contexts[context.name] = context

    def add_compiled(self, graph: str, values: dict[str, Any]) -> None:
        self.compiled[graph] = values

    def __call__(self, candidate: Candidate) -> SubgraphVerdict:
        if isinstance(candidate, ModelCandidate):
            if self.spec is None:
                raise ValueError("a model candidate needs the model")
            return check_model_level(self.spec, self.compiler, self.oracle, self.seed, candidate.switch)
        if isinstance(candidate, ReplayCandidate):  # an eager replay: no compile
            return replay_verdict(self.contexts[candidate.graph], candidate.injected,
                                  self.compiled.get(candidate.graph, {}), candidate.outputs)
        if isinstance(candidate, SizeCandidate):
            return self._sizes(candidate)
        return self._graph(candidate)

    def _sizes(self, candidate: SizeCandidate) -> SubgraphVerdict:
        context = self.contexts[candidate.graph]
        subgraph = context.subgraph(sorted(candidate.nodes, key=context.view.position.__getitem__))
        key = (candidate.graph, candidate.nodes)
        verdict, compiled = judge_sizes(context, subgraph, self.compiler, candidate.symbol, candidate.sizes,
                                        label=f"{context.name}:{candidate.purpose or 'sizes'}",
                                        compiled=self.sweeps.get(key))
        if compiled is not None:
            self.sweeps[key] = compiled
        return verdict

    def _graph(self, candidate: GraphCandidate) -> SubgraphVerdict:
        context = self.contexts[candidate.graph]
        names = sorted(candidate.nodes, key=context.view.position.__getitem__)
        label = f"{context.name}:{candidate.purpose or 'candidate'}"
        if candidate.isolated and candidate.switch == NO_SWITCH and candidate.inputs == "reference" \
                and candidate.shapes == "as_captured":
            return context.judge_nodes(names, self.compiler, label=label)
        subgraph = context.subgraph(names, isolate=candidate.isolated)
        patches, decompositions, fallbacks = compile_arguments(candidate.switch)
        inputs = None
        if candidate.inputs == "random":
            inputs = random_inputs(input_recipes(reference_inputs(subgraph, context.eager_values)), context.seed)
        return context.judge(subgraph, self.compiler, label=label, config_patches=patches,
                             decompositions=decompositions, fallbacks=fallbacks, inputs=inputs,
                             keep_code=candidate.keep_code, shapes=candidate.shapes)


def new_search(judge: Judge, workers: int = 1) -> RunSearch:
    """The run's one search object: every compile it causes is counted against the budget.
    ``workers`` > 1: independent candidates may be compiled ahead in worker processes
    (:mod:`bisect_engine.localise.workers`; close them with :func:`close_workers`)."""
    compiler = judge.compiler
    if workers <= 1:
        return Search(judge, budget=compiler.budget, cost=lambda: compiler.compiles)
    pool = WorkerPool(judge, workers)

    def start_on_divergence(candidate: Candidate, verdict: SubgraphVerdict) -> None:
        # A graph that diverges is about to be searched: start the workers while it is (a clean
        # run never starts them).
        if verdict.outcome in (Outcome.MISMATCH, Outcome.CRASH):
            pool.start()

    return Search(judge, budget=compiler.budget, cost=lambda: compiler.compiles, ahead=pool,
                  on_call=start_on_divergence)


def close_workers(search: RunSearch | None) -> None:
    """End the search's worker processes (if any); later candidates are judged in this process."""
    if search is not None and isinstance(search.ahead, WorkerPool):
        search.ahead.close()


def workers_stats(search: RunSearch | None) -> dict[str, Any] | None:
    """The report's ``stats.workers``: how many, candidates compiled ahead, those judged, and the
    seconds the search waited for a worker's verdict."""
    if search is not None and isinstance(search.ahead, WorkerPool):
        return search.ahead.stats()
    return None
