"""The pipeline from a model to a finding: capture, confirm, per-node verdicts, windows, subsystem.

Stages, in order, for each captured graph (forward graphs in call order, then backward); where
the per-node check is much cheaper than the whole compile, or the program is known to diverge, it
runs first and a culprit that explains the outputs skips the whole compile (``_culprit_first``,
``order.whole_first``):
1. *confirm*: the whole graph compiled once and judged against eager/fp64;
2. *nodes*: when it diverges, crashes or holds NaN/Inf, every node compiled once, each on
   reference inputs (a crash is narrowed down to the nodes that crash alone);
3. *window*: when the graph diverges but no node does alone, the window search.
The first graph with a finding ends the search; the subsystem search then runs on the culprit's
nodes. When every graph matches, a model-level compile through ``torch.compile`` tells ``clean``
from ``not_reproducible``. Every compile is a candidate judged through one
:class:`~bisect_engine.search.Search` (cached, counted, within ``--max-compiles``/``--timeout``);
when the budget runs out, the result says which stage it cut.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..errors import Interrupted, ModelError
from ..load.capture import BackendRun, capture, capture_through_backend, nothing_captured
from ..load.model_file import ModelSpec, user_backend
from ..progress import Progress
from ..search import Budget, BudgetExhausted
from ..strategies.amplify import Amplification, find_amplification, material_outputs
from ..strategies.departures import (EAGER_ROUNDING, Consequence, DepartedValue, backward_consequence, find_departures,
                                     follows_eager_with)
from ..strategies.nodes import NodeCheck, Reach, check_nodes, propagators, rank_culprits
from ..strategies.pregrad import PassRewrite, localise_backend_rewrite, localise_pre_grad
from ..strategies.sizes import SizeSweep, headline, static_shapes_verdict, sweep_sizes
from ..strategies.subsystems import MODEL_PASSES, Attribution, attribute, attribute_model
from ..strategies.windows import find_window, window
from ..load.rewrite import views_as_reshapes
from ..verdict.candidate import GraphCandidate, ModelCandidate, Switch
from ..verdict.compare import Outcome
from ..verdict.compiler import Compiler
from ..verdict.graphs import CapturedGraph
from ..verdict.kernels import Kernel, culprit_kernels
from ..verdict.nonfinite import Nonfinite, compiled_origin, first_origin, outputs_problem, turned_nonfinite
from ..verdict.oracle import GraphContext, SubgraphVerdict
from ..verdict.sizes import context_at
from ..verdict.replay import injected_whole_verdict
from .below_tolerance import BelowTolerance, below_tolerance
from .culprit_code import kept_kernels
from .hop import attribute_inside, descend_into_hop
from .judge import Judge, RunSearch, close_workers, new_search
from .options import EngineOptions
from .order import whole_first

log = logging.getLogger(__name__)


@dataclass
class GraphResult:
    """Everything learned about one captured graph."""

    context: GraphContext
    whole: SubgraphVerdict
    nodes: NodeCheck | None = None
    window: tuple[str, ...] | None = None
    window_verdict: SubgraphVerdict | None = None
    eager_nonfinite: Nonfinite | None = None  # NaN/Inf in eager's model outputs, and who makes them
    compiled_nan: str | None = None  # where compiled first turns non-finite (alone, or agreeing with eager)
    nan_problem: bool = False
    propagators: list[str] = field(default_factory=list)
    replay_values: dict[str, Any] = field(default_factory=dict)  # eager replay of the culprit's output
    attribution: Attribution | None = None
    confirmed: bool | None = None  # the culprit subgraph, compiled on its own, still diverges (or crashes)
    # Our own recompile of this graph failed where a real torch.compile does not (see _harness):
    # {"problem", "fallback", "changed", "judged"}; never a finding about the compiler.
    harness: dict[str, Any] | None = None
    headline: str | None = None  # the culprit named first (see strategies.nodes.rank_culprits)
    reach: list[Reach] = field(default_factory=list)  # each culprit: the model outputs it reaches
    kernels: tuple[Kernel, ...] = ()  # what Inductor generated for the culprit (its confirm or window compile)
    # outputs where eager and compiled differ materially, and the op whose tiny difference makes it
    material: list[Any] = field(default_factory=list)
    amplification: Amplification | None = None
    # compiled departs from eager while closer to fp64 (never a finding by the fp64 rule), and
    # whether Inductor's eager-rounding setting makes compiled follow eager (one compile)
    departures: list[DepartedValue] = field(default_factory=list)
    eager_rounding_follows: bool | None = None
    # a forward departure that the backward turns into materially different gradients (no compile)
    consequence: Consequence | None = None
    # A culprit in a graph with symbolic sizes: "dynamic-only" | "static-too" (one static compile),
    # each symbol of its inputs swept (one symbolic compile each), and the graph at the smallest
    # failing size of the headline sweep (the repro's inputs come from there)
    shapes: str | None = None
    sweeps: list[SizeSweep] = field(default_factory=list)
    sized_context: GraphContext | None = None
    # How ``whole`` was learned: "compile" (the whole graph compiled at once), or "eager_injection"
    # (not compiled: the confirmed culprit's compiled value, injected into an eager replay of the
    # graph, makes its outputs diverge by the same rule; see _culprit_first)
    whole_by: str = "compile"
    # outputs within tolerance, compiled's error clearly above eager's: the per-node check's ops
    # wrong alone, said beside a clean verdict (see localise/below_tolerance.py)
    below: BelowTolerance | None = None
    # A culprit HOP node (cond, flex_attention, invoke_subgraph): the op inside it (strategies.inside.Inside)
    inside: Any = None

    @property
    def eager_nan(self) -> str | None:
        """The node that first makes eager's outputs non-finite (the model's own NaN)."""
        return self.eager_nonfinite.origin if self.eager_nonfinite else None

    @property
    def model_outputs(self) -> list[str]:
        return self.context.view.output_names(self.context.captured.model_outputs)

    @property
    def crash(self) -> tuple[str, str] | None:
        """(node, error) of the first node whose compile or run raises on its own."""
        return self.nodes.crashes[0] if self.nodes and self.nodes.crashes else None

    @property
    def culprit_nodes(self) -> tuple[str, ...]:
        if self.window:
            return self.window
        if self.crash:
            return (self.crash[0],)
        if self.nodes and self.nodes.culprits:
            return (self.headline or self.nodes.culprits[0],)
        if self.amplification:
            return (self.amplification.culprit,)
        return ()

    @property
    def culprit_kind(self) -> str:
        return "window" if self.window else "amplified" if self.amplification else "node"

    @property
    def harness_failed(self) -> bool:
        """Our recompile of the whole graph failed, no fallback compiled, and the real compile works."""
        return self.harness is not None and not self.harness.get("judged")

    @property
    def has_finding(self) -> bool:
        if self.harness_failed:
            return bool(self.culprit_nodes) or self.nan_problem
        return bool(self.culprit_nodes) or self.nan_problem or self.whole.outcome is not Outcome.MATCH


@dataclass
class RunResult:
    spec: ModelSpec
    graphs: list[GraphResult]
    compiler: Compiler
    seconds: float
    captured: list[CapturedGraph] = field(default_factory=list)
    model_level: str | None = None  # "match" | "mismatch" | "crash" | None (not run)
    model_attribution: Attribution | None = None
    pre_grad: PassRewrite | None = None  # the torch-level rewrite behind a pre-grad pass's divergence
    scan: dict[str, Any] = field(default_factory=dict)  # "batch" / "step" findings of a scan
    budget: str | None = None  # what the exhausted budget cut, when it did
    interrupted: dict[str, Any] | None = None  # {"signal", "signum", "stage"}: SIGINT/SIGTERM stopped the run
    search: RunSearch | None = None  # the run's one search object (the writer judges with it too)
    model_level_check: bool = True  # may the engine recompile the model through torch.compile
    # The model came compiled with the user's own backend and the graphs it hands Inductor were
    # captured inside it (None: captured the plain way).
    backend_run: BackendRun | None = None

    @property
    def draws_random(self) -> bool:
        """Some judged graph draws random numbers (dropout): raw eager/compiled comparisons of the
        whole model differ by draws alone; the engine feeds eager's draws to both sides."""
        return any(_has_random(g) for g in self.graphs)

    @property
    def captured_count(self) -> int:
        return len(self.captured)

    @property
    def forward_graphs(self) -> dict[int, Any]:
        return {g.index: g.graph_module for g in self.captured if g.kind == "forward"}

    @property
    def finding(self) -> GraphResult | None:
        return next((g for g in self.graphs if g.has_finding), None)


