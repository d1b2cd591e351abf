"""From a :class:`~bisect_engine.localise.pipeline.RunResult` to ``report.json`` and a short summary.

Pure functions (the caller writes the files). The keys of ``report.json`` are a public interface:
extend, never rename.
"""
from __future__ import annotations

import dataclasses
import operator
import os
import platform
import re
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx
import torch.utils._pytree

from ..verdict.compare import Outcome, TensorVerdict
from ..verdict.digest import digest
from .inside import apply_inside
from .amplified import amplification_json, amplified_repro_spec
from .saved_layout import saved_layout_culprit, saved_layout_repro_spec
from .forensics import describe_origin
from ..verdict.graphs import module_path, op_name, source_location, value_nodes
from ..verdict.segments import SEPARATOR
from ..load.model_file import ModelSpec
from ..localise.judge import workers_stats
from ..localise.release import graph_digests
from ..localise.pipeline import GraphResult, RunResult
from ..strategies.pregrad import DecomposedOp
from ..strategies.sizes import headline
from ..verdict.shapes import ShapeMismatch, bind_symbols, data_dependent_ops, dynamic_dims
from ..verdict.compiler import Compiler
from ..localise.repro_inputs import repro_target
from .repro import (ReproSpec, fresh_process_threads, repro_spec, threads_to_carry, torch_level_repro_spec,
                    with_judgement)
from .wording import not_reproducible_cause, subsystem_sentence

SCHEMA_VERSION = 1


def verdict_of(result: RunResult) -> str:
    """``clean`` only when every captured graph was judged and matched; ``incomplete`` when the
    budget ran out before anything was found."""
    finding = result.finding
    if result.interrupted:
        return "interrupted"
    if finding is None:
        if result.names_an_op:  # a torch-level pass rewrote a node, or a backward op misreads a saved layout
            return "divergent"
        if result.budget or len(result.graphs) < result.captured_count:
            return "incomplete"
        return {"mismatch": "not_reproducible", "crash": "crash"}.get(result.model_level or "", "clean")
    if finding.crash or (finding.whole.outcome is Outcome.CRASH and not finding.culprit_nodes) or _window_crashed(finding):
        return "crash"
    if finding.nan_problem:
        return "nan"
    return "divergent"


def _window_crashed(graph: GraphResult) -> bool:
    """The culprit is a window (no node crashes alone) whose compile crashes, as the whole graph's did."""
    window = graph.window_verdict
    return graph.culprit_kind == "window" and window is not None and window.outcome is Outcome.CRASH


def forward_node_of(result: RunResult, graph: GraphResult, node: fx.Node) -> fx.Node | None:
    """For a backward node, the forward node it differentiates (same autograd ``seq_nr``)."""
    if graph.context.captured.kind != "backward" or "seq_nr" not in node.meta:
        return None
    forward = result.forward_graphs.get(graph.context.captured.index)
    if forward is None:
        return None
    candidates = [n for n in forward.graph.nodes if n.op == "call_function" and n.meta.get("seq_nr") == node.meta["seq_nr"]
                  and n.target is not operator.getitem]  # the op, not the item of its result it saved
    return candidates[-1] if candidates else None


def describe_node(result: RunResult, graph: GraphResult, name: str) -> dict[str, Any]:
    node = graph.context.view.nodes[name]
    source, source_path = source_location(node)
    forward = forward_node_of(result, graph, node)
    description: dict[str, Any] = {
        "op": op_name(node),
        "node": name,
        "graph": graph.context.name,
        "source": source,
        "source_path": source_path,
        "module": module_path(forward if forward is not None else node),
    }
    if forward is not None:
        description["forward_op"] = {"op": op_name(forward), "node": forward.name}
    return description


