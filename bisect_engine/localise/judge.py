"""The evaluator behind the one search object: a candidate in, a verdict out.

:class:`Judge` is the only place that turns a candidate (:mod:`bisect_engine.verdict.candidate`)
into compiles: a group of nodes each judged alone, a region compiled together, either under a
subsystem switch or with random inputs, the whole model through ``torch.compile``, or a batch or
training step of a scan (the scan's evaluator, ``Judge.scan``). :func:`run_search` makes the run's
one :class:`~bisect_engine.search.Search` around it, once, at the run's top: the search caches its
verdicts, owns the budget (the compiler's compile count against ``--max-compiles``, the clock
against ``--timeout``), the stage and the progress reporter. A run that localises more than one
subject (a scan's failing samples, then its whole batch) points the judge at each in turn
(:func:`begin_subject`), the verdicts of the one before forgotten.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from ..load.memory import MemoryGuard
from ..load.model_file import ModelSpec
from ..search import Budget, Reporter, Search
from ..strategies.pregrad import call_cut, torch_level_values
from ..verdict.candidate import (NO_SWITCH, Candidate, DecompositionCandidate, DroppedWorkCandidate, GraphCandidate,
                                 ModelCandidate, ReplayCandidate, ScanCandidate, SizeCandidate, compile_arguments,
                                 compile_metered)
from ..verdict.decomposed import eager_op_graphs, judge_against_trace, judge_capture
from ..verdict.compare import Outcome
from ..verdict.judgement import Oracle
from ..verdict.compiler import Compiler
from ..verdict.graphs import CapturedGraph, reference_inputs
from ..verdict.oracle import GraphContext, SubgraphVerdict
from ..verdict.recipes import input_recipes, random_inputs
from ..verdict.replay import dropped_work_verdict, replay_verdict
from ..verdict.sizes import judge_sizes
from .model_check import check_model_level
from .options import EngineOptions
from .isolate import Isolated, isolating
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
    # a scan's evaluator: a batch or training step in, its verdict out (localise/scans.py)
    scan: Callable[[ScanCandidate], SubgraphVerdict] | None = None
    # the subject's captured graphs by name (their Dynamo graphs, for decomposition candidates)
    # and each Dynamo graph's node values, computed once
    captured: dict[str, CapturedGraph] = field(default_factory=dict)
    torch_values: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, context: GraphContext) -> None:
        self.contexts[context.name] = context

    def begin(self, spec: ModelSpec, oracle: Oracle, seed: int) -> None:
        """Judge ``spec``'s graphs from now on: those of a subject judged before are dropped."""
        self.spec, self.oracle, self.seed = spec, oracle, seed
        self.contexts, self.compiled, self.sweeps = {}, {}, {}
        self.captured, self.torch_values = {}, {}

    def hold(self, captured: list[CapturedGraph]) -> None:
        """The subject's captured graphs, which decomposition candidates name."""
        self.captured = {graph.name: graph for graph in captured}

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
        if isinstance(candidate, DroppedWorkCandidate):  # the window run eagerly, one node's work skipped
            context = self.contexts[candidate.graph]
            window = sorted(candidate.window, key=context.view.position.__getitem__)
            return dropped_work_verdict(context, window, candidate.node, candidate.kept)
        if isinstance(candidate, SizeCandidate):
            return self._sizes(candidate)
        if isinstance(candidate, DecompositionCandidate):  # eager runs of what was traced: no compile
            return self._decomposition(candidate)
        if isinstance(candidate, ScanCandidate):
            if self.scan is None:
                raise ValueError("a scan candidate needs the scan")
            return self.scan(candidate)
        return self._graph(candidate)

    def _decomposition(self, candidate: DecompositionCandidate) -> SubgraphVerdict:
        graph = self.captured[candidate.graph]
        if graph.torch_level is None:
            return SubgraphVerdict(Outcome.INVALID, error="no Dynamo graph recorded")
        original, inputs = graph.torch_level
        if candidate.node is None:
            return judge_capture(self.oracle, original, inputs, graph.graph_module, graph.inputs, graph.model_outputs)
        if candidate.graph not in self.torch_values:
            self.torch_values[candidate.graph] = torch_level_values(original, inputs)
        cut = call_cut(original, candidate.node, self.torch_values[candidate.graph])
        if cut is None:
            return SubgraphVerdict(Outcome.INVALID, error=f"{candidate.node} cannot be cut alone")
        if candidate.op is None:
            return judge_against_trace(self.oracle, cut.graph_module, cut.inputs)
        ops = eager_op_graphs(cut.graph_module, cut.inputs)
        if candidate.op >= len(ops):
            return SubgraphVerdict(Outcome.INVALID, error=f"{candidate.node} runs {len(ops)} op(s) eagerly")
        return judge_against_trace(self.oracle, *ops[candidate.op])

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