def new_compiler(options: EngineOptions, started_at: float | None = None) -> Compiler:
    """A compiler bounded by the run's budget (``started_at``: ``time.monotonic()`` at the start)."""
    return Compiler(budget=Budget(options.max_compiles, options.timeout_s, started_at=started_at))


def run(spec: ModelSpec, options: EngineOptions, progress: Progress, compiler: Compiler | None = None,
        on_divergence: Callable[[], None] | None = None) -> RunResult:
    """Capture the model through torch.compile, then search the captured graphs."""
    started = time.perf_counter()
    torch.manual_seed(options.seed)
    with progress.step("capture"):
        captured, backend_run = _capture(spec, options.seed)
    if not captured:
        raise ModelError(nothing_captured(spec.model))
    return run_captured(spec, captured, options, progress, started, compiler=compiler, on_divergence=on_divergence,
                        backend_run=backend_run)


def _capture(spec: ModelSpec, seed: int) -> tuple[list[CapturedGraph], BackendRun | None]:
    """The graphs to search: those the user's own backend hands Inductor, captured inside it
    (its ``BackendRun``); else, or when it hands Inductor none or cannot be captured inside (our
    harness: said in the report, never a verdict), the Dynamo graphs captured the plain way."""
    backend = user_backend(spec.compiled) if spec.custom_backend else None
    if backend is None:
        return capture(spec.model, spec.inputs, spec.loss_fn, spec.dynamic)[0], None
    name = spec.backend or type(backend).__name__
    try:
        captured, _output, backend_run = capture_through_backend(spec.model, spec.inputs, spec.loss_fn, backend, name, spec.dynamic)
        if captured:
            return captured, backend_run
        note = "it hands Inductor no graph"
    except ModelError as error:
        log.warning("capturing inside the backend %s failed: %s", name, error)
        note = f"capturing inside it failed ({(str(error).splitlines() or [''])[0][:200]})"
    torch.manual_seed(seed)
    return capture(spec.model, spec.inputs, spec.loss_fn, spec.dynamic)[0], BackendRun(name, note=note)