def culprit_json(result: RunResult, graph: GraphResult) -> dict[str, Any] | None:
    """The compiler's culprit; for a NaN the model makes in eager too, the op that first makes it."""
    names = graph.culprit_nodes
    made_by = "compiler"
    if not names and graph.eager_nan:
        names, made_by = (graph.eager_nan,), "model"
    if not names:
        return None
    named = (graph.named_node if made_by == "compiler" else None) or names[0]
    culprit = describe_node(result, graph, named)  # a window: listed whole, named by its culprit
    culprit["made_by"] = made_by
    culprit["kind"] = graph.culprit_kind
    culprit["confirmed_alone"] = graph.confirmed
    culprit["nodes"] = list(names)
    culprit["ops"] = [op_name(graph.context.view.nodes[n]) for n in names]
    first_value = graph.context.eager_values.get(value_nodes(graph.context.view.nodes[named])[0].name)
    if isinstance(first_value, torch.Tensor):
        culprit["device"] = first_value.device.type
    verdict = graph.nodes.verdict if culprit["kind"] == "node" and graph.nodes else graph.window_verdict
    if graph.crash:
        culprit["crash"] = crash_json(graph.crash[1])
        verdict = None
    elif _window_crashed(graph):
        culprit["crash"] = crash_json(graph.window_verdict.error)  # type: ignore[union-attr]
        verdict = None
    if made_by == "model":
        verdict = None
    if verdict is not None:
        failing = [n for n in verdict.failing_outputs if n in _value_names(graph, names)] or verdict.failing_outputs
        if failing:
            name = failing[0]
            culprit["error"] = {"output": name, **verdict.outputs[name].to_json(), "reference": graph.context.reference,
                                **differences(graph.context.eager_values.get(name), verdict.compiled_values.get(name))}
    culprit["propagators"] = graph.propagators
    reach = next((r for r in graph.reach if r.culprit in (named, names[0])), None)
    if reach is not None:
        culprit["reaches_output"] = reach.reaches_output
    if graph.kernels and made_by == "compiler":
        culprit["kernels"] = [kernel.to_json() for kernel in graph.kernels]
    if graph.dropped is not None and made_by == "compiler" and named == graph.dropped.node:
        culprit["dropped_work"] = dropped_work_json(graph)
    if graph.shapes is not None:  # a graph with symbolic sizes: does the finding need symbolic code
        culprit["shapes"] = graph.shapes
    if graph.amplification is not None and culprit["kind"] == "amplified":
        culprit.update(amplification_json(graph.amplification, lambda n: describe_node(result, graph, n)))
    apply_inside(culprit, graph.inside if made_by == "compiler" else None)
    return culprit


def dropped_work_json(graph: GraphResult) -> dict[str, Any]:
    """The window's compiled outputs are eager's with the named node's work skipped (its value left
    as its input ``kept``'s): what the compiled code drops, and how close that replay comes to the
    compiled value of ``output`` (``max_abs_diff``) beside eager's distance from it."""
    dropped = graph.dropped
    assert dropped is not None
    return {"node": dropped.node, "op": op_name(graph.context.view.nodes[dropped.node]), "kept": dropped.kept,
            "outputs": list(dropped.outputs), "output": dropped.output, "max_abs_diff": dropped.max_abs_diff,
            "eager_max_abs_diff": dropped.eager_max_abs_diff, "replays": dropped.tried}


def pre_grad_culprit(result: RunResult) -> dict[str, Any] | None:
    """The culprit of a torch-level pass finding: the first node the pass rewrote into an op
    that changes the outputs, named by the aten op it runs after the rewrite (kind ``pre_grad``)."""
    rewrite = result.pre_grad
    if rewrite is None or not rewrite.nodes:
        return None
    node = next((n for n in rewrite.nodes if n.aten_ops), rewrite.nodes[0])
    attribution = result.model_attribution
    decomposed = rewrite.decomposed
    culprit = {
        "op": rewrite.aten_op or "?", "node": node.node, "graph": rewrite.graph, "source": node.source,
        "source_path": None, "module": None, "made_by": "compiler", "kind": "pre_grad",
        "confirmed_alone": None, "nodes": [n.node for n in rewrite.nodes],
        "ops": [op for n in rewrite.nodes for op in n.aten_ops[:1]] or [rewrite.aten_op or "?"],
        "propagators": [], "pass": rewrite.by or (attribution.name if attribution else None),
        "before": node.before, "after": node.after,
        "max_abs_diff": rewrite.max_abs_diff,  # the graph's outputs, eagerly, after the pass against before
    }
    if decomposed is not None:  # the op eager runs, whose decomposition alone computes otherwise
        culprit.update(kind="capture_decomposition", ops=[decomposed.op], traced_as=list(decomposed.traced_ops))
    return culprit


def findings_json(result: RunResult, graph: GraphResult | None) -> list[dict[str, Any]]:
    """Every node of the finding's graph that is wrong on its own (graph order, at most
    ``MAX_RANKED`` judged for reach), the headline marked, each with the model outputs its wrong
    value reaches in an eager replay and by how much (RMS ulps against eager's output)."""
    if graph is None or graph.nodes is None:
        return []
    verdict = graph.nodes.verdict
    reach = {r.culprit: r for r in graph.reach}
    findings = []
    for name in graph.nodes.culprits:
        entry = describe_node(result, graph, name)
        failing = [n for n in verdict.failing_outputs if n in _value_names(graph, (name,))]
        if failing:
            entry["error"] = {"output": failing[0], **verdict.outputs[failing[0]].to_json()}
        entry["headline"] = name in graph.culprit_nodes
        if name in reach:
            entry["reaches_output"] = reach[name].reaches_output
            entry["outputs"] = [{"output": o, "rms_ulps": round(u, 3)} for o, u in reach[name].outputs]
        else:
            entry["reaches_output"] = None  # not replayed (beyond the ranking cap)
        findings.append(entry)
    for name, error in graph.nodes.crashes:
        findings.append({**describe_node(result, graph, name), "crash": crash_json(error),
                         "headline": name in graph.culprit_nodes})
    return findings


