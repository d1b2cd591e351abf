"""The search inside one captured graph, as a plan of named steps over a :class:`GraphFinding`.

:func:`examine`: the graph re-run eagerly; the per-node check first where ``order.whole_first``
does not put the whole graph first (:func:`culprit_first`: a culprit confirmed alone whose compiled
value, replayed eagerly, fails the graph's outputs ends it with no whole-graph compile); else the
whole graph compiled (a crash of our own recompile: views as reshapes, see
:func:`harness_fallback`), then :data:`GRAPH_PLAN`. Each step is a function ``(finding, driver) ->
finding`` that calls strategies and returns a record advanced by ``dataclasses.replace``.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any

from ..search import stop_if_out_of_memory
from ..errors import ModelError
from ..strategies.amplify import find_amplification, material_outputs
from ..strategies.departures import (EAGER_ROUNDING, cast_round_trips, compiled_outputs, elided_cast,
                                     find_departures, follows_eager_with, narrowing_casts)
from ..strategies.dropped import find_dropped_work
from ..strategies.nodes import check_nodes, propagators, rank_culprits
from ..strategies.windows import find_window, window
from ..load.rewrite import views_as_reshapes
from ..verdict.candidate import GraphCandidate
from ..verdict.compare import Outcome
from ..verdict.graphs import CapturedGraph, CapturedInputChanged
from ..verdict.kernels import culprit_kernels
from ..verdict.nonfinite import compiled_origin, first_origin, outputs_problem, turned_nonfinite
from ..verdict.oracle import GraphContext, SubgraphVerdict
from ..verdict.replay import injected_whole_verdict
from .below_tolerance import below_tolerance
from .culprit_code import kept_kernels
from .drive import Driver, Step, model_candidate
from .options import EngineOptions
from .order import whole_first
from .records import GraphFinding, model_level_noted
from .release import release, releasable, share_saved_values

log = logging.getLogger(__name__)
replace = dataclasses.replace


def examine(graph: CapturedGraph, driver: Driver, options: EngineOptions) -> GraphFinding:
    """Judge one graph; its record joins the run as soon as the whole graph is judged, so a
    budget that runs out later still leaves what was learned."""
    try:
        context = GraphContext.from_captured(graph, options.judgement)
    except CapturedInputChanged:  # our harness's, not the model's
        raise
    except Exception as error:
        stop_if_out_of_memory(error, "re-running a graph eagerly")
        raise ModelError(f"re-running {graph.name} eagerly raised {type(error).__name__}: {error}") from error
    driver.judge.add(context)
    share_saved_values(context, driver.finding.captured)
    first = culprit_first(context, driver, options)
    if first is not None:
        return first
    names = context.view.compilable_names(keep_random=context.rng_strict)
    with driver.progress.step(f"{graph.name}: compile whole graph ({len(context.view.compute_nodes)} nodes)"):
        whole = driver.search.judge(GraphCandidate(graph.name, frozenset(names), purpose="whole"))
    harness = None
    if whole.outcome is Outcome.CRASH:
        context, whole, harness = harness_fallback(graph, context, whole, driver)
    finding = GraphFinding(context, whole, harness=harness, ended_by="whole")
    driver.join(finding)
    finding = driver.run_graph_plan(GRAPH_PLAN, finding)
    if releasable(finding, driver.finding.graphs, driver.finding.captured):
        finding = release(finding, driver)
        driver.update(finding)
    return finding


def culprit_first(context: GraphContext, driver: Driver, options: EngineOptions) -> GraphFinding | None:
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
    if driver.on_divergence is not None:  # the repro's interpreters import while this compiles
        driver.on_divergence()  # (a clean graph ends them unused)
    with driver.progress.step(f"{context.name}: per-node verdicts ({len(context.view.compute_nodes)} nodes)"):
        nodes = check_nodes(context, driver.search, split_crash=False)
    if nodes.group_error or not nodes.culprits:
        return None
    headline, reach = rank_culprits(context, nodes, outputs, strict=context.oracle.strict_headline)
    injected = injected_whole_verdict(context, (headline,), nodes.verdict.compiled_values)
    material = material_outputs(context, injected.compiled_values, outputs or list(injected.outputs))
    if injected.outcome is not Outcome.MISMATCH and not material:
        return None  # its error alone does not show at the outputs: the whole graph decides
    finding = GraphFinding(context, injected, nodes=nodes, headline=headline, reach=reach, material=material,
                           whole_by="eager_injection", ended_by="culprit_first")
    driver.join(finding)  # a budget cut from here on leaves the finding as it stands
    finding = driver.run_graph_plan(CULPRIT_FIRST_PLAN, finding)
    if not finding.confirmed:  # it needs neighbours: the whole graph and then windows decide
        driver.withdraw()
        return None
    return finding


def harness_fallback(graph: CapturedGraph, context: GraphContext, whole: SubgraphVerdict,
                     driver: Driver) -> tuple[GraphContext, SubgraphVerdict, dict[str, Any] | None]:
    """The whole graph crashed in our recompile. We capture before Inductor's decompositions, with
    ``view`` resolved for eager's strides; a decomposition with other strides (``cat`` of an empty
    cache tensor) then breaks a ``view`` the real compile never recorded. Recompile the graph with
    its views as reshapes (same values): if that compiles, judge that graph instead and say so."""
    rewritten, changed = views_as_reshapes(graph.graph_module)
    if not changed:
        return context, whole, None
    try:
        new_context = GraphContext.from_captured(replace(graph, graph_module=rewritten), driver.options.judgement)
    except Exception as error:  # noqa: BLE001 - the fallback cannot even run eagerly: keep the original
        stop_if_out_of_memory(error, "re-running a rewritten graph eagerly")
        log.warning("%s: views-as-reshapes fallback does not run eagerly: %s", graph.name, error)
        return context, whole, None
    search, ours = driver.search, (lambda c: isinstance(c, GraphCandidate) and c.graph == graph.name)
    driver.judge.add(new_context)
    search.forget(ours)
    names = new_context.view.compilable_names(keep_random=new_context.rng_strict)
    with driver.progress.step(f"{graph.name}: our recompile failed; retrying with views as reshapes"):
        retried = search.judge(GraphCandidate(graph.name, frozenset(names), purpose="whole (views as reshapes)"))
    if retried.outcome is Outcome.CRASH:  # not the view problem: back to the graph as captured
        driver.judge.add(context)
        search.forget(ours)
        search.record(GraphCandidate(graph.name, frozenset(context.view.compilable_names(keep_random=context.rng_strict))), whole)
        return context, whole, None
    harness = {"problem": whole.error, "fallback": "views_as_reshapes", "changed": changed, "judged": True}
    return new_context, retried, harness


def _outputs(finding: GraphFinding, driver: Driver) -> GraphFinding:
    """NaN/Inf in eager's model outputs, and the outputs where eager and compiled differ materially."""
    context, whole = finding.context, finding.whole
    with driver.progress.step(f"{context.name}: outputs that differ materially from eager's"):
        material = material_outputs(context, whole.compiled_values, finding.model_outputs or list(whole.outputs))
    return replace(finding, eager_nonfinite=outputs_problem(context.view, context.eager_values, finding.model_outputs),
                   material=material)