def run_captured(spec: ModelSpec, captured: list[CapturedGraph], options: EngineOptions, progress: Progress,
                 started: float | None = None, model_level_check: bool = True, compiler: Compiler | None = None,
                 on_divergence: Callable[[], None] | None = None, backend_run: BackendRun | None = None) -> RunResult:
    """Search graphs captured elsewhere (a model file, or a running script's compiled graph).

    ``model_level_check=False`` skips recompiling ``spec.model`` through torch.compile (script
    mode: the user's own compiled frames must not be reset). ``on_divergence`` is called once a
    graph is found to diverge, before the search (the writer starts the repro's interpreters).
    """
    started = time.perf_counter() if started is None else started
    compiler = compiler or new_compiler(options)
    judge = Judge(compiler, options.judgement, options.seed, spec)
    result = RunResult(spec, [], compiler, 0.0, captured, search=new_search(judge, options.workers),
                       model_level_check=model_level_check, backend_run=backend_run)
    try:
        _localise(result, judge, options, progress, model_level_check, on_divergence)
    except BudgetExhausted as exhausted:
        result.budget = budget_message(exhausted, options, compiler)
    except Interrupted as interrupt:  # what was learned so far is the result; the caller re-raises
        result.interrupted = {"signal": interrupt.name, "signum": interrupt.signum, "stage": compiler.stage}
    finally:
        close_workers(result.search)
    result.seconds = time.perf_counter() - started
    return result


def _search_of(result: RunResult) -> RunSearch:
    """The run's one search (``run_captured`` makes it before any graph is examined)."""
    assert result.search is not None, "the engine runs only on a RunResult made by run_captured"
    return result.search