def below_tolerance_json(result: RunResult) -> list[dict[str, Any]]:
    """With no finding: the ops wrong alone in a graph whose outputs agreed within tolerance while
    compiled's error was clearly above eager's (``below_tolerance``: never the verdict)."""
    listed = []
    for graph in result.graphs:
        below = graph.below
        if below is None or not below.nodes.culprits:
            continue
        view = dataclasses.replace(graph, nodes=below.nodes, reach=list(below.reach), headline=below.headline,
                                   window=None, amplification=None)
        trigger = {"output": below.output, **below.error.to_json()}
        listed += [{**entry, "below_tolerance": True, "graph_output_error": trigger} for entry in findings_json(result, view)]
    return listed


def within_upstream_json(result: RunResult) -> list[dict[str, Any]]:
    """Each graph finding made by the ulp rule alone whose program outputs (the model-level check,
    scope model) pass, by upstream's ``same`` or the end-to-end rule: its culprit as the headline
    would have read, with the program outputs' errors; listed, never the verdict."""
    return [{**(culprit_json(result, graph) or {"graph": graph.context.name}), **graph.within_upstream.to_json()}
            for graph in result.graphs if graph.within_upstream is not None]


def differences(eager: Any, compiled: Any) -> dict[str, float]:
    """``max_abs_diff`` and ``max_rel_diff`` of compiled against eager, as ``torch.testing`` words
    them, over the entries finite on both sides (relative: where eager is not zero); empty when
    there is nothing to compare."""
    if not (isinstance(eager, torch.Tensor) and isinstance(compiled, torch.Tensor)) or eager.shape != compiled.shape:
        return {}
    if not (eager.is_floating_point() and compiled.is_floating_point()):
        return {}
    eager64, compiled64 = eager.detach().cpu().to(torch.float64), compiled.detach().cpu().to(torch.float64)
    usable = torch.isfinite(eager64) & torch.isfinite(compiled64)
    if not bool(usable.any()):
        return {}
    difference = (compiled64 - eager64).abs()
    relative = usable & (eager64 != 0)
    found = {"max_abs_diff": float(difference[usable].max())}
    if bool(relative.any()):
        found["max_rel_diff"] = float((difference[relative] / eager64[relative].abs()).max())
    return {k: float(f"{v:.6g}") for k, v in found.items()}


def crash_json(error: str) -> dict[str, str]:
    """``{"exception", "message"}`` from ``"Type: message"``: the type, and the message's first lines."""
    exception, _, message = error.partition(": ")
    lines = [line for line in message.strip().splitlines() if line.strip()]
    return {"exception": exception, "message": "\n".join(lines[:6])}


def _value_names(graph: GraphResult, names: tuple[str, ...]) -> set[str]:
    view = graph.context.view
    return {v.name for n in names for v in value_nodes(view.nodes[n])}


def nan_json(result: RunResult, graph: GraphResult) -> dict[str, Any] | None:
    if not graph.nan_problem:
        return None
    nan: dict[str, Any] = {side: _nan_side(result, graph, name, side) if name else None
                           for side, name in (("eager", graph.eager_nan), ("compiled", graph.compiled_nan))}
    eager = graph.eager_nonfinite
    # Who is at fault: the data fed in, the model itself (eager makes it too), or compilation alone.
    nan["made_by"] = eager.made_by if eager is not None else "compiler"
    if eager is not None and eager.made_by == "input":
        nan["inputs"] = [{"input": name, "nan": nan_count, "inf": inf_count} for name, nan_count, inf_count in eager.inputs]
    return nan


def _nan_side(result: RunResult, graph: GraphResult, name: str, side: str) -> dict[str, Any]:
    """Where a side first turns non-finite, what its op was fed, why, and the usual fix."""
    described = describe_node(result, graph, name)
    view, eager = graph.context.view, graph.context.eager_values
    node = view.nodes[name]
    sources = [n for n in node.all_input_nodes if n.name in eager]
    outputs = eager if side == "eager" else {**graph.replay_values, **(graph.nodes.verdict.compiled_values if graph.nodes else {})}
    output = [outputs.get(v.name) for v in value_nodes(node)]
    described.update(describe_origin(op_name(node), [n.name for n in sources], [eager[n.name] for n in sources], output))
    forward = forward_node_of(result, graph, node)
    if forward is not None:
        source, _ = source_location(forward)
        described["backward_of"] = f"the backward of the {op_name(forward)} at {source or '?'}"
    return described