def _compiled_problem(finding: GraphFinding) -> bool:
    return any(v.new_nonfinite for v in finding.whole.outputs.values())


def quiet(finding: GraphFinding, driver: Driver | None = None) -> bool:
    """The outputs match and nothing hides a problem: no NaN/Inf, no unchecked random draws, no
    material difference, and not ``--oracle strict`` (which judges every node even then: a wrong op
    whose error stays below the outputs' noise, as the minifier's strict accuracy would)."""
    random_unchecked = finding.draws_random and not finding.context.rng_strict
    return finding.whole.outcome is Outcome.MATCH and not (
        finding.eager_nonfinite is not None or _compiled_problem(finding) or random_unchecked or finding.material
        or finding.context.oracle.strict_headline)


def _diverging(finding: GraphFinding, driver: Driver) -> bool:
    return not quiet(finding)


def _below_tolerance(finding: GraphFinding, driver: Driver) -> GraphFinding:
    return replace(finding, below=below_tolerance(finding.context, finding.whole, finding.model_outputs,
                                                  driver.search))


def _diverged(finding: GraphFinding, driver: Driver) -> GraphFinding:
    """The writer starts the repro's interpreters once a graph is known to diverge."""
    finding.context.drop_departing()  # the departures look is for graphs without a finding
    if driver.on_divergence is not None and (finding.whole.outcome is not Outcome.MATCH or finding.material
                                             or finding.eager_nonfinite is not None or _compiled_problem(finding)):
        driver.on_divergence()
    return finding


