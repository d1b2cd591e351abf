"""The run's search, as a plan of named steps over a :class:`RunFinding` (:data:`RUN_PLAN`).

The captured graphs in order (forward graphs in call order, then backward) until one has a finding;
a finding by the ulp rule alone then passes the upstream gate (``localise/upstream.py``: the
program's outputs must fail too, else it is listed and the graphs after it are judged on); with
none, forward departures carried into the backward (one eager replay), the user's backend
replayed against Dynamo's graph (script mode), and the model-level check through
``torch.compile``; a model that diverges when every graph matches has each graph's later calls
judged, then the backend and the model-level subsystem searched. A finding, wherever found, gets
its own steps (:data:`FOLLOW_UP`): the op inside a HOP, the subsystem, the sizes it fails at.
"""
from __future__ import annotations

import dataclasses
import logging

from ..strategies.departures import EAGER_ROUNDING, backward_consequence, saved_layout_consequence, saved_value_consequence
from ..strategies.pregrad import localise_backend_rewrite, localise_capture_decomposition, localise_pre_grad
from ..strategies.sizes import headline, static_shapes_verdict, sweep_sizes
from ..strategies.subsystems import MODEL_PASSES, Attribution, attribute, attribute_model, config_workaround
from ..search import BudgetExhausted, memory_cuts, stop_if_out_of_memory
from ..verdict.compare import Outcome
from ..verdict.graphs import CapturedGraph
from ..verdict.judgement import ulp_rule_only
from ..verdict.sizes import context_at
from .drive import Driver, Step, model_candidate
from .graph_steps import departure_values, examine
from .hop import attribute_inside, descend_into_hop
from .records import GraphFinding, RunFinding, model_level_noted
from .release import (graph_need, graph_pieces, release, releasable, room_for_model_check, segments_after_memory_stop,
                      spill_run_values)
from .upstream import within_upstream

log = logging.getLogger(__name__)
replace = dataclasses.replace
PRE_GRAD_PASSES = {switch.name for switch in MODEL_PASSES}


def _graphs(run: RunFinding, driver: Driver) -> RunFinding:
    """The captured graphs not yet judged, in order, until one has a finding. What the graphs
    judged before still hold (a forward's values its departures carry into the backward later)
    waits on disk while the next is judged, where memory asks (``release.spill_run_values``: it
    reads none of them)."""
    judged = {graph.context.captured.name for graph in run.graphs}
    for captured in run.captured:
        if captured.name in judged:
            continue
        # a graph whose judgement does not fit the memory left is judged in segments (cut at
        # module boundaries, each fitting); the graphs judged before wait on disk where memory
        # asks (none before the first); a graph or segment whose judgement cannot fit even so
        # stops the run before it (a memory cut, exit 4)
        pieces, cut = graph_pieces(captured, driver), None
        try:
            with memory_cuts(f"judging {captured.name}"):  # one outside a candidate (an fp64 run of a step) too
                found = _judge_pieces(pieces, driver, judged)
        except BudgetExhausted as error:
            if pieces != [captured]:
                raise
            cut = _let_go_of(error)
        if cut is not None:
            # judged whole, yet memory stopped it inside (a step or an op of its fp64 or noise run
            # that the estimate, 4x what it reads, let through): judged again in segments where it can be cut
            segments = segments_after_memory_stop(captured, driver, cut)
            if segments is None:
                raise cut
            found = _judge_pieces(segments, driver, judged)
        if found:
            return driver.finding
    return driver.finding


def _let_go_of(cut: BudgetExhausted) -> BudgetExhausted:
    """The cut without what it holds: its frames (and those of the error it was raised in handling)
    hold the stopped judgement's values."""
    cut.__context__ = cut.__cause__ = None
    return cut.with_traceback(None)


def _judge_pieces(pieces: list[CapturedGraph], driver: Driver, judged: set[str]) -> bool:
    """Each of ``pieces`` (a graph, or its segments) judged in order; whether one has a finding."""
    for graph in pieces:
        if graph.name in judged:
            continue
        spill_run_values(driver, graph_need(graph), captured_inputs=False, what=f"judging graph {graph.name}")
        if examine(graph, driver, driver.options).has_finding:
            return True
    return False