def budget_message(exhausted: BudgetExhausted, options: EngineOptions, compiler: Compiler) -> str:
    limit = (f"--max-compiles {options.max_compiles} reached ({compiler.compiles} compiles)"
             if exhausted.reason == "max_compiles" else f"--timeout {options.timeout_s:g} s reached")
    return f"{limit} during the {compiler.stage} stage; raise the limit for a complete answer"


def _localise(result: RunResult, judge: Judge, options: EngineOptions, progress: Progress,
              model_level_check: bool, on_divergence: Callable[[], None] | None) -> None:
    search, compiler = _search_of(result), result.compiler
    compiler.stage = "localise"
    for graph in result.captured:
        if _examine(graph, result, judge, options, progress, on_divergence).has_finding:
            break
    finding = result.finding
    if finding is None:
        _carry_departures(result)
    else:
        _follow_up(finding, judge, search, compiler, options, progress)
    compiler.stage = "subsystem"
    if finding is None and not model_level_check:
        # script mode: the program's call diverged, and every graph the backend hands Inductor matches
        _backend_rewrite(result, options, progress)
    if finding is None and model_level_check:
        compiler.stage = "model_check"
        with progress.step("model-level check"):
            result.model_level = search.judge(model_candidate(result, options)).outcome.value
        if result.model_level == "mismatch":
            # Every graph matched on its first call, yet the model diverges: a graph called again
            # (a shared block, a decode loop) may meet values its first call never showed.
            compiler.stage = "localise"  # the model is known to diverge: the per-node check first
            known = dataclasses.replace(options, divergence_known=True)
            finding = _later_calls(result, judge, known, progress, on_divergence)
        if finding is not None:
            _follow_up(finding, judge, search, compiler, options, progress)
            return
        compiler.stage = "subsystem"
        if result.model_level == "mismatch" and _backend_rewrite(result, options, progress):
            return
        if result.model_level == "mismatch" and options.runs("subsystem"):
            with progress.step("model-level subsystem bisection"):
                result.model_attribution = attribute_model(search)
            if result.model_attribution is not None and result.model_attribution.name in PRE_GRAD_PASSES:
                with progress.step("replaying the pre-grad passes eagerly"):
                    rewrite = localise_pre_grad(result.captured, options.judgement)
                result.pre_grad = dataclasses.replace(rewrite, by=result.model_attribution.name) if rewrite else None


def _follow_up(finding: GraphResult, judge: Judge, search: RunSearch, compiler: Compiler, options: EngineOptions,
               progress: Progress) -> None:
    """A finding's own steps, wherever it was found: the op inside a HOP node, then the subsystem
    (of that op, when there is one), then the sizes it fails at."""
    descend_into_hop(finding, judge, search, progress)
    compiler.stage = "subsystem"
    if options.runs("subsystem") and finding.amplification is None:
        if not attribute_inside(finding, judge, search, progress):
            _attribute(finding, search, progress)
    _symbolic_sizes(finding, search, compiler, progress)


def _backend_rewrite(result: RunResult, options: EngineOptions, progress: Progress) -> bool:
    """Every graph the user's backend hands Inductor matches: does the backend itself change what
    the model computes (a pass of its own)? Eager replays, no compile; ``result.pre_grad`` is set."""
    run = result.backend_run
    if run is None or run.note:
        return False
    with progress.step(f"replaying what the backend {run.backend} hands Inductor against Dynamo's graph"):
        result.pre_grad = localise_backend_rewrite(run, result.captured, options.judgement)
    return result.pre_grad is not None


def _later_calls(result: RunResult, judge: Judge, options: EngineOptions, progress: Progress,
                 on_divergence: Callable[[], None] | None) -> GraphResult | None:
    """Judge the recorded later calls of each graph (``<graph>_call<k>``) until one has a finding."""
    for graph in list(result.captured):
        for k in range(2, len(graph.later_inputs) + 2):
            examined = _examine(graph.later_call(k), result, judge, options, progress, on_divergence)
            if examined.has_finding:
                return examined
    return None


def model_candidate(result: RunResult, options: EngineOptions) -> ModelCandidate:
    """The model-level check. Where a graph draws random numbers (dropout) and draws are data
    (``--rng data``), the compile falls back to aten's random ops, so compiled draws the same
    numbers as eager from the same seed: what is left to differ is the compiled arithmetic."""
    if options.rng != "strict" and any(_has_random(r) for r in result.graphs):
        return ModelCandidate(SAME_DRAWS)
    return ModelCandidate()