def _nodes(finding: GraphFinding, driver: Driver) -> GraphFinding:
    with driver.progress.step(f"{finding.context.name}: per-node verdicts"):
        return replace(finding, nodes=check_nodes(finding.context, driver.search))


def _crash_as_harness(finding: GraphFinding, driver: Driver) -> GraphFinding:
    """A node that crashes alone in our recompile is our harness's, never a compiler crash, when
    the compiler took the whole graph (it compiled), or the user's torch.compile of the model
    works: said in ``harness`` (the node, the error); the nodes that crashed alone are left unjudged."""
    assert finding.nodes is not None and finding.crash is not None
    whole_crashed = finding.whole.outcome is Outcome.CRASH
    if whole_crashed and not (driver.finding.model_level_check and real_compile_works(driver)):
        return finding
    node, error = finding.crash
    harness = {**(finding.harness or {}), "problem": f"{node} alone: {error}", "node": node,
               "judged": not whole_crashed, "real_compile": driver.finding.model_level}
    return replace(finding, harness=harness, nodes=replace(finding.nodes, crashes=()))


def real_compile_works(driver: Driver) -> bool:
    with driver.progress.step("our recompile crashed and no node crashes alone: does torch.compile of the model work?"):
        verdict = driver.search.judge(model_candidate(driver.finding, driver.options))
    driver.note(**model_level_noted(verdict))
    return verdict.outcome is not Outcome.CRASH


def confirm(finding: GraphFinding, driver: Driver, first: str) -> GraphFinding:
    """Compile the first culprit alone: the repro and the subsystem search rely on it failing.

    In the per-node check it was compiled beside other nodes; alone, Inductor may generate other
    code (a lone random op falls back to aten, say). If it then matches, the divergence needs
    neighbours: the caller searches windows instead.
    """
    context = finding.context
    with driver.progress.step(f"{context.name}: confirming {first} alone"):
        alone = driver.search.judge(GraphCandidate(context.name, frozenset([first]), purpose="confirm", keep_code=True))
    if alone.outcome is Outcome.MATCH:
        return replace(finding, confirmed=False)
    finding = replace(finding, confirmed=True, kernels=culprit_kernels(alone.code, (first,)))
    if finding.nodes is not None and first in finding.nodes.culprits:
        spread, replay_values = propagators(context, first, finding.nodes.verdict)
        finding = replace(finding, propagators=spread, replay_values=replay_values)
    return finding


def _confirm_crash(finding: GraphFinding, driver: Driver) -> GraphFinding:
    assert finding.crash is not None
    return confirm(finding, driver, finding.crash[0])


def _headline(finding: GraphFinding, driver: Driver) -> GraphFinding:
    assert finding.nodes is not None
    headline, reach = rank_culprits(finding.context, finding.nodes, finding.model_outputs,
                                    strict=finding.context.oracle.strict_headline)
    return replace(finding, headline=headline, reach=reach)


def _confirm_headline(finding: GraphFinding, driver: Driver) -> GraphFinding:
    assert finding.headline is not None
    return confirm(finding, driver, finding.headline)


def search_window(finding: GraphFinding, driver: Driver, known_passing: Any) -> GraphFinding:
    context, search = finding.context, driver.search
    with driver.progress.step(f"{context.name}: window search"):
        found = find_window(context, search, finding.whole.outcome, known_passing)
    finding = replace(finding, window=found)
    driver.update(finding)  # the window stands, whatever a budget cut leaves of what follows
    finding = replace(finding, window_verdict=search.judge(window(context, found)))
    return replace(finding, kernels=kept_kernels(search, window(context, found), found))


def _window_around_headline(finding: GraphFinding, driver: Driver) -> GraphFinding:
    """The headline culprit matches alone: the window of its neighbours that diverges."""
    assert finding.nodes is not None and finding.headline is not None
    passing = [n for n in finding.nodes.checked if n not in finding.nodes.culprits] + [finding.headline]
    return search_window(finding, driver, passing)


def _amplify(finding: GraphFinding, driver: Driver) -> GraphFinding:
    """Eager replays with the per-node check's compiled values injected (no compile): the op whose
    tiny difference the graph blows up."""
    context, nodes = finding.context, finding.nodes
    assert nodes is not None
    driver.judge.add_compiled(context.name, nodes.verdict.compiled_values)
    with driver.progress.step(f"{context.name}: amplified divergence (eager replays)"):
        amplification = find_amplification(context, driver.search, nodes.checked, nodes.verdict.compiled_values,
                                           [name for name, _ in finding.material])
    return replace(finding, amplification=amplification)