def graph_json(graph: GraphResult) -> dict[str, Any]:
    view = graph.context.view
    nodes = list(graph_digests(graph))
    return {
        "name": graph.context.name,
        "kind": graph.context.captured.kind,
        # a segment of a graph too large to judge at once (of, index, count, modules, nodes; added key)
        "segment": graph.context.captured.segment.to_json() if graph.context.captured.segment else None,
        "compile_id": graph.context.captured.compile_id,  # the Dynamo compile it came from (tlparse's [0/0])
        "nodes": len(view.compute_nodes),
        "whole": graph.whole.outcome.value,
        "whole_error": graph.whole.error or None,
        # "compile": the whole graph compiled at once; "eager_injection": not compiled (see not_checked)
        "whole_by": graph.whole_by,
        # the step of the graph's search plan that decided it (localise/graph_steps.py GRAPH_PLAN)
        "ended_by": graph.ended_by,
        "checked_nodes": len(graph.nodes.checked) if graph.nodes else 0,
        "crashed_nodes": [{"node": n, **crash_json(e)} for n, e in graph.nodes.crashes] if graph.nodes else [],
        "node_check_error": (graph.nodes.group_error or None) if graph.nodes else None,
        "compiled_node_copies": graph.nodes.compiled_copies if graph.nodes else 0,
        # outputs whose compiled value differs materially from eager's (whatever fp64 says)
        "material_outputs": [{"output": name, **difference.to_json()} for name, difference in graph.material],
        "digests": nodes,
        # compiled values that changed run to run on the same inputs, where a mismatch was then
        # decided over runs (issue 36): {"whole"/"nodes": [runs that mismatched, runs]}
        "nondeterministic": _runs(graph) or None,
        # whose values changed run to run there (the determinism question: eager, compiled or both)
        "nondeterministic_side": _sides(graph) or None,
    }


def _scoped(graph: GraphResult) -> dict[str, Any]:
    return {"whole": graph.whole, "nodes": graph.nodes.verdict if graph.nodes else None,
            "window": graph.window_verdict}


def _runs(graph: GraphResult) -> dict[str, list[int]]:
    return {scope: list(verdict.runs) for scope, verdict in _scoped(graph).items()
            if verdict is not None and verdict.runs}


def _sides(graph: GraphResult) -> dict[str, str]:
    return {scope: verdict.nondeterministic for scope, verdict in _scoped(graph).items()
            if verdict is not None and verdict.nondeterministic}


def build_report(result: RunResult, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    finding = result.finding
    report: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "verdict": verdict_of(result),
        "culprit": culprit_json(result, finding) if finding else (pre_grad_culprit(result)
                                                                  or saved_layout_culprit(result, describe_node, _gradient_of)),
        "findings": findings_json(result, finding) if finding else below_tolerance_json(result),
        "nan": nan_json(result, finding) if finding else None,
        "model": str(result.spec.path),
        "graphs": [graph_json(g) for g in result.graphs],
        "model_level": result.model_level,
        # the model-level check decided over runs, either side changing run to run on the same
        # inputs (issue 36): [compiled runs that mismatched, runs], and whose values changed
        "model_level_nondeterministic": list(result.model_level_runs) or None,
        "model_level_nondeterministic_side": result.model_level_side or None,
        "harness": harness_json(result),
        "not_checked": not_checked_json(result),
        "pre_grad": result.pre_grad.to_json() if result.pre_grad else None,
        # get_model() returned a model torch.compile'd with this backend ("inductor", or the user's).
        "model_backend": getattr(result.spec, "backend", None),
        # the graphs the user's backend handed Inductor, captured inside it (None: not such a run)
        "backend_graphs": backend_graphs_json(result),
        "differences": differences_json(result),
        # a saved value the compiled forward lays out otherwise that a backward op misreads (issue 37)
        "saved_layout": saved_layout_json(result),
        # graphs' findings the upstream gate listed: the program's outputs pass (issue 36)
        "within_upstream": within_upstream_json(result),
        "subsystem": _attribution(result),
        "budget": result.budget,
        "interrupted": result.interrupted,
        "environment": environment(),
        "stats": {
            "compiles": result.compiler.compiles,
            "compiles_by_stage": dict(result.compiler.by_stage),
            # compiles not made: a graph identical to one compiled before (a segment after its twin) ran its code
            "compiles_reused": result.compiler.reused,
            "compile_seconds": round(result.compiler.seconds, 2),
            "seconds": round(result.seconds, 2),
            "graphs_captured": result.captured_count,
            # the tool's peak resident memory (MiB) when the search ended (output and repro checks after)
            "peak_rss_mb": round(result.peak_rss_bytes / 2**20) if result.peak_rss_bytes else None,
            # what the model's own step adds at its peak (MiB), from a run of it on fake tensors at admission
            "eager_step_mb": _megabytes(getattr(result.spec, "step_bytes", None)),
            # values that waited on disk because memory asked (--memory-budget, free memory): MiB, calls, where
            "offload": result.offload,
            "workers": workers_stats(result.search),  # how the run was made, not what it found
        },
    }
    report.update(shapes_json(result))
    report["inputs_nonfinite"] = inputs_nonfinite(result.spec.inputs)
    report.update(result.scan)  # "batch" / "step" when a scan ran
    report.update(extra or {})
    report["not_reproducible_cause"] = not_reproducible_cause(report)  # a script session decides its own
    return report