def _upstream_gate(run: RunFinding, driver: Driver) -> RunFinding:
    """Never stricter than upstream (issue 36): a graph's finding made by the ulp rule alone is the
    headline only where the program's own outputs fail too. The model-level check (one whole-model
    compile through the run's search, cached: the run's later model-level check reuses it) judges
    them at scope ``model``, the values the run's graphs hold moved to memory-mapped files while it
    runs where memory asks (``release.spill_run_values``: nothing reads them meanwhile); where they pass, the finding
    is listed (``within_upstream``) and the graphs after it are judged on, each finding of theirs
    gated alike."""
    while run.finding is not None and _ulp_rule_only(run.finding):
        candidate = model_candidate(run, driver.options)
        with driver.progress.step(f"{run.finding.context.name}: do the program's outputs pass upstream's same?"):
            if driver.search.known(candidate) is None:  # the check runs: what the graphs hold waits on disk
                room_for_model_check(driver, "the upstream gate's model-level check")
            program = driver.search.judge(candidate)
        driver.note(**model_level_noted(program))
        listed = within_upstream(program)
        if listed is None:  # the error reaches what the program returns: the headline stands
            return driver.finding
        driver.note(graphs=tuple(replace(g, within_upstream=listed) if g is run.finding else g for g in run.graphs))
        gate, driver.search.stage = driver.search.stage, "localise"  # the graphs after it: localisation's compiles
        try:
            run = _graphs(driver.finding, driver)
        finally:
            driver.search.stage = gate
    return driver.finding


def _ulp_rule_only(finding: GraphFinding) -> bool:
    """A finding every judgement behind which is the ulp rule's: no crash, no NaN/Inf, no harness
    failure, no exact rule (integers, bools, dtypes, shapes, a saturated fill) in the whole graph's,
    the per-node check's, the window's verdict or a material difference. Not an amplified finding:
    it is judged by the material rule (eager against compiled) exactly where fp64 cannot arbitrate,
    so ``same``, whose ``fp64_ref`` is that reference, passing says nothing about it (a cent turned
    by an integer cast, ``repro_cases/amplified_round_cents.py``: ``same`` passes outputs O(1) apart)."""
    crashed = any(v is not None and v.outcome is Outcome.CRASH for v in (finding.whole, finding.window_verdict))
    if finding.crash or crashed or finding.nan_problem or finding.compiled_nan or finding.harness_failed \
            or finding.amplification is not None:
        return False
    verdicts = [v for s in (finding.whole, finding.window_verdict, finding.nodes.verdict if finding.nodes else None)
                if s is not None for v in s.outputs.values()]
    return ulp_rule_only(verdicts, [difference for _, difference in finding.material])


def _gated(run: RunFinding, driver: Driver) -> bool:
    """The gate applies to a model file's own run under the default oracle: not in script mode
    (each call's outputs were gated already), not on a scan's failing batch or step, nor where the
    user asked for eager, bitwise equality or the strict per-node headline as the judge."""
    return run.finding is not None and run.model_level_check and driver.options.oracle == "outputs" \
        and not driver.options.divergence_known


def _carry_departures(run: RunFinding, driver: Driver) -> RunFinding:
    """A forward graph's departures (closer to fp64) carried into its backward graph by one eager
    replay: where the gradients then differ materially, the user sees it, and the report says how."""
    by_name = {graph.context.name: graph for graph in run.graphs}
    graphs = []
    for graph in run.graphs:
        captured = graph.context.captured
        backward = by_name.get(f"backward_{captured.index}")
        if graph.context.name == f"forward_{captured.index}" and backward is not None:
            with driver.progress.step(f"{graph.context.name}: its departures carried into {backward.context.name}"):
                graph = _carried(graph, backward)
        graphs.append(graph)
    return replace(run, graphs=tuple(graphs))


def _carried(graph: GraphFinding, backward: GraphFinding) -> GraphFinding:
    """The departures' consequence in the backward; where they have none, by mechanism: a value the
    forward saves that the whole compiled forward sets otherwise (a mask, a hinge's value), listed
    with the gradient it flips (``departures.saved_value_consequence``); else a saved value compiled
    lays out otherwise that a backward op misreads (``departures.saved_layout_consequence``)."""
    consequence = None
    if graph.departures:
        consequence = backward_consequence(graph.context, graph.departures, departure_values(graph), backward.context)
    if consequence is None and graph.whole_by == "compile" and graph.whole.compiled_values:
        found = saved_value_consequence(graph.context, graph.whole.compiled_values, backward.context)
        if found is not None:
            departed, consequence = found
            listed = [d for d in graph.departures if d.value != departed.value]
            return replace(graph, departures=[departed, *listed], consequence=consequence)
        misread = saved_layout_consequence(graph.context, graph.whole.compiled_values, backward.context)
        if misread is not None:
            return replace(graph, layout_misread=misread)
    return replace(graph, consequence=consequence)