def _harness_or_window(finding: GraphFinding, driver: Driver) -> GraphFinding:
    """No node is wrong alone. When the whole graph crashed in our recompile and the user's
    torch.compile of the model works, the crash is ours (see :func:`harness_fallback`), not a
    finding: no window search on it. Otherwise the window search over every node."""
    assert finding.nodes is not None
    if finding.whole.outcome is Outcome.CRASH and driver.finding.model_level_check and real_compile_works(driver):
        harness = {**(finding.harness or {}), "problem": finding.whole.error, "judged": False,
                   "real_compile": driver.finding.model_level}
        return replace(finding, harness=harness, ended_by="harness")
    return replace(search_window(finding, driver, finding.nodes.checked), ended_by="window")


def _dropped_work(finding: GraphFinding, driver: Driver) -> GraphFinding:
    """A window that diverges: the node whose work its compiled code drops, by eager replays of the
    window with each node's work skipped (no compile), held against the window's compiled outputs."""
    assert finding.window is not None and finding.window_verdict is not None
    with driver.progress.step(f"{finding.context.name}: whose work does the window's compiled code drop?"):
        dropped = find_dropped_work(finding.context, driver.search, finding.window, finding.window_verdict)
    return replace(finding, dropped=dropped)


def _window_mismatch(finding: GraphFinding, driver: Driver) -> bool:
    return bool(finding.window) and finding.window_verdict is not None \
        and finding.window_verdict.outcome is Outcome.MISMATCH


def nan_forensics(finding: GraphFinding, driver: Driver) -> GraphFinding:
    """Compiled is at fault for a NaN/Inf when it turns a node non-finite where eager is finite
    (per-node check), or when the culprit's wrong value, replayed eagerly, makes the model's
    outputs non-finite; eager when its own outputs hold one (see :mod:`~bisect_engine.verdict.nonfinite`)."""
    context, nodes = finding.context, finding.nodes
    assert nodes is not None
    origin = compiled_origin(context.view, nodes.verdict.outputs)
    if origin is None and finding.replay_values and turned_nonfinite(context.eager_values, finding.replay_values,
                                                                     finding.model_outputs):
        # The culprit's output is wrong but finite; the NaN appears further down (eager replay).
        culprit = finding.culprit_nodes[0]
        after = [n.name for n in context.view.compute_nodes[context.view.position[culprit] + 1:]]
        found = first_origin(context.view, finding.replay_values, among=after)
        origin = found.name if found is not None else None
    nan_problem = finding.eager_nonfinite is not None or origin is not None
    if origin is None and nan_problem:
        # Compiled agrees with eager's own NaN: say where compiled first makes it too (on eager's
        # inputs), as a description; the blame stays with the model or the inputs.
        agreeing = first_origin(context.view, nodes.verdict.compiled_values, context.eager_values)
        origin = agreeing.name if agreeing is not None else None
    return replace(finding, nan_problem=nan_problem, compiled_nan=origin)


def departure_values(finding: GraphFinding) -> dict[str, Any]:
    """The compiled values the departures were judged on: per node, else the whole graph's."""
    return finding.nodes.verdict.compiled_values if finding.nodes else finding.whole.compiled_values


def _departures(finding: GraphFinding, driver: Driver) -> GraphFinding:
    """Where compiled departs from eager while closer to fp64 (judged against fp64 only): per node
    when the per-node check ran, else per output."""
    scope = "node" if finding.nodes else "graph"
    with driver.progress.step(f"{finding.context.name}: values compiled computes closer to fp64 than eager"):
        return replace(finding, departures=find_departures(finding.context, departure_values(finding), scope))


def _eager_rounding(finding: GraphFinding, driver: Driver) -> GraphFinding:
    """One compile says whether Inductor's eager-rounding setting makes compiled follow eager."""
    with driver.progress.step(f"{finding.context.name}: does emulate_precision_casts make compiled follow eager?"):
        return replace(finding, eager_rounding_follows=follows_eager_with(finding.context, driver.search, EAGER_ROUNDING))


