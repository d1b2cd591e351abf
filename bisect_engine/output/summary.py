"""The few lines a human reads at the end of a run, made from report.json alone.

Each section reads its keys of the report and returns its lines (none when it has nothing to
say); :func:`summary` puts them in order. Pure: the report is the only input, so the summary of a
run and of ``bisect-accuracy report OUT`` are the same text.
"""
from __future__ import annotations

from typing import Any, Callable

from .amplified import amplification_lines, differences_lines
from .inside import inside_lines
from .wording import exact_reason, subsystem_sentence, ulps


def summary(report: dict[str, Any]) -> str:
    """A few lines for a human: verdict, op, where it is, the evidence, the numbers."""
    lines = [f"bisect-accuracy: {report['verdict']}"]
    for section in _SECTIONS:
        lines += section(report)
    return "\n".join(lines)


def culprit_lines(report: dict[str, Any]) -> list[str]:
    culprit = report.get("culprit")
    if not culprit:
        return []
    lines = [f"  culprit: {culprit['op']}  (node {culprit['node']}, graph {culprit['graph']}, {culprit['kind']})"]
    if culprit["kind"] == "capture_decomposition":
        lines.append(f"  decomposed at capture: AOT Autograd traces it into {', '.join((culprit.get('traced_as') or [])[:6])}, "
                     "which computes otherwise than the op eager runs; Inductor compiles that graph and inherits it")
    elif culprit["kind"] == "pre_grad" and culprit["pass"] == "decomposition at capture":
        lines.append("  decomposed: AOT Autograd traced this call into aten ops that compute otherwise than the op "
                     "eager runs (the captured graph is wrong before Inductor: each of its nodes matches its compile)")
    elif culprit["kind"] == "pre_grad":
        lines.append(f"  pass:    {culprit['pass'] or 'a pre-grad pass'} rewrote it on the torch-level graph, before "
                     "Inductor's AOT Autograd (the rewrite below, replayed eagerly, changes the outputs)")
    if len(culprit["ops"]) > 1 and culprit["kind"] not in ("pre_grad", "capture_decomposition"):
        lines.append(f"  window:  {', '.join(culprit['ops'])}")
    lines += inside_lines(culprit)
    lines.append(f"  source:  {culprit['source'] or '?'}   module: {culprit['module'] or '<top>'}")
    if "forward_op" in culprit:
        lines.append(f"  backward of {culprit['forward_op']['op']} (forward node {culprit['forward_op']['node']})")
    lines += _evidence_lines(culprit) + _saved_layout_lines(culprit) + _dropped_work_lines(culprit)
    lines += kernel_lines(culprit.get("kernels") or [], with_repro=bool(report.get("repro")))
    lines += _other_findings_lines(report)
    if culprit["kind"] == "amplified":
        lines += amplification_lines(culprit)
    if culprit.get("reaches_output") is False:
        lines.append("  its error does not reach the model's outputs in an eager replay (masked or compared away)")
    return lines


def _evidence_lines(culprit: dict[str, Any]) -> list[str]:
    lines = []
    error = culprit.get("error")
    if error and exact_reason(error):
        lines.append(f"  error:   {error['reason']} (against {error.get('reference', 'fp64')}; judged by equality, not in ulps)")
    elif error:
        lines.append(
            f"  error:   compiled {ulps(error['compiled_rms_ulps'])} ulps RMS vs eager {ulps(error['eager_rms_ulps'])}"
            f" (against {error.get('reference', 'fp64')}; {error['reason']})"
        )
    crash = culprit.get("crash")
    if crash:
        first = crash["message"].splitlines()[0] if crash["message"] else ""
        lines.append(f"  raised:  {crash['exception']}: {first}")
    if culprit["propagators"]:
        lines.append(f"  spreads to {len(culprit['propagators'])} downstream node(s)")
    return lines


def _dropped_work_lines(culprit: dict[str, Any]) -> list[str]:
    """A window whose compiled code drops a node's work: eager without that work gives compiled's values."""
    dropped = culprit.get("dropped_work")
    if not dropped:
        return []
    return [f"  dropped: the window's compiled outputs are eager's with {dropped['node']}'s work skipped (its input "
            f"{dropped['kept']} passed through unchanged): {dropped['output']} within {dropped['max_abs_diff']:.3g} "
            f"of that replay, {dropped['eager_max_abs_diff']:.3g} from eager's; the compiled code drops {dropped['op']}"]