DATA_DEPENDENT_LIMIT = (
    "data-dependent sizes (unbacked symbols made by nonzero, masked_select, unique, a boolean-mask index "
    "or .item()) are compiled as Dynamo hands them to Inductor (a subgraph cut after one takes the size as "
    "a plain symbolic input, its value from eager's run), but they are not swept (no `sizes` for them) "
    "and culprit.shapes (dynamic-only / static-too) is judged only in a graph whose inputs have symbolic sizes")


def _megabytes(count: int | None) -> float | None:
    return round(count / 2**20, 3) if count is not None else None


def shapes_json(result: RunResult) -> dict[str, Any]:
    """``dynamic``: the graphs with symbolic sizes (which inputs' dims, the checked call's
    values, the guards) and the compiles that could not be symbolic; ``sizes``: the failing sizes
    of the finding's symbol (headline sweep), with every symbol swept under ``sizes.swept``."""
    graphs = []
    for graph in result.graphs:
        captured = graph.context.captured
        signature = captured.shape_signature
        if signature is None:
            continue
        try:
            values = bind_symbols(signature, captured.inputs)
        except ShapeMismatch:
            values = {}
        graphs.append({"graph": captured.name, "symbols": values, "guards": list(captured.guards[:20]),
                       "inputs": dynamic_dims(signature, graph.context.view.placeholder_names())})
    fallbacks = list(dict.fromkeys(result.compiler.static_fallbacks))
    data_dependent = [{"graph": graph.context.captured.name, "ops": ops} for graph in result.graphs
                      if (ops := data_dependent_ops(graph.context.captured.graph_module))]
    out: dict[str, Any] = {}
    if graphs or fallbacks or data_dependent:
        out["dynamic"] = {"graphs": graphs, "symbolic_compiles": result.compiler.symbolic_compiles,
                          "static_fallbacks": fallbacks[:5], "data_dependent": data_dependent,
                          "limits": [DATA_DEPENDENT_LIMIT] if data_dependent else []}
    finding = result.finding
    if finding is not None and finding.sweeps:
        chosen = headline(finding.sweeps)
        assert chosen is not None
        out["sizes"] = {**chosen.to_json(), "repro_size": _repro_size(finding),
                        "swept": [s.to_json() for s in finding.sweeps]}
    return out


def _repro_size(graph: GraphResult) -> int | None:
    chosen = headline(graph.sweeps)
    if chosen is None:
        return None
    return chosen.smallest_failing if graph.sized_context is not None else chosen.checked


def backend_graphs_json(result: RunResult) -> dict[str, Any] | None:
    run = result.backend_run
    if run is None:
        return None
    entry = {"backend": run.backend, "dynamo_graphs": len(run.dynamo), "handed_to_inductor": len(run.inductor_graphs),
             "captured": [] if run.note else [g.name for g in result.captured]}
    return {**entry, "note": run.note} if run.note else entry


def not_checked_json(result: RunResult) -> list[dict[str, Any]]:
    """Checks the run skipped because what they would establish was established otherwise: a graph
    whose whole compile was skipped, its outputs' divergence shown by an eager replay with the
    confirmed culprit's compiled value injected. Not checked: whether Inductor, compiling the
    whole graph at once, makes the same error there (fusion may change the code it generates).
    And (check ``graph``, added value) a captured graph a run cut short (its budget: time,
    compiles, memory; an interrupt) never judged: nothing of it was compared."""
    skipped: list[dict[str, Any]] = [
        {"graph": g.context.name, "check": "whole_graph_compile",
         "instead": "eager replay of the graph with the confirmed culprit's compiled value injected, "
                    "judged by the whole graph's rule",
         "not_established": "that the whole graph compiled at once diverges the same way"}
        for g in result.graphs if g.whole_by == "eager_injection"]
    skipped += [{"graph": name, "check": "graph_at_once", "segments": len(plan),
                 "instead": f"judged in {len(plan)} segments cut at module boundaries, each compiled whole and judged "
                            "on eager's values at its boundary (judging the graph at once would not fit the memory left)",
                 "not_established": "that the graph compiled at once (fused across the segments' boundaries) matches by "
                                    "the graph's own rule, nor errors carried from one segment into the next (the "
                                    "model-level check compiles the whole program)"}
                for name, plan in result.segments.items()]
    if result.budget or result.interrupted:
        judged = {g.context.name for g in result.graphs}
        why = "interrupted" if result.interrupted else "its budget ran out"
        for g in result.captured:
            count = len(result.segments.get(g.name, ()))
            done = [k for k in range(1, count + 1) if f"{g.name}{SEPARATOR}{k}" in judged]
            left = [k for k in range(1, count + 1) if k not in done]
            if g.name in judged or (count and not left):
                continue
            if done:  # a graph judged in segments, cut short after some of them
                skipped.append({"graph": g.name, "check": "graph", "instead": f"segments {done} of {count}",
                                "not_established": f"anything about the nodes of segments {left} of this {g.kind} "
                                                   f"graph: the run stopped before judging them ({why})"})
                continue
            skipped.append({"graph": g.name, "check": "graph", "instead": None,
                            "not_established": f"anything about this {g.kind} graph: the run stopped before judging "
                                               f"it ({why})"})
    return skipped