def _cast_elision(finding: GraphFinding, driver: Driver) -> GraphFinding:
    """A round trip through bf16/fp16 the user wrote that compiled skips: named by eager replays
    (no compile beyond the whole graph's, cached where it ran), then the switch checked (one compile)."""
    context, exact = finding.context, driver.options.cast_elision_exact
    compiled = compiled_outputs(context, driver.search)
    elided = elided_cast(context, compiled, exact=exact)
    if elided is None:
        return finding
    follows = finding.eager_rounding_follows
    if exact:  # within the floors a match says nothing: the switch must bring compiled clearly closer
        follows = follows_eager_with(context, driver.search, EAGER_ROUNDING,
                                     away_from={name: compiled[name] for name in elided.outputs})
    elif follows is None:
        follows = follows_eager_with(context, driver.search, EAGER_ROUNDING)
    return replace(finding, elided_cast=elided, eager_rounding_follows=follows)


def _round_trips(finding: GraphFinding, driver: Driver) -> bool:
    """A round trip through fp16/bf16, or any narrowing cast where compiled departs from eager
    (not every graph with a ``.to(bf16)``: an autocast graph is full of them) or where script mode
    asks (``cast_elision_exact``: a matching call that differs from eager bit for bit)."""
    if finding.crash is not None:
        return False
    return bool(cast_round_trips(finding.context)) or (
        (bool(finding.departures) or driver.options.cast_elision_exact) and bool(narrowing_casts(finding.context)))


def _no_crash(finding: GraphFinding) -> bool:
    return not quiet(finding) and finding.crash is None


def _culprits(finding: GraphFinding) -> bool:
    return _no_crash(finding) and finding.nodes is not None and bool(finding.nodes.culprits)


def _no_culprit(finding: GraphFinding) -> bool:
    return _no_crash(finding) and finding.nodes is not None and not finding.nodes.culprits


def _no_finding(finding: GraphFinding, driver: Driver) -> bool:
    # A graph with no finding, under any reference: judged against eager, a departure beyond its
    # noise floor is a finding already; one within it (a bf16 `(x + 32) - 32` fused in fp32: 0.125
    # from eager, the rounding of its terms) is listed as the fp64 oracle lists it, never less.
    return not finding.has_finding


# The plan after the whole graph is judged. The elif chain of a diverging graph is spelled by the
# ``when``s: a crash alone, else the headline culprit confirmed (else its window), else the
# amplifying op, else our harness or a window over every node.
GRAPH_PLAN: tuple[Step[GraphFinding], ...] = (
    Step("outputs", _outputs, decides=False),
    Step("below_tolerance", _below_tolerance, when=quiet, decides=False),
    Step("diverged", _diverged, when=_diverging, decides=False),
    Step("nodes", _nodes, when=_diverging),
    Step("crash_as_harness", _crash_as_harness, when=lambda f, d: _diverging(f, d) and f.crash is not None),
    Step("confirm_crash", _confirm_crash, when=lambda f, d: _diverging(f, d) and f.crash is not None),
    Step("headline", _headline, when=lambda f, d: _culprits(f), decides=False),
    Step("confirm", _confirm_headline, when=lambda f, d: _culprits(f)),
    Step("window", _window_around_headline,
         when=lambda f, d: _culprits(f) and not f.confirmed and f.whole.outcome is not Outcome.MATCH),
    Step("amplify", _amplify, when=lambda f, d: _no_culprit(f) and bool(f.material)),
    Step("harness_or_window", _harness_or_window, decides=False,
         when=lambda f, d: _no_culprit(f) and f.amplification is None and f.whole.outcome is not Outcome.MATCH),
    Step("dropped_work", _dropped_work, when=_window_mismatch, decides=False),
    Step("nan_forensics", nan_forensics, when=_diverging, decides=False),
    Step("departures", _departures, when=_no_finding, decides=False),
    Step("eager_rounding", _eager_rounding, when=lambda f, d: _no_finding(f, d) and bool(f.departures),
         decides=False),
    Step("cast_elision", _cast_elision, when=_round_trips, decides=False),
)

# A culprit found before the whole graph's compile (see culprit_first): confirmed alone, then
# where its NaN/Inf comes from.
CULPRIT_FIRST_PLAN: tuple[Step[GraphFinding], ...] = (
    Step("confirm", _confirm_headline),
    Step("nan_forensics", nan_forensics, when=lambda f, d: bool(f.confirmed), decides=False),
    Step("cast_elision", _cast_elision, when=_round_trips, decides=False),
)