def _saved_layout_lines(culprit: dict[str, Any]) -> list[str]:
    """A backward op that misreads a value the compiled forward saved laid out otherwise."""
    if culprit["kind"] != "saved_layout":
        return []
    layout, out = culprit["saved_layout"], culprit["output_difference"]
    saved_by = layout.get("saved_by") or {}
    return [f"  saved:   {layout['value']} (by {saved_by.get('op', '?')}, node {saved_by.get('node', '?')}) strides "
            f"{layout['compiled_strides']} compiled, {layout['eager_strides']} eager, the same values",
            f"  output:  {out.get('gradient_of') or out['output']} differs materially on that layout alone ({out['elements']} of {out['total']}"
            f" elements, max |diff| {out['max_abs_diff']}); each graph matches compiled alone, one eager replay"]


def _other_findings_lines(report: dict[str, Any]) -> list[str]:
    others = [f for f in report.get("findings") or [] if not f.get("headline")]
    if not others:
        return []
    listed = ", ".join(f"{f['op']} ({f['node']}{'' if f.get('reaches_output') is not False else ', does not reach the outputs'})"
                       for f in others[:5])
    more = f" and {len(others) - 5} more" if len(others) > 5 else ""
    return [f"  also wrong alone: {listed}{more} (report.json findings)"]


def below_tolerance_lines(report: dict[str, Any]) -> list[str]:
    """The clean verdict's ops wrong on their own (see ``below_tolerance_json``)."""
    below = [f for f in report.get("findings") or [] if f.get("below_tolerance") and "error" in f]
    if not below or report.get("culprit"):
        return []
    first = below[0]
    output = first["graph_output_error"]
    more = f" (and {len(below) - 1} more op(s): report.json findings)" if len(below) > 1 else ""
    reach = "" if first.get("reaches_output") is not False else "; alone, its error stays within the outputs' tolerance"
    return [f"  outputs within tolerance ({first['graph']} output {output['output']}: compiled "
            f"{ulps(output['compiled_rms_ulps'])} ulps RMS vs eager {ulps(output['eager_rms_ulps'])}); "
            f"{first['op']} is wrong on its own ({ulps(first['error']['compiled_rms_ulps'])} ulps vs "
            f"{ulps(first['error']['eager_rms_ulps'])}, node {first['node']}, {first.get('source') or '?'}){more}{reach}; "
            "--oracle strict makes it the verdict"]


def within_upstream_lines(report: dict[str, Any]) -> list[str]:
    """A graph's finding the upstream gate listed: wrong by the ulp rule alone, while the program's
    outputs pass (``within_upstream``; issue 36)."""
    lines = []
    for item in report.get("within_upstream") or []:
        error = item.get("error") or {}
        own = (f" ({ulps(error['compiled_rms_ulps'])} ulps RMS vs eager {ulps(error['eager_rms_ulps'])} at "
               f"{error['output']})" if error else "")
        failing = [o for o in item["program_outputs"] if o["reason"] == "upstream_same"]
        worst = max(failing or item["program_outputs"], key=lambda o: o["compiled_rms_ulps"]
                    if isinstance(o["compiled_rms_ulps"], (int, float)) else 0.0, default=None)
        at = (f" ({worst['output']}: {ulps(worst['compiled_rms_ulps'])} ulps RMS vs eager "
              f"{ulps(worst['eager_rms_ulps'])})" if worst else "")
        why = ("within torch._dynamo.utils.same's tolerance" if item["reason"] == "upstream_same"
               else "within the end-to-end tolerance")
        lines.append(f"  listed:  {item.get('op', '?')} (node {item.get('node', '?')}, graph {item['graph']}) is wrong "
                     f"on its own{own}, but the program's outputs are {why}{at}: not a divergence")
    return lines


def scan_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    for detail in (report.get("step_detail"), report.get("batch_detail")):
        if isinstance(detail, dict) and detail.get("cleared"):
            lines.append(f"  scan:    {detail['cleared']}")
    if report.get("step") is not None:
        lines.append(f"  training step: {report['step']} (first to diverge: {', '.join(report['step_detail']['diverged_in'])})")
    if isinstance(report.get("batch"), dict):
        batch = report["batch"]
        samples = f", samples {batch['samples']}" if batch["samples"] is not None else " (samples not independent)"
        lines.append(f"  batch:   {batch['index']}{samples}")
    return lines


def subsystem_lines(report: dict[str, Any]) -> list[str]:
    subsystem = report.get("subsystem")
    if not subsystem:
        return []
    lines = [f"  subsystem: {subsystem['kind']} {subsystem['name']}: {subsystem_sentence(subsystem)}"]
    if subsystem.get("note"):
        lines.append(f"  note:    {subsystem['note']}")
    lines.append("  workaround:\n" + "\n".join(f"    {line}" for line in subsystem["workaround"].splitlines()))
    return lines