PRE_GRAD_PASSES = {switch.name for switch in MODEL_PASSES}
SAME_DRAWS = Switch.config("config", "fallback_random", {"fallback_random": True})


def _has_random(result: GraphResult) -> bool:
    return bool(result.context.view.random_names())


def _attribute(finding: GraphResult, search: RunSearch, progress: Progress) -> None:
    """Name the Inductor subsystem behind a compiler-made divergence (never for the model's NaN)."""
    names, verified = finding.culprit_nodes, True
    if finding.nodes and finding.nodes.culprits and not finding.window and not finding.crash and not finding.confirmed:
        names = ()  # a culprit that does not diverge alone: no subgraph to switch subsystems on
    if not names and finding.compiled_nan and not finding.eager_nan:
        names, verified = (finding.compiled_nan,), False
    if not names:
        return
    with progress.step(f"{finding.context.name}: subsystem bisection"):
        finding.attribution = attribute(finding.context, names, search, verified=verified)


def _symbolic_sizes(finding: GraphResult, search: RunSearch, compiler: Compiler, progress: Progress) -> None:
    """A compiler culprit in a graph with symbolic sizes: dynamic-only or static too, and the
    failing sizes; the repro's inputs then come from the smallest failing size."""
    names = finding.culprit_nodes
    if not names or finding.amplification is not None or finding.context.captured.shape_signature is None \
            or (finding.eager_nan and not finding.crash and not (finding.nodes and finding.nodes.culprits)):
        return
    context = finding.context
    compiler.stage = "shapes"
    with progress.step(f"{context.name}: the culprit at static sizes"):
        finding.shapes = static_shapes_verdict(context, names, search)
    with progress.step(f"{context.name}: sweeping the symbolic sizes"):
        finding.sweeps = sweep_sizes(context, names, search)
    chosen = headline(finding.sweeps)
    if chosen is not None and chosen.smallest_failing is not None and chosen.smallest_failing != chosen.checked:
        try:
            finding.sized_context = context_at(context, chosen.symbol, chosen.smallest_failing)
        except Exception as error:  # noqa: BLE001 - the repro then uses the checked size
            log.warning("%s: no inputs at %s=%d: %s", context.name, chosen.symbol, chosen.smallest_failing, error)


def _examine(graph: CapturedGraph, run_result: RunResult, judge: Judge, options: EngineOptions,
             progress: Progress, on_divergence: Callable[[], None] | None) -> GraphResult:
    """Judge one graph; its result joins ``run_result`` as soon as the whole graph is judged, so a
    budget that runs out later still leaves what was learned."""
    search = _search_of(run_result)
    try:
        context = GraphContext.from_captured(graph, options.judgement)
    except Exception as error:
        raise ModelError(f"re-running {graph.name} eagerly raised {type(error).__name__}: {error}") from error
    judge.add(context)
    first = _culprit_first(context, run_result, search, options, progress, on_divergence)
    if first is not None:
        return first
    names = context.view.compilable_names(keep_random=context.rng_strict)
    with progress.step(f"{graph.name}: compile whole graph ({len(context.view.compute_nodes)} nodes)"):
        whole = search.judge(GraphCandidate(graph.name, frozenset(names), purpose="whole"))
    harness = None
    if whole.outcome is Outcome.CRASH:
        context, whole, harness = _harness_fallback(graph, context, whole, judge, search, options, progress)
    result = GraphResult(context, whole, harness=harness)
    run_result.graphs.append(result)
    result.eager_nonfinite = outputs_problem(context.view, context.eager_values, result.model_outputs)
    compiled_problem = any(v.new_nonfinite for v in whole.outputs.values())
    random_unchecked = _has_random(result) and not context.rng_strict
    eager_problem = result.eager_nonfinite is not None
    result.material = material_outputs(context, whole.compiled_values, result.model_outputs or list(whole.outputs))
    # --oracle strict judges every node even when the graph's outputs agree (a wrong op whose error
    # stays below the outputs' noise, as the minifier's strict accuracy would).
    strict = context.oracle.strict_headline
    if whole.outcome is Outcome.MATCH and not (eager_problem or compiled_problem or random_unchecked or result.material
                                               or strict):
        result.below = below_tolerance(context, whole, result.model_outputs, search, progress)
        _differences(result, search, options)
        return result
    if on_divergence is not None and (whole.outcome is not Outcome.MATCH or eager_problem or compiled_problem
                                      or result.material):
        on_divergence()
    _localise_in_graph(result, run_result, judge, options, progress)
    _nan_forensics(result)
    if not result.has_finding:
        _differences(result, search, options)
    return result