def _release_carried(run: RunFinding, driver: Driver) -> RunFinding:
    """Once the departures are carried into the backward, nothing reads a clean graph's values
    but the report's digests: taken now, and the values let go before the model-level check (its
    fp64 model) as a clean graph without departures lets go of them once judged."""
    held = [graph for graph in run.graphs if releasable(graph, run.graphs, carried=True)]
    if not held:
        return run
    with driver.progress.step(f"{', '.join(g.context.name for g in held)}: digests taken, values let go"):
        graphs = tuple(release(graph, driver) if any(graph is g for g in held) else graph for graph in run.graphs)
    driver.note(graphs=graphs)
    return driver.finding


def _backend_rewrite(run: RunFinding, driver: Driver) -> RunFinding:
    """Every graph the user's backend hands Inductor matches: does the backend itself change what
    the model computes (a pass of its own)? Eager replays, no compile; ``pre_grad`` says so."""
    backend = run.backend_run
    if backend is None or backend.note:
        return run
    with driver.progress.step(f"replaying what the backend {backend.backend} hands Inductor against Dynamo's graph"):
        return replace(run, pre_grad=localise_backend_rewrite(backend, run.captured, driver.options.judgement))


def _model_check(run: RunFinding, driver: Driver) -> RunFinding:
    """The model-level check of a run whose graphs all matched; what the run still holds waits on
    disk while it runs, where memory asks (as at the upstream gate: it reads none of it)."""
    with driver.progress.step("model-level check"):
        candidate = model_candidate(run, driver.options)
        if driver.search.known(candidate) is None:
            room_for_model_check(driver, "the model-level check")
        return replace(run, **model_level_noted(driver.search.judge(candidate)))


def _later_calls(run: RunFinding, driver: Driver) -> RunFinding:
    """Every graph matched on its first call, yet the model diverges: a graph called again (a shared
    block, a decode loop) may meet values its first call never showed. The recorded later calls of
    each graph (``<graph>_call<k>``), the per-node check first, until one has a finding."""
    known = replace(driver.options, divergence_known=True)
    for graph in list(run.captured):
        for k in range(2, len(graph.later_inputs) + 2):
            if examine(graph.later_call(k), driver, known).has_finding:
                return driver.finding
    return driver.finding


def _model_subsystem(run: RunFinding, driver: Driver) -> RunFinding:
    with driver.progress.step("model-level subsystem bisection"):
        return replace(run, model_attribution=attribute_model(driver.search))


def _pre_grad(run: RunFinding, driver: Driver) -> RunFinding:
    assert run.model_attribution is not None
    with driver.progress.step("replaying the pre-grad passes eagerly"):
        rewrite = localise_pre_grad(run.captured, driver.options.judgement)
    return replace(run, pre_grad=replace(rewrite, by=run.model_attribution.name) if rewrite else None)


def _capture_decomposition(run: RunFinding, driver: Driver) -> RunFinding:
    """The program diverges and no captured graph does: is the captured aten graph itself wrong,
    decomposed while AOT Autograd traced it? Each Dynamo graph against its captured aten graph, then
    each call against its trace and each op against its decomposition, eagerly (no compile)."""
    with driver.progress.step("replaying each torch-level graph against the aten graph it was traced to"):
        return replace(run, pre_grad=localise_capture_decomposition(run.captured, driver.search))


def _unexplained_divergence(run: RunFinding, driver: Driver) -> bool:
    """The program's compiled result differs (the model-level check, or a script's checked call:
    script mode localises only a call that diverged) and nothing found says where."""
    known = run.model_level == "mismatch" or (not run.model_level_check and driver.options.divergence_known)
    return run.finding is None and run.pre_grad is None and run.layout_finding is None and known


def _inside_hop(finding: GraphFinding, driver: Driver) -> GraphFinding:
    return replace(finding, inside=descend_into_hop(finding, driver.judge, driver.search))


def _subsystem(finding: GraphFinding, driver: Driver) -> GraphFinding:
    """The subsystem of the op inside a HOP when there is one, else of the culprit."""
    if not driver.options.runs("subsystem") or finding.amplification is not None:
        return finding
    if finding.elided_cast is not None and finding.eager_rounding_follows:
        # a skipped .to(bf16/fp16) round trip: the setting that keeps it, already checked (one
        # compile), is the subsystem; no lowering is "wrong" (one story per report)
        return replace(finding, attribution=Attribution(
            "config", EAGER_ROUNDING.name, config_workaround(EAGER_ROUNDING.patch_dict),
            note=f"compiled skips the {finding.elided_cast.dtype} rounding of the cast the program wrote at node "
                 f"{finding.elided_cast.node} (Inductor's intended behaviour unless this is set)"))
    handled, attribution = attribute_inside(finding, driver.judge, driver.search)
    return replace(finding, attribution=attribution) if handled else _attribute(finding, driver)