def nan_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    nan = report.get("nan")
    for fed in report.get("inputs_nonfinite") or []:
        lines.append(f"  input:   argument {fed['argument']}{fed['path'] or ''} holds {fed['nan']} NaN and "
                     f"{fed['inf']} Inf (the data fed to the model)")
    if nan and nan.get("made_by") == "input":
        fed_inputs = ", ".join(f"{i['input']} ({i['nan']} NaN, {i['inf']} Inf)" for i in nan.get("inputs", []))
        culprit = report.get("culprit") or {}
        if culprit.get("made_by") == "compiler":  # one story: the culprit above is the compiler's
            lines.append(f"  eager's NaN/Inf come from the inputs: {fed_inputs}; compiled handles them "
                         f"otherwise at the culprit above")
        else:
            lines.append(f"  NaN/Inf come from the inputs, not from an op: {fed_inputs}; the compiler is not at fault")
    for side in ("eager", "compiled") if nan else ():
        where = (nan or {}).get(side)
        text = f"{where['op']} (node {where['node']}, {where['source'] or '?'})" if where else "none"
        lines.append(f"  first NaN/Inf in {side}: {text}")
        if where:
            lines.append(f"    cause: {where['cause']}; fix: {where['fix']}")
            if "backward_of" in where:
                lines.append(f"    {where['backward_of']}")
    return lines


def checks_lines(report: dict[str, Any]) -> list[str]:
    """What was not compiled, and where our own recompile needed a fallback."""
    lines = differences_lines(report.get("differences") or [])
    for misread in [] if (report.get("culprit") or {}).get("kind") == "saved_layout" else report.get("saved_layout") or []:
        reader, backward = misread.get("reader") or {}, misread.get("backward") or {}
        lines.append(f"  saved layout: {misread['value']} (saved by {misread.get('op')}) is laid out "
                     f"{misread['compiled_strides']} compiled, {misread['eager_strides']} eager, same values; "
                     f"{reader.get('op')} (node {reader.get('node')}, {reader.get('graph')}) misreads it: "
                     f"{backward.get('gradient_of') or backward.get('output')} differs")
    for skipped in report.get("not_checked") or []:
        if skipped["check"] == "whole_graph_compile":
            lines.append(f"  not compiled: {skipped['graph']} as a whole; the culprit's compiled value, replayed "
                         "eagerly, makes its outputs diverge")
        elif skipped["check"] == "graph_at_once":
            lines.append(f"  segments: {skipped['graph']} judged in {skipped['segments']} segments cut at module "
                         "boundaries, each on eager's values at its boundary (judging it at once would not fit the "
                         "memory left)")
        elif skipped["check"] == "graph":
            judged = f"; judged: {skipped['instead']}" if skipped.get("instead") else ""
            lines.append(f"  not checked: {skipped['graph']} (the run stopped before judging it{judged})")
    for harness in report.get("harness") or []:
        done = (f"judged the graph with its views as reshapes ({harness['views_rewritten']} rewritten) instead"
                if harness["judged"] else "its whole compile was not judged (each node was, and the model through torch.compile)")
        lines.append(f"  harness: our recompile of {harness['graph']} failed where torch.compile works "
                     f"({harness['problem'] or 'error'}); not a compiler finding: {done}")
    return lines


def pre_grad_lines(report: dict[str, Any]) -> list[str]:
    pre_grad = report.get("pre_grad")
    if not pre_grad:
        return []
    by = "rewrite by the " + pre_grad["by"] if str(pre_grad.get("by")).startswith("backend ") else "pre-grad rewrite"
    if pre_grad.get("by") == "decomposition at capture":
        by = "the aten graph AOT Autograd traced (decomposed)"
    lines = [f"  {by} in the torch-level graph of {pre_grad['graph']} changes its outputs eagerly "
             f"(max abs diff {pre_grad['max_abs_diff']:.3g}); aten op: {pre_grad['aten_op'] or '?'}"]
    for node in pre_grad["rewritten"][:5]:
        lines.append(f"    {node['before'] or '(new)'}  ->  {node['after'] or '(removed)'}   at {node['source'] or '?'}")
    return lines