def _localise_in_graph(result: GraphResult, run_result: RunResult, judge: Judge, options: EngineOptions,
                       progress: Progress) -> None:
    """A graph that diverged, crashed or made NaN/Inf: the per-node check, then the culprit alone,
    a window, the amplifying op, or our own recompile's fault."""
    search, context, whole = _search_of(run_result), result.context, result.whole
    with progress.step(f"{context.name}: per-node verdicts"):
        result.nodes = check_nodes(context, search)
    if result.crash and _crash_is_ours(result, run_result, options, progress):
        _crash_as_harness(result, run_result)
    if result.crash:
        _confirm_node(result, result.crash[0], search, progress)
    elif result.nodes.culprits:
        result.headline, result.reach = rank_culprits(context, result.nodes, result.model_outputs,
                                                      strict=context.oracle.strict_headline)
        _confirm_node(result, result.headline, search, progress)
        if not result.confirmed and whole.outcome is not Outcome.MATCH:
            passing = [n for n in result.nodes.checked if n not in result.nodes.culprits] + [result.headline]
            _search_window(result, search, progress, passing)
    elif result.material and _amplify(result, judge, search, progress):
        pass  # an amplified divergence: the op whose tiny difference the graph blows up
    elif whole.outcome is Outcome.CRASH and run_result.model_level_check and _real_compile_works(run_result, options, progress):
        # No node crashes alone and the user's torch.compile of the model works: the crash is our
        # recompile's (see _harness_fallback), not a finding; no window search on it.
        result.harness = {**(result.harness or {}), "problem": whole.error, "judged": False,
                          "real_compile": run_result.model_level}
    elif whole.outcome is not Outcome.MATCH:
        _search_window(result, search, progress, result.nodes.checked)


def _culprit_first(context: GraphContext, run_result: RunResult, search: RunSearch, options: EngineOptions,
                   progress: Progress, on_divergence: Callable[[], None] | None) -> GraphResult | None:
    """The per-node check before the whole graph. When a node is wrong alone, still wrong compiled
    on its own, and its compiled value injected into an eager replay of the graph makes the graph's
    outputs fail the rule the whole graph's compile would be judged by, that compile is skipped
    (it would only repeat it; ``whole_by`` says so). Otherwise ``None``: the usual order runs,
    and the search's cache serves these verdicts again (no compile twice). Graphs that draw random
    numbers, or whose eager outputs hold NaN/Inf, always take the usual order; so do graphs whose
    whole compile is no dearer than the per-node check, unless the program is known to diverge
    (:func:`~bisect_engine.localise.order.whole_first`: a clean graph then costs one compile)."""
    if not options.culprit_first or context.view.random_names() or whole_first(context, options):
        return None
    outputs = context.view.output_names(context.captured.model_outputs)
    if outputs_problem(context.view, context.eager_values, outputs) is not None:
        return None
    with progress.step(f"{context.name}: per-node verdicts ({len(context.view.compute_nodes)} nodes)"):
        nodes = check_nodes(context, search, split_crash=False)
    if nodes.group_error or not nodes.culprits:
        return None
    headline, reach = rank_culprits(context, nodes, outputs, strict=context.oracle.strict_headline)
    injected = injected_whole_verdict(context, (headline,), nodes.verdict.compiled_values)
    material = material_outputs(context, injected.compiled_values, outputs or list(injected.outputs))
    if injected.outcome is not Outcome.MISMATCH and not material:
        return None  # its error alone does not show at the outputs: the whole graph decides
    result = GraphResult(context, injected, nodes=nodes, headline=headline, reach=reach, material=material,
                         whole_by="eager_injection")
    run_result.graphs.append(result)  # a budget cut from here on leaves the finding as it stands
    if on_divergence is not None:
        on_divergence()
    _confirm_node(result, headline, search, progress)
    if not result.confirmed:  # it needs neighbours: the whole graph and then windows decide
        run_result.graphs.remove(result)
        return None
    _nan_forensics(result)
    return result


