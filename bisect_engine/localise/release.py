"""A graph judged clean lets go of its tensors (issue 34: values live as long as a reader needs them).

Once a graph's plan has run and it holds nothing a later step or the report reads by value (no
finding, no culprit, no departures, no amplification, no op wrong alone below tolerance, no NaN), its
per-value digests are taken for the report (``GraphFinding.digests``, what ``graph_json`` reads),
then its eager values, replays and compiled values are dropped: from its record, from the judge
(its context and per-node values: a later candidate of this graph would be an internal error,
never a verdict on missing values), from the search's cache (forgotten) and history (kept as
verdicts without values). Every verdict and statistic stays.

Values still read later wait on disk while another graph is judged and while the upstream gate's
model-level check runs, where memory asks (:func:`spill_run_values`, ``verdict/offload.py``: the
step's estimated need past the room the memory budget leaves): the same tensors, paged back in when read.
"""
from __future__ import annotations

import dataclasses
import gc
import logging
import os
from typing import Any, Sequence

import torch
import torch.fx as fx

from ..search import BudgetExhausted
from ..verdict.compare import Outcome, TensorVerdict, same_layout_and_bits
from ..verdict.digest import Digests
from ..verdict.graphs import CapturedGraph, GraphView, op_name, source_location, value_nodes
from ..verdict.segments import ROOM_FOR_TESTS, plan_segments, segment_graphs, segmentable
from ..strategies.departures import saved_layouts_differ, saved_masks_differ
from ..load.memory import COPIES, EAGER_COPIES, tensor_bytes
from ..load.model_file import ModelSpec
from ..verdict.offload import PagedOut, attributes_of, current, offload, storage_bytes, tensors_in
from ..verdict.fx_eval import mutates
from ..verdict.oracle import GraphContext, SubgraphVerdict
from .drive import Driver
from .model_check import fp64_activation_bytes, fp64_run_on_disk_need, model_device
from .records import GraphFinding

log = logging.getLogger(__name__)
replace = dataclasses.replace


def digest_entry(node: fx.Node, name: str, eager_value: torch.Tensor, compiled_value: Any,
                 verdict: TensorVerdict | None, scope: str, digest: Digests | None = None) -> dict[str, Any]:
    """One value's digests, eager and compiled (``producer``: the compute node of a ``getitem``
    value); with its verdict (``error``) when it was judged:
    ``scope`` ``node`` when the node was judged on eager inputs (the per-node check), ``graph``
    when it is an output of the whole graph compiled at once (errors accumulated upstream).
    ``digest``: the digests of the values alive beside this one (a view digested once)."""
    digest = digest or Digests()
    entry: dict[str, Any] = {
        "node": name,
        "op": op_name(node),
        "source": source_location(node)[0],
        **({"producer": node.name} if node.name != name else {}),
        "eager": digest(eager_value).to_json(),
        "compiled": digest(compiled_value).to_json() if isinstance(compiled_value, torch.Tensor) else None,
    }
    if verdict is not None:
        entry["error"] = {**verdict.to_json(), "scope": scope}
    return entry


def share_saved_values(context: GraphContext, captured_graphs: Sequence[CapturedGraph]) -> int:
    """A forward graph's eager values stand in for its backward's copies of them: the backward
    captured the values the forward saved for it (copies, made at capture), and the forward's eager
    re-run has just computed each of them again. Where a backward input is bit for bit the forward's
    value of the same name (same dtype, sizes, strides), the backward holds the forward's tensor and
    its copy goes: one copy of the saved activations instead of two. Nothing writes either (a value
    is recorded once and only read), and a value that differs (a random op drawn again) keeps its
    copy. Returns the bytes let go."""
    captured = context.captured
    if captured.kind != "forward":
        return 0
    backward = next((g for g in captured_graphs if g.kind == "backward" and g.index == captured.index
                     and g.called), None)
    if backward is None or mutates(backward.graph_module):  # our re-runs of the backward write its inputs
        return 0
    names = [n.name for n in backward.graph_module.graph.nodes if n.op == "placeholder"]
    held = {tensor.untyped_storage().data_ptr() for tensor, _version in backward.shared}  # by reference already
    freed = 0
    for index, (name, value) in enumerate(zip(names, backward.inputs)):
        eager = context.eager_values.get(name)
        if not isinstance(value, torch.Tensor) or not isinstance(eager, torch.Tensor) or value.device.type != "cpu" \
                or value.untyped_storage().data_ptr() in held | {eager.untyped_storage().data_ptr()}:
            continue
        # never a view that keeps more alive than the copy it replaces (a slice of a larger value)
        if eager.untyped_storage().nbytes() <= value.untyped_storage().nbytes() and same_layout_and_bits(value, eager):
            freed += value.numel() * value.element_size()
            backward.inputs[index] = eager
    return freed