def backend_lines(report: dict[str, Any]) -> list[str]:
    lines = []
    backend = report.get("model_backend")
    inside = report.get("backend_graphs")
    if inside and inside.get("note"):
        lines.append(f"  backend: {inside['backend']} (the user's): {inside['note']}; the Dynamo graphs were captured "
                     "the plain way and compiled with Inductor (the model-level check ran the backend as it is)")
    elif inside:
        lines.append(f"  backend: {inside['backend']} (the user's) kept: the {len(inside['captured'])} graph(s) it hands "
                     "Inductor were intercepted inside it and searched"
                     + ("; the model-level check ran it as it is" if report.get("model_level") else ""))
    elif backend and backend != "inductor":
        lines.append(f"  backend: the model comes compiled with backend {backend}: the model-level check ran it as it is "
                     "(eager: the model it wraps); the captured graphs were compiled with Inductor")
    if backend and backend != "inductor" and (not inside or inside.get("note")) and \
            report["verdict"] == "not_reproducible" and not report.get("subsystem"):
        lines.append(f"  no Inductor switch changes it: the difference may be made by the backend {backend} itself")
    return lines


def verdict_lines(report: dict[str, Any]) -> list[str]:
    """What the verdicts without a culprit mean."""
    lines = []
    if report["verdict"] == "not_reproducible":
        lines.append("  the model diverges under torch.compile, but no captured graph does on its own")
        cause = report.get("not_reproducible_cause")
        if cause:
            lines.append(f"  cause:   {cause['cause']}: {cause['explanation']}")
            lines.append(f"           evidence: {cause['evidence']}")
        if report.get("stale_artifact"):
            lines.append(f"  note: {report['stale_artifact']}")
    side, runs = report.get("model_level_nondeterministic_side"), report.get("model_level_nondeterministic")
    if side and runs:  # the model-level check failed once and was decided over runs (issue 36)
        lines.append(f"  model-level check: {side} values change run to run on the same inputs; "
                     f"{runs[0]} of {runs[1]} compiled runs differ beyond their spread")
    if report["verdict"] == "interrupted":
        where = report.get("interrupted") or {}
        lines.append(f"  interrupted by {where.get('signal', 'a signal')} during the {where.get('stage', '?')} stage;"
                     " what was learned so far is above")
    if report["verdict"] == "incomplete":
        unjudged = [entry for entry in report.get("not_checked") or [] if entry.get("check") == "graph"]
        lines.append("  no verdict: the budget ran out before every graph was judged" if unjudged or not report.get("graphs")
                     else "  no verdict: every captured graph was judged, but the budget ran out before the run's "
                          "last checks (the search stopped line above says where)")
    return lines


def files_lines(report: dict[str, Any]) -> list[str]:
    """The output folder: kept files, the repro, the numbers and where to read more."""
    lines = []
    kept, foreign = (report.get("output") or {}).get("previous"), (report.get("output") or {}).get("moved_foreign")
    if kept:
        lines.append(f"  files this tool did not write ({', '.join(foreign)}) moved to {kept}" if foreign
                     else f"  earlier run kept in {kept}")
    repro = report.get("repro")
    if repro:
        lines.append(f"  repro:   {repro['path']}  ({repro['status']} {repro.get('reproduced', '')} in fresh processes)")
    if report.get("budget"):
        lines.append(f"  search stopped: {report['budget']}")
    stats = report["stats"]
    stages = ", ".join(f"{k} {v}" for k, v in stats.get("compiles_by_stage", {}).items())
    reused = f"; {stats['compiles_reused']} reused for identical graphs" if stats.get("compiles_reused") else ""
    lines.append(f"  stats:   {stats['compiles']} Inductor compiles ({stages}{reused}), {stats['seconds']} s")
    if report.get("html_path"):
        lines.append(f"  html:    {report['html_path']}")
    if report.get("bug_report_path"):
        lines.append(f"  issue:   {report['bug_report_path']}  (a GitHub issue body)")
    trace = report.get("trace") or {}
    if trace.get("path"):
        lines.append(f"  trace:   {trace['path']}  (tlparse it: our findings are the bisect_accuracy_* artifacts)")
    return lines


def kernel_lines(kernels: list[dict[str, Any]], with_repro: bool) -> list[str]:
    """The culprit's generated kernel(s): name, language, size, and where to read the source."""
    if not kernels:
        return []
    first = kernels[0]
    more = f" (+{len(kernels) - 1} more)" if len(kernels) > 1 else ""
    kind = f"{first['kind']}, " if first.get("kind") else ""
    size = f"{first['lines']} lines, " if first.get("lines") else ""
    return [f"  kernel:  {first.get('name')}{more}  ({kind}{size}nodes "
            f"{', '.join(first.get('nodes') or []) or '?'}; source in report.html"
            f"{' and repro.py' if with_repro else ''})"]


_SECTIONS: tuple[Callable[[dict[str, Any]], list[str]], ...] = (
    culprit_lines, below_tolerance_lines, within_upstream_lines, scan_lines, subsystem_lines, nan_lines, checks_lines, pre_grad_lines,
    backend_lines, verdict_lines, files_lines)