def _differences(result: GraphResult, search: RunSearch, options: EngineOptions) -> None:
    """Where compiled departs from eager while closer to fp64 (judged against fp64 only): per node
    when the per-node check ran, else per output; one compile says whether eager rounding fixes it."""
    if options.reference != "fp64":
        return  # judged against eager: such a departure is a finding, not a note
    scope = "node" if result.nodes else "graph"
    result.departures = find_departures(result.context, _departure_values(result), scope)
    if result.departures:
        result.eager_rounding_follows = follows_eager_with(result.context, search, EAGER_ROUNDING)


def _departure_values(result: GraphResult) -> dict[str, Any]:
    """The compiled values the departures were judged on: per node, else the whole graph's."""
    return result.nodes.verdict.compiled_values if result.nodes else result.whole.compiled_values


def _carry_departures(run_result: RunResult) -> None:
    """A forward graph's departures (closer to fp64) carried into its backward graph by one eager
    replay: where the gradients then differ materially, the user sees it, and the report says how."""
    by_name = {graph.context.name: graph for graph in run_result.graphs}
    for graph in run_result.graphs:
        captured = graph.context.captured
        backward = by_name.get(f"backward_{captured.index}")
        if graph.departures and graph.context.name == f"forward_{captured.index}" and backward is not None:
            graph.consequence = backward_consequence(graph.context, graph.departures, _departure_values(graph),
                                                     backward.context)


def _amplify(result: GraphResult, judge: Judge, search: RunSearch, progress: Progress) -> bool:
    """Eager replays with the per-node check's compiled values injected (no compile)."""
    context, nodes = result.context, result.nodes
    assert nodes is not None
    judge.add_compiled(context.name, nodes.verdict.compiled_values)
    with progress.step(f"{context.name}: amplified divergence (eager replays)"):
        result.amplification = find_amplification(context, search, nodes.checked, nodes.verdict.compiled_values,
                                                  [name for name, _ in result.material])
    return result.amplification is not None


def _harness_fallback(graph: CapturedGraph, context: GraphContext, whole: SubgraphVerdict, judge: Judge,
                      search: RunSearch, options: EngineOptions, progress: Progress) -> tuple[GraphContext, SubgraphVerdict, dict[str, Any] | None]:
    """The whole graph crashed in our recompile. We capture before Inductor's decompositions, with
    ``view`` resolved for eager's strides; a decomposition with other strides (``cat`` of an empty
    cache tensor) then breaks a ``view`` the real compile never recorded. Recompile the graph with
    its views as reshapes (same values): if that compiles, judge that graph instead and say so."""
    rewritten, changed = views_as_reshapes(graph.graph_module)
    if not changed:
        return context, whole, None
    replacement = dataclasses.replace(graph, graph_module=rewritten)
    try:
        new_context = GraphContext.from_captured(replacement, options.judgement)
    except Exception as error:  # noqa: BLE001 - the fallback cannot even run eagerly: keep the original
        log.warning("%s: views-as-reshapes fallback does not run eagerly: %s", graph.name, error)
        return context, whole, None
    judge.add(new_context)
    search.forget(lambda c: isinstance(c, GraphCandidate) and c.graph == graph.name)
    names = new_context.view.compilable_names(keep_random=new_context.rng_strict)
    with progress.step(f"{graph.name}: our recompile failed; retrying with views as reshapes"):
        retried = search.judge(GraphCandidate(graph.name, frozenset(names), purpose="whole (views as reshapes)"))
    if retried.outcome is Outcome.CRASH:  # not the view problem: back to the graph as captured
        judge.add(context)
        search.forget(lambda c: isinstance(c, GraphCandidate) and c.graph == graph.name)
        search.record(GraphCandidate(graph.name, frozenset(context.view.compilable_names(keep_random=context.rng_strict))), whole)
        return context, whole, None
    harness = {"problem": whole.error, "fallback": "views_as_reshapes", "changed": changed, "judged": True}
    return new_context, retried, harness