def graph_digests(graph: GraphFinding) -> tuple[dict[str, Any], ...]:
    """Every tensor value's digests (report.json ``graphs[].digests``): taken when the graph lets
    go of its values, else now."""
    if graph.digests is not None:
        return graph.digests
    compiled = graph.nodes.verdict.compiled_values if graph.nodes else graph.whole.compiled_values
    verdicts, scope = (graph.nodes.verdict.outputs, "node") if graph.nodes else (graph.whole.outputs, "graph")
    eager = graph.context.eager_values
    digests = Digests()  # every value below is alive until it returns
    paged_out = PagedOut()  # a value that waited on disk leaves memory again once digested
    entries = []
    for node in graph.context.view.compute_nodes:
        for value in value_nodes(node):
            if isinstance(eager.get(value.name), torch.Tensor):
                entries.append(digest_entry(node, value.name, eager[value.name], compiled.get(value.name),
                                            verdicts.get(value.name), scope, digests))
                paged_out(eager[value.name], compiled.get(value.name))
    return tuple(entries)


def releasable(graph: GraphFinding, others: tuple[GraphFinding, ...], captured_graphs: Any = (),
               carried: bool = False) -> bool:
    """Nothing later reads this graph's values: it is clean, holds no culprit or other finding
    read by value, and is not the backward a forward's departures are carried into.
    ``captured_graphs``: the run's captured graphs (the forward's backward, read for the saved
    floats it compares). ``carried``: the departures were carried into the backward already
    (``run_steps.RUN_PLAN``'s ``departures_into_backward``), the one later reader of a clean graph's
    departing values: a graph with departures lets go of its values too (its listing holds names and
    numbers only)."""
    if graph.has_finding or graph.whole.outcome is not Outcome.MATCH or graph.harness is not None:
        return False
    if graph.digests is not None:
        return False  # released already
    below = graph.below is not None and graph.below.nodes.culprits  # the report lists those ops, by value
    held = (graph.departures if not carried else None, graph.amplification, below, graph.inside,
            graph.sized_context, graph.material, graph.eager_nonfinite, graph.compiled_nan, graph.replay_values,
            graph.window)
    if any(item for item in held) or (graph.nodes is not None and graph.nodes.culprits):
        return False
    if any(g.layout_misread is not None and g.layout_misread.consequence.graph == graph.context.name for g in others):
        return False  # a layout misread's repro runs this backward's op on its eager values (output/saved_layout.py)
    if carried:
        return True
    captured = graph.context.captured
    forward = f"forward_{captured.index}"
    backward = next((g.graph_module for g in captured_graphs
                     if g.kind == "backward" and g.index == captured.index), None)
    if graph.context.name == forward and graph.whole_by == "compile" \
            and (saved_masks_differ(graph.context, graph.whole.compiled_values, backward)
                 or saved_layouts_differ(graph.context, graph.whole.compiled_values)):
        return False  # departures.saved_value_consequence / saved_layout_consequence read them with the backward
    return not (graph.context.name == f"backward_{captured.index}"
                and any(g.context.name == forward and (g.departures or g.context.eager_values) for g in others))


def _without_values(verdict: Any) -> Any:
    if isinstance(verdict, SubgraphVerdict) and verdict.compiled_values:
        return replace(verdict, compiled_values={})
    return verdict


def _below_without_values(below: Any) -> Any:
    """A below-tolerance record without culprits (nothing reads its per-node values)."""
    if below is None:
        return None
    return replace(below, nodes=replace(below.nodes, verdict=_without_values(below.nodes.verdict)))


def _of_graph(name: str) -> Any:
    return lambda key: getattr(key, "graph", None) == name


def release(graph: GraphFinding, driver: Driver) -> GraphFinding:
    """``graph`` with its digests taken and its values dropped everywhere the run held them."""
    name = graph.context.name
    released = replace(graph, digests=graph_digests(graph), whole=_without_values(graph.whole),
                       nodes=replace(graph.nodes, verdict=_without_values(graph.nodes.verdict)) if graph.nodes else None,
                       window_verdict=_without_values(graph.window_verdict),
                       below=_below_without_values(graph.below))
    _let_go(name, graph.context, driver)
    log.debug("%s: judged clean, its values released", name)
    return released


# A graph's judgement holds about this many times its inputs' bytes: its eager and compiled
# values, and its fp64 reference's live set (twice the bytes): what a next graph is said to need.
GRAPH_COPIES = 4
# A segment is planned at this many times what it reads: a cut is made where memory is short, and a
# segment of two 1 GB Linears (w8192's block, 2 GiB read) held 6.1x at its peak (its noise model: each
# weight widened to fp64 beside its noisy twin): 22.4 of the machine's 23.5 GB with the run's own 10.
# At 8x w8192 is cut at its Linears, yet peaks at 21.4 GB: one 1 GB Linear's noise model alone holds
# about 8 GB, and no cut goes below an op (benchmarks/scale_memory.md, round 19).
SEGMENT_COPIES = 8