def run_search(options: EngineOptions, progress: Reporter | None = None, started_at: float | None = None,
               compiler: Compiler | None = None) -> RunSearch:
    """The run's one search, made once at its top: its budget (``--max-compiles``, ``--timeout``
    from ``started_at``, ``time.monotonic()`` at the run's start), stage and progress; the compiler
    counts against that budget (a ``compiler`` given keeps the budget it holds)."""
    if compiler is None:
        guard = MemoryGuard(options.memory_budget_bytes)
        compiler = Compiler(budget=Budget(options.max_compiles, options.timeout_s, started_at=started_at,
                                          memory=guard, room_left=guard.room))
    return new_search(Judge(compiler, options.judgement, options.seed), options.workers, progress)


def judge_of(search: RunSearch) -> Judge:
    """The judge that evaluates the run's candidates (with the compiler it counts compiles with)."""
    judge = search.evaluator
    assert isinstance(judge, Judge), "the run's search is made by run_search / new_search"
    return judge


def begin_subject(search: RunSearch, spec: ModelSpec, options: EngineOptions) -> Judge:
    """Point the run's judge at ``spec`` (a localisation of the model, or of a scan's failing batch
    or step): the verdicts of the graphs of a subject judged before are forgotten (their names
    repeat), a scan's verdicts and the history kept."""
    judge = judge_of(search)
    if judge.spec is not None or judge.contexts:
        search.discard_ahead()
        search.forget(lambda key: not isinstance(key, ScanCandidate))
    judge.begin(spec, options.judgement, options.seed)
    return judge


def new_search(judge: Judge, workers: int = 1, progress: Reporter | None = None) -> RunSearch:
    """A search over ``judge``'s candidates: every compile it causes is counted against the budget
    the judge's compiler holds. ``workers`` > 1: independent candidates may be compiled ahead in
    worker processes (:mod:`bisect_engine.localise.workers`; close them with :func:`close_workers`)."""
    compiler = judge.compiler
    if isolating():  # a rerun after a native crash: every compiled candidate in a child process
        return Search(judge, budget=compiler.budget, cost=lambda: compiler.compiles, ahead=Isolated(judge),
                      compile_metered=compile_metered, progress=progress)
    if workers <= 1:
        return Search(judge, budget=compiler.budget, cost=lambda: compiler.compiles, compile_metered=compile_metered,
                      progress=progress)
    pool = WorkerPool(judge, workers)

    def start_on_divergence(candidate: Candidate, verdict: SubgraphVerdict) -> None:
        # A graph that diverges is about to be searched: start the workers while it is (a clean
        # run never starts them).
        if verdict.outcome in (Outcome.MISMATCH, Outcome.CRASH) and not isinstance(candidate, ScanCandidate):
            pool.start()

    return Search(judge, budget=compiler.budget, cost=lambda: compiler.compiles, ahead=pool,
                  on_call=start_on_divergence, compile_metered=compile_metered, progress=progress)


def close_workers(search: RunSearch | None) -> None:
    """End the search's worker processes (if any); later candidates are judged in this process."""
    if search is not None and isinstance(search.ahead, (WorkerPool, Isolated)):
        search.ahead.close()


def workers_stats(search: RunSearch | None) -> dict[str, Any] | None:
    """The report's ``stats.workers``: how many, candidates compiled ahead, those judged, and the
    seconds the search waited for a worker's verdict."""
    if search is not None and isinstance(search.ahead, WorkerPool):
        return search.ahead.stats()
    return None