def _crash_is_ours(result: GraphResult, run_result: RunResult, options: EngineOptions, progress: Progress) -> bool:
    """A node that crashes alone in our recompile is our harness's, never a compiler crash, when
    the compiler took the whole graph (it compiled), or the user's torch.compile of the model works."""
    if result.whole.outcome is not Outcome.CRASH:
        return True
    return run_result.model_level_check and _real_compile_works(run_result, options, progress)


def _crash_as_harness(result: GraphResult, run_result: RunResult) -> None:
    """Said in ``harness`` (the node, the error); the nodes that crashed alone are left unjudged."""
    assert result.nodes is not None
    node, error = result.nodes.crashes[0]
    result.harness = {**(result.harness or {}), "problem": f"{node} alone: {error}", "node": node,
                      "judged": result.whole.outcome is not Outcome.CRASH, "real_compile": run_result.model_level}
    result.nodes = dataclasses.replace(result.nodes, crashes=())


def _real_compile_works(run_result: RunResult, options: EngineOptions, progress: Progress) -> bool:
    with progress.step("our recompile crashed and no node crashes alone: does torch.compile of the model work?"):
        verdict = _search_of(run_result).judge(model_candidate(run_result, options))
    run_result.model_level = verdict.outcome.value
    return verdict.outcome is not Outcome.CRASH


def _confirm_node(result: GraphResult, first: str, search: RunSearch, progress: Progress) -> None:
    """Compile the first culprit alone: the repro and the subsystem search rely on it failing.

    In the per-node check it was compiled beside other nodes; alone, Inductor may generate other
    code (a lone random op falls back to aten, say). If it then matches, the divergence needs
    neighbours: the caller searches windows instead.
    """
    context = result.context
    with progress.step(f"{context.name}: confirming {first} alone"):
        alone = search.judge(GraphCandidate(context.name, frozenset([first]), purpose="confirm", keep_code=True))
    result.confirmed = alone.outcome is not Outcome.MATCH
    if result.confirmed:
        result.kernels = culprit_kernels(alone.code, (first,))
    if result.confirmed and result.nodes is not None and first in result.nodes.culprits:
        result.propagators, result.replay_values = propagators(context, first, result.nodes.verdict)


def _nan_forensics(result: GraphResult) -> None:
    """Compiled is at fault for a NaN/Inf when it turns a node non-finite where eager is finite
    (per-node check), or when the culprit's wrong value, replayed eagerly, makes the model's
    outputs non-finite; eager when its own outputs hold one (see :mod:`~bisect_engine.verdict.nonfinite`)."""
    context = result.context
    assert result.nodes is not None
    origin = compiled_origin(context.view, result.nodes.verdict.outputs)
    if origin is None and result.replay_values and turned_nonfinite(context.eager_values, result.replay_values,
                                                                    result.model_outputs):
        # The culprit's output is wrong but finite; the NaN appears further down (eager replay).
        culprit = result.culprit_nodes[0]
        after = [n.name for n in context.view.compute_nodes[context.view.position[culprit] + 1:]]
        found = first_origin(context.view, result.replay_values, among=after)
        origin = found.name if found is not None else None
    result.nan_problem = result.eager_nonfinite is not None or origin is not None
    if origin is None and result.nan_problem:
        # Compiled agrees with eager's own NaN: say where compiled first makes it too (on eager's
        # inputs), as a description; the blame stays with the model or the inputs.
        agreeing = first_origin(context.view, result.nodes.verdict.compiled_values, context.eager_values)
        origin = agreeing.name if agreeing is not None else None
    result.compiled_nan = origin


def _search_window(result: GraphResult, search: RunSearch, progress: Progress, known_passing: Any) -> None:
    context = result.context
    with progress.step(f"{context.name}: window search"):
        result.window = find_window(context, search, result.whole.outcome, known_passing)
    result.window_verdict = search.judge(window(context, result.window))
    result.kernels = kept_kernels(search, window(context, result.window), result.window)