def graph_need(graph: CapturedGraph) -> int:
    """The bytes judging ``graph`` is estimated to add (:data:`GRAPH_COPIES` times its inputs)."""
    return GRAPH_COPIES * _read_bytes(graph)


def _read_bytes(graph: CapturedGraph) -> int:
    return storage_bytes(tensors_in([graph.inputs, graph.shared]))


def _plan(graph: CapturedGraph, room: int) -> tuple[tuple[str, ...], ...] | None:
    """``graph`` cut at module boundaries into segments each needing at most ``room``
    (:data:`SEGMENT_COPIES` times what it reads; ``segments.plan_segments``), or None."""
    view = GraphView(graph.graph_module)
    sizes = {name: storage_bytes(tensors_in([value])) for name, value in zip(view.placeholder_names(), graph.inputs)}
    cut = plan_segments(view, sizes, lambda read: SEGMENT_COPIES * read, room, backward=graph.kind == "backward")
    return tuple(cut) if cut is not None else None


def graph_pieces(graph: CapturedGraph, driver: Driver) -> list[CapturedGraph]:
    """``graph``, or its segments where judging it at once would not fit the memory left (issue 34:
    ``verdict/segments.py``): the values the run holds move to disk first where memory asks, then
    the graph is cut at module boundaries into segments whose needs fit the room left; the cut is
    the run's (``RunFinding.segments``), made once per graph. A graph that cannot be cut (one module
    alone does not fit; symbolic sizes, in-place writes, random draws) is kept whole: its judgement
    then stops the run before it, as it did (exit 4, never the OOM killer)."""
    plan = driver.finding.segments.get(graph.name)
    if plan is None:
        need = graph_need(graph)
        spill_run_values(driver, need, captured_inputs=False)
        room = _room(driver)
        if room is None or need <= room or segmentable(graph) is not None:
            return [graph]
        plan = _plan(graph, room)
        if plan is None:
            return [graph]
        log.info("%s: judging it needs about %.1f MB and %.1f MB is left: judged in %d segments",
                 graph.name, need / 2**20, room / 2**20, len(plan))
        driver.note(segments={**driver.finding.segments, graph.name: plan})
    with driver.progress.step(f"{graph.name}: cut into {len(plan)} segments at module boundaries (memory)"):
        return segment_graphs(graph, plan)


