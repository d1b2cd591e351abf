"""The pipeline from a model to a finding: capture, confirm, per-node verdicts, windows.

Stages, in order, for each captured graph (forward graphs in call order, then backward):
1. *confirm*: the whole graph compiled once and judged against eager/fp64;
2. *nodes*: when it diverges or holds NaN/Inf, every node compiled once, each on reference inputs;
3. *window*: when the graph diverges but no node does alone, the window search.
The first graph with a finding ends the search. When every graph matches, a model-level compile
through ``torch.compile`` tells ``clean`` from ``not_reproducible``.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from .capture import CapturedGraph, capture
from .compare import Outcome, Tolerance
from .errors import BisectError, ModelError
from .model_check import check_model_level
from .model_file import ModelSpec
from .nonfinite import first_origin, has_nan_problem
from .oracle import GraphContext, SubgraphVerdict
from .progress import Progress
from .runner import Compiler
from .search import BudgetExhausted, Search
from .strategies.nodes import NodeCheck, check_nodes, propagators
from .strategies.subsystems import Attribution, attribute, attribute_model
from .strategies.windows import find_window, window_oracle

log = logging.getLogger(__name__)


STAGES = ("localise", "subsystem", "repro")


@dataclass(frozen=True)
class Options:
    tolerance: Tolerance = Tolerance()
    max_compiles: int | None = None
    timeout_s: float | None = None
    seed: int = 0
    rng: str = "data"  # "data": random draws are fed to both sides; "strict": they must match eager's
    stage: str = "repro"  # stop after "localise", "subsystem" or "repro"
    started_at: float | None = None  # perf_counter() when the run began: --timeout counts from there
    random_inputs: bool = False  # the repro draws its inputs at random, if that still reproduces
    # Called when a graph is found to diverge, before the search: the edge may get ready to
    # verify a repro (start its interpreters) while the search runs. Never changes a result.
    on_divergence: Callable[[], None] | None = field(default=None, compare=False, repr=False)

    def runs(self, stage: str) -> bool:
        return STAGES.index(stage) <= STAGES.index(self.stage)


@dataclass
class GraphResult:
    """Everything learned about one captured graph."""

    context: GraphContext
    whole: SubgraphVerdict
    nodes: NodeCheck | None = None
    window: tuple[str, ...] | None = None
    window_verdict: SubgraphVerdict | None = None
    eager_nan: str | None = None
    compiled_nan: str | None = None
    nan_problem: bool = False
    propagators: list[str] = field(default_factory=list)
    replay_values: dict[str, Any] = field(default_factory=dict)  # eager replay of the culprit's output
    budget_message: str | None = None
    attribution: Attribution | None = None
    confirmed: bool | None = None  # the culprit subgraph, compiled on its own, still diverges

    @property
    def culprit_nodes(self) -> tuple[str, ...]:
        if self.window:
            return self.window
        if self.nodes and self.nodes.culprits:
            return self.nodes.culprits[:1]
        return ()

    @property
    def culprit_kind(self) -> str:
        return "window" if self.window else "node"

    @property
    def has_finding(self) -> bool:
        return bool(self.culprit_nodes) or self.nan_problem or self.whole.outcome is not Outcome.MATCH


@dataclass
class RunResult:
    spec: ModelSpec
    graphs: list[GraphResult]
    compiler: Compiler
    seconds: float
    captured: list[CapturedGraph] = field(default_factory=list)
    model_level: str | None = None  # "match" | "mismatch" | None (not run)
    model_attribution: Attribution | None = None
    scan: dict[str, Any] = field(default_factory=dict)  # "batch" / "step" findings of a scan

    @property
    def captured_count(self) -> int:
        return len(self.captured)

    @property
    def forward_graphs(self) -> dict[int, Any]:
        return {g.index: g.graph_module for g in self.captured if g.kind == "forward"}

    @property
    def finding(self) -> GraphResult | None:
        return next((g for g in self.graphs if g.has_finding), None)


def run(spec: ModelSpec, options: Options, progress: Progress, compiler: Compiler | None = None) -> RunResult:
    """Capture the model through torch.compile, then search the captured graphs."""
    started = time.perf_counter()
    torch.manual_seed(options.seed)
    with progress.step("capture"):
        captured, _output = capture(spec.model, spec.inputs, spec.loss_fn)
    if not captured:
        raise BisectError("torch.compile captured no graph: the model runs no tensor ops under Dynamo")
    return run_captured(spec, captured, options, progress, started, compiler=compiler)


def run_captured(spec: ModelSpec, captured: list[CapturedGraph], options: Options, progress: Progress,
                 started: float | None = None, model_level_check: bool = True,
                 compiler: Compiler | None = None) -> RunResult:
    """Search graphs captured elsewhere (a model file, or a running script's compiled graph).

    ``model_level_check=False`` skips recompiling ``spec.model`` through torch.compile (script
    mode: the user's own compiled frames must not be reset).
    """
    started = time.perf_counter() if started is None else started
    compiler = compiler or Compiler()
    compiler.stage = "localise"
    results: list[GraphResult] = []
    for graph in captured:
        result = _examine(graph, compiler, options, progress)
        results.append(result)
        if result.has_finding:
            break
    run_result = RunResult(spec, results, compiler, 0.0, captured)
    finding = run_result.finding
    compiler.stage = "subsystem"
    if finding is not None and options.runs("subsystem"):
        _attribute(finding, compiler, progress)
    compiler.stage = "model_check"
    random_graphs = any(_has_random(r) for r in results)
    if finding is None and model_level_check and (options.rng == "strict" or not random_graphs):
        with progress.step("model-level check"):
            run_result.model_level = check_model_level(spec, compiler, options.tolerance, options.seed)
        compiler.stage = "subsystem"
        if run_result.model_level == "mismatch" and options.runs("subsystem"):
            with progress.step("model-level subsystem bisection"):
                run_result.model_attribution = attribute_model(spec, compiler, options.tolerance, options.seed)
    run_result.seconds = time.perf_counter() - started
    return run_result


def _has_random(result: GraphResult) -> bool:
    return bool(result.context.view.random_names())


def _attribute(finding: GraphResult, compiler: Compiler, progress: Progress) -> None:
    """Name the Inductor subsystem behind a compiler-made divergence (never for the model's NaN)."""
    names, verified = finding.culprit_nodes, True
    if finding.nodes and finding.nodes.culprits and not finding.window and not finding.confirmed:
        names = ()  # a culprit that does not diverge alone: no subgraph to switch subsystems on
    if not names and finding.compiled_nan and not finding.eager_nan:
        names, verified = (finding.compiled_nan,), False
    if not names:
        return
    with progress.step(f"{finding.context.name}: subsystem bisection"):
        subgraph = finding.context.subgraph(names)
        finding.attribution = attribute(finding.context, subgraph, compiler, verified=verified)


def _examine(graph: CapturedGraph, compiler: Compiler, options: Options, progress: Progress) -> GraphResult:
    try:
        context = GraphContext.from_captured(graph, options.tolerance, options.rng == "strict", options.seed)
    except Exception as error:
        raise ModelError(f"re-running {graph.name} eagerly raised {type(error).__name__}: {error}") from error
    whole_graph = context.whole()
    with progress.step(f"{graph.name}: compile whole graph ({len(context.view.compute_nodes)} nodes)"):
        whole = context.judge(whole_graph, compiler, label=f"{graph.name}:whole")
    result = GraphResult(context, whole)
    eager_outputs = [context.eager_values[name] for name in whole_graph.output_names]
    eager_problem = has_nan_problem(context.view, context.eager_values, eager_outputs)
    compiled_problem = has_nan_problem(context.view, {}, list(whole.compiled_values.values()))
    random_unchecked = _has_random(result) and not context.rng_strict
    if whole.outcome is Outcome.MATCH and not (eager_problem or compiled_problem or random_unchecked):
        return result
    if options.on_divergence is not None and (whole.outcome is not Outcome.MATCH or eager_problem or compiled_problem):
        options.on_divergence()
    with progress.step(f"{graph.name}: per-node verdicts"):
        result.nodes = check_nodes(context, compiler)
    if result.nodes.culprits:
        _confirm_node(result, compiler, options, progress)
    elif whole.outcome is not Outcome.MATCH:
        _search_window(result, compiler, options, progress)
    _nan_forensics(result, eager_problem)
    return result


def _confirm_node(result: GraphResult, compiler: Compiler, options: Options, progress: Progress) -> None:
    """Compile the first culprit alone: the repro and the subsystem search rely on it diverging.

    In the stitched check it was compiled beside every other node; alone, Inductor may generate
    other code (a lone random op falls back to aten, say). If it then matches, the divergence
    needs neighbours: search windows instead.
    """
    assert result.nodes is not None
    context, first = result.context, result.nodes.culprits[0]
    with progress.step(f"{context.name}: confirming {first} alone"):
        alone = context.judge(context.subgraph([first]), compiler, label=f"{context.name}:confirm")
    result.confirmed = alone.outcome is not Outcome.MATCH
    if result.confirmed:
        result.propagators, result.replay_values = propagators(context, first, result.nodes.verdict)
    elif result.whole.outcome is not Outcome.MATCH:
        passing = [n for n in result.nodes.checked if n not in result.nodes.culprits] + [first]
        _search_window(result, compiler, options, progress, passing)


def _nan_forensics(result: GraphResult, eager_problem: bool) -> None:
    context = result.context
    assert result.nodes is not None
    compiled_values = result.nodes.verdict.compiled_values
    compiled_problem = has_nan_problem(context.view, compiled_values, list(result.whole.compiled_values.values()))
    eager_origin = first_origin(context.view, context.eager_values) if eager_problem else None
    compiled_origin = first_origin(context.view, compiled_values, context.eager_values) if compiled_problem or eager_problem else None
    if compiled_origin is None and result.replay_values and has_nan_problem(context.view, result.replay_values, []):
        # The culprit's output is wrong but finite; the NaN appears further down (eager replay).
        compiled_problem = True
        compiled_origin = first_origin(context.view, result.replay_values)
    result.eager_nan = eager_origin.name if eager_origin is not None else None
    result.compiled_nan = compiled_origin.name if compiled_origin is not None else None
    result.nan_problem = eager_problem or compiled_problem


def _search_window(result: GraphResult, compiler: Compiler, options: Options, progress: Progress,
                   known_passing: list[str] | None = None) -> None:
    started = options.started_at or time.perf_counter()
    context = result.context
    target = result.whole.outcome
    oracle = window_oracle(context, compiler, target)
    search: Search[frozenset[str]] = Search(
        oracle,
        max_calls=None if options.max_compiles is None else max(options.max_compiles - compiler.compiles, 0),
        timeout_s=None if options.timeout_s is None else max(options.timeout_s - (time.perf_counter() - started), 0),
    )
    assert result.nodes is not None
    with progress.step(f"{context.name}: window search"):
        try:
            passing = result.nodes.checked if known_passing is None else known_passing
            result.window = find_window(context, search, known_passing=passing)
        except BudgetExhausted as exhausted:
            limit = (f"--max-compiles {options.max_compiles} reached ({compiler.compiles} compiles)"
                     if exhausted.reason == "max_compiles" else f"--timeout {options.timeout_s:g} s reached")
            result.budget_message = (f"{limit}: {context.name} diverges, but the window search stopped "
                                     f"before naming its nodes ({search.calls} windows tried); raise the limit")
            return
    result.window_verdict = oracle.verdicts.get(frozenset(result.window))  # type: ignore[attr-defined]