def harness_json(result: RunResult) -> list[dict[str, Any]]:
    """Where our own recompile failed and a real torch.compile did not: never a compiler finding.
    ``fallback``: what was judged instead (None: the graph's whole compile was not judged; its
    nodes were, alone, and the model through torch.compile)."""
    return [{"graph": g.context.name, "problem": ((g.harness.get("problem") or "").splitlines() or [""])[0][:300], "fallback": g.harness.get("fallback"),
             "views_rewritten": g.harness.get("changed", 0), "judged": bool(g.harness.get("judged")),
             "real_compile": g.harness.get("real_compile")}
            for g in result.graphs if g.harness]


def inputs_nonfinite(inputs: Any) -> list[dict[str, Any]]:
    """The model's arguments that hold NaN/Inf (``argument``: the position in ``get_inputs()``,
    ``path``: where inside it): data the model is fed, never the compiler's doing."""
    found = []
    for position, argument in enumerate(inputs or ()):
        leaves, _ = torch.utils._pytree.tree_flatten_with_path(argument)
        for path, leaf in leaves:
            if isinstance(leaf, torch.Tensor) and (leaf.is_floating_point() or leaf.is_complex()):
                nan, inf = int(torch.isnan(leaf).sum()), int(torch.isinf(leaf).sum())
                if nan or inf:
                    found.append({"argument": position, "path": torch.utils._pytree.keystr(path) or None,
                                  "nan": nan, "inf": inf})
    return found


def bare_report(model: Path | str, verdict: str, seconds: float = 0.0) -> dict[str, Any]:
    """A report with no engine run behind it (nothing checked yet, a script's clean run, an
    interrupted load): every public key present."""
    result = RunResult(ModelSpec(Path(model), None, (), None, None), (), Compiler(), seconds)  # type: ignore[arg-type]
    report = build_report(result)
    report["verdict"] = verdict
    return report


def finding_repro_spec(result: RunResult, recipes: list[dict[str, Any]] | None = None) -> ReproSpec | None:
    """The repro for the run's finding: its minimal subgraph and what the repro must show, at the
    intra-op thread count the program ran with where a fresh process would get another.

    ``recipes``: draw the inputs at random from these (checked by the caller to reproduce)
    instead of embedding the real values.
    """
    spec = _finding_repro_spec(result, recipes)
    threads = threads_to_carry(torch.get_num_threads(), fresh_process_threads(os.environ))
    return None if spec is None else dataclasses.replace(spec, threads=threads)


def _finding_repro_spec(result: RunResult, recipes: list[dict[str, Any]] | None = None) -> ReproSpec | None:
    target = repro_target(result)
    if target is None and result.layout_finding is not None:
        return saved_layout_repro_spec(result, describe_node, environment=environment(),
                                       finding=[("verdict", "divergent"), ("model", result.spec.path.name)])
    if target is None:
        return pre_grad_repro_spec(result)
    graph, names, expect = target
    named = (graph.named_node if names == graph.culprit_nodes else None) or names[0]
    described = describe_node(result, graph, named)
    ops = [op_name(graph.context.view.nodes[n]) for n in names]
    what = {"mismatch": "Inductor disagrees with eager (fp64 reference)",
            "crash": "Inductor fails to compile or run",
            "eager_nonfinite": "eager itself produces NaN/Inf (a model bug, not the compiler)"}[expect]
    finding = [
        ("verdict", verdict_of(result)),
        ("ops", ", ".join(ops)),
        ("nodes", ", ".join(names) + f"  (graph {graph.context.name})"),
        ("source", described["source_path"] or "unknown"),
        ("module", described["module"] or "<top>"),
        ("model", result.spec.path.name),
    ]
    notes: list[str] = []
    if graph.amplification is not None and graph.culprit_kind == "amplified":
        amplified = amplified_repro_spec(
            graph.context, graph.amplification, lambda n: describe_node(result, graph, n),
            config=result.spec.inductor_config, unrenderable_config=result.spec.unrenderable_config,
            environment=environment(), finding=finding, notes=notes)
        if amplified is not None:
            return amplified
    if graph.attribution is not None:
        attribution = graph.attribution.to_json()
        notes.append(f"subsystem: {attribution['kind']} {attribution['name']}: {subsystem_sentence(attribution)}")
        notes += ["workaround:"] + [f"    {line}" for line in attribution["workaround"].splitlines()]
    sized = graph.sized_context or graph.context  # the smallest failing size, where swept
    chosen = headline(graph.sweeps)
    if chosen is not None:
        finding.append(("shapes", f"symbolic ({graph.shapes or 'static not checked'}); {chosen.symbol} = "
                                  f"{_repro_size(graph)} here; failing {chosen.symbol} in "
                                  f"{', '.join(f'{lo}..{hi}' for lo, hi in chosen.failing) or 'none'} "
                                  f"of {chosen.tried} tried in {chosen.low}..{chosen.high}"))
    subgraph = graph.context.subgraph(names)
    spec = repro_spec(
        subgraph, sized.eager_values, notes=notes,
        config=result.spec.inductor_config, unrenderable_config=result.spec.unrenderable_config,
        rng_strict=graph.context.rng_strict, seed=graph.context.seed, recipes=recipes,
        title=f"{ops[0]}{' (+%d more)' % (len(ops) - 1) if len(ops) > 1 else ''}: {what}",
        finding=finding, environment=environment(), expect=expect,
        kernels=graph.kernels if expect != "eager_nonfinite" else (), aot_inductor=result.spec.aot_inductor,
    )
    return with_judgement(spec, sized, subgraph)