def segments_after_memory_stop(graph: CapturedGraph, driver: Driver, cut: BudgetExhausted) -> list[CapturedGraph] | None:
    """``graph``'s segments after memory stopped its judgement as a whole (``cut``: a step of it that
    asked for more room than was left, an fp64 or noise run of it, ``offload.spill_graph_values``, or
    one of their ops, ``Offload.watch``; the estimate :func:`graph_need` let it through), or None
    where it cannot be judged so (another cut; a graph that cannot be cut; no cut into two segments
    or more). What its partial judgement holds is let go first (:func:`forget_graph`); the cut is
    planned against the room left then, at most half of the whole graph's segment need
    (:data:`SEGMENT_COPIES` times what it reads), so it is judged in two segments at least; the cut
    is the run's, as :func:`graph_pieces`' is."""
    if cut.reason != "memory" or segmentable(graph) is not None or graph.name in driver.finding.segments:
        return None
    forget_graph(graph.name, driver)
    gc.collect()  # what the stopped judgement made and let go in reference cycles: before the room is read
    whole = SEGMENT_COPIES * _read_bytes(graph)
    plan = _plan(graph, min(r for r in (_room(driver), whole // 2) if r is not None))
    if plan is None:
        return None
    log.info("%s: %s; judged again in %d segments", graph.name, cut, len(plan))
    driver.note(segments={**driver.finding.segments, graph.name: plan})
    driver.search.budget.exhausted = None
    with driver.progress.step(f"{graph.name}: memory stopped it whole; cut into {len(plan)} segments at module boundaries"):
        return segment_graphs(graph, plan)


def forget_graph(name: str, driver: Driver) -> None:
    """Graph ``name``'s partial judgement let go (memory stopped it partway): its record in the run,
    then its values everywhere (:func:`_let_go`)."""
    driver.note(graphs=tuple(g for g in driver.finding.graphs if g.context.name != name))
    _let_go(name, driver.judge.contexts.get(name), driver)


def _let_go(name: str, context: GraphContext | None, driver: Driver) -> None:
    """Graph ``name``'s values dropped wherever the run holds them: its context and per-node values
    in the judge, its cached verdicts (forgotten; the history keeps the calls, without values), the
    context's own values."""
    judge = driver.judge
    if context is not None and judge.contexts.get(name) is context:
        del judge.contexts[name]
    judge.compiled.pop(name, None)
    for key in [k for k in judge.sweeps if k[0] == name]:
        del judge.sweeps[key]
    driver.search.forget(_of_graph(name))
    driver.search.lighten(_of_graph(name), _without_values)
    if context is not None:
        context.release_values()


def _room(driver: Driver) -> int | None:
    """The bytes the run may still take (``load/memory.MemoryGuard.room``, the run's budget's); a
    testing hook may set it (:data:`~bisect_engine.verdict.segments.ROOM_FOR_TESTS`)."""
    forced = os.environ.get(ROOM_FOR_TESTS)
    if forced:
        return int(forced)
    room_left = driver.search.budget.room_left
    return room_left() if room_left is not None else None


def model_check_need(spec: ModelSpec) -> int:
    """The bytes the model-level check is estimated to add: ``load/memory.COPIES`` times the
    model's parameters and inputs (fp64 copies, gradients, results), as admission counts them, and
    its fp64 run's activations (``model_check.fp64_activation_bytes``)."""
    parameters = list(spec.model.parameters()) if isinstance(spec.model, torch.nn.Module) else []
    return COPIES * (tensor_bytes(parameters) + tensor_bytes(spec.inputs)) + fp64_activation_bytes(spec)


def model_check_need_on_disk(spec: ModelSpec) -> int:
    """The same with its fp64 model on disk (``model_check._fp64_copy(on_disk=True)``): the larger of
    one run of the model (its gradients and activations: twice its parameters, with its inputs, or
    what its step adds where admission measured it, ``ModelSpec.step_bytes``) and the fp64 run's
    share at once (``model_check.fp64_run_on_disk_need``); the runs' results wait on disk between them."""
    parameters = [*spec.model.parameters(), *spec.model.buffers()] if isinstance(spec.model, torch.nn.Module) else []
    one_run = max(EAGER_COPIES * tensor_bytes(parameters), spec.step_bytes or 0) + tensor_bytes(spec.inputs)
    return max(one_run, fp64_run_on_disk_need(spec))


def room_for_model_check(driver: Driver, what: str) -> None:
    """Before the model-level check (``what``: which): the run's values wait on disk where memory
    asks (:func:`spill_run_values`); then the check is weighed against the room left, in memory
    (:func:`model_check_need`) or, where that does not fit and a disk can take it, with its fp64 model
    on disk (:func:`model_check_need_on_disk`; ``Offload.weigh``, as the check decides itself); the run
    stops before it (exit 4) where neither fits."""
    spec, need = driver.finding.spec, model_check_need(driver.finding.spec)
    spill_run_values(driver, need)
    module = isinstance(spec.model, torch.nn.Module)
    current().weigh_on(model_device(spec.model) if module else None, need, what,
                       model_check_need_on_disk(spec) if module else None, f"{what}, its fp64 model on disk")


def spill_run_values(driver: Driver, need: int, captured_inputs: bool = True, what: str | None = None) -> int:
    """:func:`offload` of every value the run holds, where a step adding ``need`` bytes would not
    fit the room memory leaves (the run's ``verdict/offload.Offload``): the graphs judged so far (eager values, replays,
    compiled values), the verdicts' compiled values and (``captured_inputs``) the captured graphs'
    own copies of their inputs (a backward's saved activations); never what is held by reference
    (a captured graph's ``shared`` inputs, whose version counters its capture checks; the model's
    parameters, buffers and inputs, which the model-level check runs; the graphs' constants). A
    moved value still pickles as any tensor (a worker's or an isolated child's job). ``what``: the
    step, stopped before it where it cannot fit even so (``verdict/offload.Offload.require``)."""
    run, judge = driver.finding, driver.judge
    roots = [run.graphs, list(judge.contexts.values()), judge.compiled, [v for _k, v in driver.search.history]]
    if captured_inputs:
        roots.append([(g.inputs, g.later_inputs) for g in run.captured])
    held = tensors_in(roots, skip=(CapturedGraph, ModelSpec, torch.nn.Module))
    protected = tensors_in([[(g.shared, g.torch_level) for g in run.captured], run.spec.inputs])
    protected += [t for g in run.captured for t in attributes_of(g.graph_module)]
    if isinstance(run.spec.model, torch.nn.Module):
        protected += [*run.spec.model.parameters(), *run.spec.model.buffers()]
    moved = offload(held, protected, need, what)
    if moved:
        log.info("%d MB of the run's values moved to memory-mapped files", moved >> 20)
    return moved