def _attribute(finding: GraphFinding, driver: Driver) -> GraphFinding:
    """Name the Inductor subsystem behind a compiler-made divergence (never for the model's NaN)."""
    names, verified = finding.culprit_nodes, True
    if finding.nodes and finding.nodes.culprits and not finding.window and not finding.crash and not finding.confirmed:
        names = ()  # a culprit that does not diverge alone: no subgraph to switch subsystems on
    if not names and finding.compiled_nan and not finding.eager_nan:
        names, verified = (finding.compiled_nan,), False
    if not names:
        return finding
    with driver.progress.step(f"{finding.context.name}: subsystem bisection"):
        return replace(finding, attribution=attribute(finding.context, names, driver.search, verified=verified))


def _symbolic(finding: GraphFinding, driver: Driver) -> bool:
    """A compiler culprit in a graph with symbolic sizes."""
    return bool(finding.culprit_nodes) and finding.amplification is None \
        and finding.context.captured.shape_signature is not None \
        and not (finding.eager_nan and not finding.crash and not (finding.nodes and finding.nodes.culprits))


def _sizes(finding: GraphFinding, driver: Driver) -> GraphFinding:
    """Dynamic-only or static too, and the failing sizes; the repro's inputs then come from the
    smallest failing size."""
    context, names, search = finding.context, finding.culprit_nodes, driver.search
    with driver.progress.step(f"{context.name}: the culprit at static sizes"):
        finding = replace(finding, shapes=static_shapes_verdict(context, names, search))
    driver.update(finding)
    with driver.progress.step(f"{context.name}: sweeping the symbolic sizes"):
        finding = replace(finding, sweeps=sweep_sizes(context, names, search))
    chosen = headline(finding.sweeps)
    if chosen is not None and chosen.smallest_failing is not None and chosen.smallest_failing != chosen.checked:
        try:
            finding = replace(finding, sized_context=context_at(context, chosen.symbol, chosen.smallest_failing))
        except Exception as error:  # noqa: BLE001 - the repro then uses the checked size
            stop_if_out_of_memory(error, "making inputs at the smallest failing size")
            log.warning("%s: no inputs at %s=%d: %s", context.name, chosen.symbol, chosen.smallest_failing, error)
    return finding


# A finding's own steps, wherever it was found (none of them changes which step ended its search).
FOLLOW_UP: tuple[Step[GraphFinding], ...] = (
    Step("inside_hop", _inside_hop, decides=False),
    Step("subsystem", _subsystem, stage="subsystem", decides=False),
    Step("sizes", _sizes, when=_symbolic, stage="shapes", decides=False),
)


def _follow_up(run: RunFinding, driver: Driver) -> RunFinding:
    assert run.finding is not None and run.finding is run.graphs[-1]
    driver.run_graph_plan(FOLLOW_UP, run.finding)
    return driver.finding


def _found(run: RunFinding, driver: Driver) -> bool:
    return run.finding is not None


def _none_found(run: RunFinding, driver: Driver) -> bool:
    return run.finding is None


def _model_diverges(run: RunFinding, driver: Driver) -> bool:
    """The model diverges and no graph's finding, nor a saved layout a backward op misreads, says where."""
    return run.finding is None and run.layout_finding is None and run.model_level == "mismatch"


RUN_PLAN: tuple[Step[RunFinding], ...] = (
    Step("graphs", _graphs, stage="localise", when=lambda r, d: not d.options.capture_only),
    Step("upstream_gate", _upstream_gate, stage="model_check", when=_gated),
    Step("departures_into_backward", _carry_departures, when=_none_found),
    Step("release_carried", _release_carried, when=_none_found, decides=False),
    Step("follow_up", _follow_up, when=_found),
    Step("backend_rewrite_of_script", _backend_rewrite, stage="subsystem",
         when=lambda r, d: _none_found(r, d) and not r.model_level_check),
    Step("model_check", _model_check, stage="model_check", when=lambda r, d: _none_found(r, d) and r.model_level_check),
    Step("later_calls", _later_calls, stage="localise", when=_model_diverges),
    Step("follow_up_of_later_call", _follow_up, when=lambda r, d: _found(r, d) and "later_calls" in d.ran),
    Step("settle", lambda r, d: r, stage="subsystem", when=lambda r, d: not _found(r, d) or "later_calls" not in d.ran),
    Step("backend_rewrite", _backend_rewrite, when=_model_diverges),
    Step("model_subsystem", _model_subsystem,
         when=lambda r, d: _model_diverges(r, d) and r.pre_grad is None and d.options.runs("subsystem")),
    Step("pre_grad", _pre_grad, when=lambda r, d: _model_diverges(r, d) and r.model_attribution is not None
         and r.model_attribution.name in PRE_GRAD_PASSES),
    Step("capture_decomposition", _capture_decomposition, when=_unexplained_divergence),
)