def pre_grad_repro_spec(result: RunResult) -> ReproSpec | None:
    """The repro of a torch-level pass finding: the graph before the pass, through torch.compile."""
    rewrite, culprit = result.pre_grad, pre_grad_culprit(result)
    if rewrite is not None and rewrite.decomposed is not None and culprit is not None:
        return decomposition_repro_spec(rewrite.decomposed, culprit, result.spec.path.name)
    if rewrite is None or rewrite.cut is None or culprit is None:
        return None
    cut, pass_name = rewrite.cut, culprit["pass"] or "a pre-grad pass"
    finding = [("verdict", "divergent"), ("pass", pass_name), ("ops", ", ".join(culprit["ops"])),
               ("nodes", ", ".join(culprit["nodes"]) + f"  (torch-level graph of {rewrite.graph})"),
               ("before", culprit["before"] or "(new)"), ("after", culprit["after"] or "(removed)"),
               ("source", culprit["source"] or "unknown"), ("model", result.spec.path.name)]
    notes = [f"The pass runs inside torch.compile: set {pass_name} as your job does (it is not renderable "
             "as code) and run this file; eager runs the graph as written."]
    if pass_name == "decomposition at capture":
        notes = ["torch.compile traces this call into the aten ops named above (AOT Autograd's decomposition); "
                 "eager runs the op's own kernel. Run this file: it needs no setting."]
    if result.model_attribution is not None:
        notes += ["workaround:"] + [f"    {line}" for line in result.model_attribution.workaround.splitlines()]
    return torch_level_repro_spec(
        cut.graph_module, cut.input_names, cut.output_names, cut.inputs,
        title=f"{culprit['op']}: {pass_name} rewrites {culprit['node']}; torch.compile disagrees with eager (fp64 reference)",
        finding=finding, environment=environment(), config=result.spec.inductor_config,
        unrenderable_config=result.spec.unrenderable_config, notes=notes)


def decomposition_repro_spec(decomposed: DecomposedOp, culprit: dict[str, Any], model: str) -> ReproSpec:
    """The repro of an op decomposed wrong at capture: the op alone on its real inputs, run eagerly
    and as the aten graph AOT Autograd traces of it (no compile): Inductor compiles that trace."""
    cut = decomposed.cut
    finding = [("verdict", "divergent"), ("op", decomposed.op),
               ("traced as", ", ".join(decomposed.traced_ops[:10])),
               ("call", f"{culprit['before'] or '?'}  (torch-level graph of {culprit['graph']})"),
               ("source", culprit["source"] or "unknown"), ("model", model)]
    notes = ["AOT Autograd traces this op into the aten ops named above (its Python decomposition, under the "
             "Python dispatcher); eager runs the op's own kernel. torch.compile compiles the decomposed graph, "
             "so Inductor (and aot_eager) inherit the difference. This file runs both eagerly: no compile."]
    return torch_level_repro_spec(
        cut.graph_module, cut.input_names, cut.output_names, cut.inputs,
        title=f"{decomposed.op}: its decomposition at capture computes otherwise than the op eager runs",
        finding=finding, environment=environment(), config={}, unrenderable_config=[], notes=notes,
        expect="decomposition")


def differences_json(result: RunResult) -> list[dict[str, Any]]:
    """Values where compiled departs from eager beyond rounding noise while closer to fp64 (not a
    finding by the fp64 rule), with the Inductor setting that makes compiled follow eager."""
    found = cast_elision_json(result)
    for graph in result.graphs:
        if graph.elided_cast is not None:  # one story: the departures are the skipped cast's
            continue
        for departed in graph.departures:
            setting = None
            if graph.eager_rounding_follows is not None:
                setting = {"name": "emulate_precision_casts", "value": True,
                           "follows_eager": graph.eager_rounding_follows}
            entry = {**describe_node(result, graph, departed.node), "value": departed.value,
                     "scope": departed.scope, "elements": departed.elements,
                     **departed.departure.to_json(), "setting": setting}
            if graph.consequence is not None and departed.value in graph.consequence.saved:
                entry["backward"] = _consequence_json(result, graph.consequence)
            found.append(entry)
    return found


def saved_layout_json(result: RunResult) -> list[dict[str, Any]] | None:
    """Each value a forward saves that the compiled forward lays out otherwise (equal values, other
    strides) and that an op of the backward misreads: eager's backward replayed on it alone gives
    other gradients (``departures.saved_layout_consequence``); None when there is none."""
    found = []
    for graph in result.graphs:
        misread = graph.layout_misread
        if misread is None:
            continue
        backward = next(g for g in result.graphs if g.context.name == misread.consequence.graph)
        found.append({**describe_node(result, graph, misread.node), "value": misread.value,
                      "eager_strides": list(misread.eager_strides), "compiled_strides": list(misread.compiled_strides),
                      "reader": describe_node(result, backward, misread.reader),
                      "backward": _consequence_json(result, misread.consequence)})
    return found or None


def cast_elision_json(result: RunResult) -> list[dict[str, Any]]:
    """Each ``.to(bf16)``/``.to(fp16)`` round trip the compiled code skipped: the narrowing cast
    named (eager replayed without the round trip gives compiled's outputs), with the setting that
    keeps it, checked by one compile (``follows_eager``)."""
    found = []
    for graph in result.graphs:
        elided = graph.elided_cast
        if elided is None:
            continue
        setting = {"name": "emulate_precision_casts", "value": True, "follows_eager": graph.eager_rounding_follows}
        found.append({**describe_node(result, graph, elided.node), "value": elided.node, "scope": "graph",
                      "cast_elided": {"dtype": elided.dtype, "cast_back": elided.back, "outputs": list(elided.outputs),
                                      **({"together": list(elided.together)} if elided.together else {})},
                      "setting": setting})
    return found


def _consequence_json(result: RunResult, consequence: Any) -> dict[str, Any]:
    """What a forward departure does to the gradients: eager's backward replayed on the compiled
    forward's saved values (no compile), the first gradient that differs and the ops that amplify."""
    backward = next(g for g in result.graphs if g.context.name == consequence.graph)
    return {"graph": consequence.graph, "output": consequence.output,
            "gradient_of": _gradient_of(result, backward, consequence.output), **consequence.difference.to_json(),
            "amplifiers": [{**describe_node(result, backward, a.node), "why": a.why} for a in consequence.amplifiers],
            "replays": 1}


def _gradient_of(result: RunResult, backward: GraphResult, output: str) -> str | None:
    """The model input or parameter a backward output is the gradient of, as the user wrote it
    (``self.high``): backward outputs follow the forward's inputs, which follow Dynamo's graph's."""
    graph_output = next(n for n in reversed(backward.context.view.graph_module.graph.nodes) if n.op == "output")
    returned = graph_output.args[0] if isinstance(graph_output.args[0], (tuple, list)) else (graph_output.args[0],)
    position = next((i for i, v in enumerate(returned) if getattr(v, "name", None) == output), None)
    forward = next((g for g in result.graphs if g.context.name == f"forward_{backward.context.captured.index}"), None)
    torch_level = forward.context.captured.torch_level if forward is not None else None
    if position is None or torch_level is None:
        return None
    names = [n.name for n in torch_level[0].graph.nodes if n.op == "placeholder"]
    if len(names) != len(returned):
        return None
    name = re.sub(r"^l_", "", names[position]).rstrip("_")
    return re.sub(r"_(modules|parameters|buffers)_", ".", name)


def _attribution(result: RunResult) -> dict[str, str] | None:
    attribution = result.finding.attribution if result.finding else result.model_attribution
    return attribution.to_json() if attribution else None


def environment() -> dict[str, str]:
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "cuda": torch.version.cuda or "none",  # the CUDA build torch was made with (kept: a public key)
        "gpu": _gpu(),  # the device the run could use: its name, or "none"
        # The settings that let float32 matmuls/convolutions run in TF32 or bf16 (judged at that precision).
        "precision": (f"float32_matmul_precision={torch.get_float32_matmul_precision()}, "
                      f"cuda.matmul.allow_tf32={bool(torch.backends.cuda.matmul.allow_tf32)}, "
                      f"cudnn.allow_tf32={bool(torch.backends.cudnn.allow_tf32)}"),
    }


def _gpu() -> str:
    try:
        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    except Exception:  # noqa: BLE001 - a broken driver is no reason to lose the report
        return "none"
