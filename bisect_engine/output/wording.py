"""Words shared by every renderer of a report (the summary, ``report.html``, ``bug_report.md``).

Torch-free and pure: a report read back from ``report.json`` is rendered without importing torch.
"""
from __future__ import annotations

from typing import Any

_SUBSYSTEM_SENTENCE = {
    "decomposition": "Inductor's decomposition of {name} is wrong: compiling without it matches eager.",
    "lowering": "Inductor's lowering/codegen of {name} is wrong: falling back to the aten kernel matches eager.",
    "pass": "the graph pass {name} breaks it: compiling with it disabled matches eager.",
    "config": "flipping config {name} makes it match eager.",
}


def subsystem_sentence(subsystem: dict[str, str]) -> str:
    template = _SUBSYSTEM_SENTENCE.get(subsystem.get("kind", ""), "{name} is involved.")
    return template.format(name=subsystem.get("name", "?"))


def ulps(value: Any) -> str:
    """An error in ulps as people read it: ``3.4e+07``, ``12.5``, ``0``."""
    return f"{value:.3g}" if isinstance(value, (int, float)) else str(value)


def short_number(value: Any) -> str:
    """A measured number in a sentence: ``2.83``, ``1.2e+07``, ``inf``."""
    return f"{value:.3g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


ULP_REASONS = ("rms", "max", "nonfinite")  # the ulp rule's reasons (and a new NaN/Inf); others are exact rules


def exact_reason(error: dict[str, Any]) -> bool:
    """The verdict was an exact rule's (integers, a zero's sign, a value with one right answer,
    a dtype or shape): its facts are the reason's words, its ulps say nothing (``compiled 0.001
    ulps RMS vs eager 0`` beside ``exact: 4 of 8 elements``)."""
    return bool(error.get("reason")) and error.get("reason") not in ULP_REASONS and not error.get("new_nonfinite")


def culprit_ops(culprit: dict[str, Any]) -> str:
    ops = culprit.get("ops") or [culprit.get("op") or "?"]
    return ops[0] if len(ops) == 1 else f"{', '.join(ops[:3])}{' ...' if len(ops) > 3 else ''}"


def headline(report: dict[str, Any]) -> str:
    """The answer in a few words, for a page title or a heading."""
    verdict, culprit, nan = report.get("verdict"), report.get("culprit") or {}, report.get("nan") or {}
    where = f" at {culprit['source']}" if culprit.get("source") else ""
    if culprit.get("made_by") == "model" or (nan.get("made_by") == "model" and not culprit):
        return f"The model itself makes NaN/Inf in {culprit.get('op') or (nan.get('eager') or {}).get('op', '?')}{where}"
    if culprit.get("kind") == "amplified":
        amplifier = culprit.get("amplifier") or "a later op"
        return f"{culprit_ops(culprit)}{where} differs slightly when compiled, and {amplifier} amplifies it"
    if culprit.get("crash"):
        return f"Inductor fails on {culprit_ops(culprit)}{where}"
    if culprit.get("kind") == "saved_layout":
        return f"{culprit_ops(culprit)}{where} misreads a value torch.compile saves for it in another memory layout"
    if culprit.get("kind") == "capture_decomposition":
        return f"{culprit_ops(culprit)}{where} is decomposed at capture into ops that compute otherwise"
    if culprit and verdict == "nan" and (culprit.get("error") or {}).get("new_nonfinite"):
        return f"Inductor makes NaN/Inf in {culprit_ops(culprit)}{where}"
    if culprit and culprit.get("kind") == "window":
        return f"Inductor computes {culprit_ops(culprit)} wrong when compiled together{where}"
    if culprit:
        return f"Inductor computes {culprit_ops(culprit)} wrong{where}"
    return {
        "clean": "torch.compile agrees with eager",
        "not_reproducible": "torch.compile diverges, but no captured graph does on its own",
        "incomplete": "No verdict: the search budget ran out",
        "unchecked": "Graphs recorded, not checked",
        "crash": "Inductor fails to compile the model",
        "nan": "Compiled code makes NaN/Inf",
    }.get(str(verdict), "torch.compile disagrees with eager; no op was named")


def answer(report: dict[str, Any]) -> str:
    """One sentence (or two) that says what was found and why it is believed."""
    culprit, nan = report.get("culprit") or {}, report.get("nan") or {}
    if culprit.get("made_by") == "model" or (nan.get("made_by") == "model" and not culprit):
        origin = nan.get("eager") or {}
        return (f"Eager makes NaN/Inf there too, so this is a model issue, not a compiler bug"
                f"{': ' + origin['cause'] if origin.get('cause') else ''}"
                f"{'; usual fix: ' + origin['fix'] if origin.get('fix') else ''}.")
    if culprit:
        return _culprit_answer(report, culprit)
    verdict = report.get("verdict")
    if verdict == "clean":
        graphs = report.get("graphs") or []
        nodes = sum(int(g.get("nodes") or 0) for g in graphs)
        model = " and the whole model under torch.compile matches too" if report.get("model_level") == "match" else ""
        return f"All {len(graphs)} captured graph(s) ({nodes} aten nodes) match eager against fp64{model}."
    if report.get("budget"):
        return f"The search stopped before naming an op: {report['budget']}."
    if verdict == "not_reproducible":
        return "The model diverges under torch.compile, but every captured graph matches on its own."
    return "No op was named; see the graphs below."


def decomposition_answer(culprit: dict[str, Any]) -> str:
    """A decomposition at capture, in words: what was traced, that Inductor inherits it."""
    traced = ", ".join((culprit.get("traced_as") or [])[:6]) or "other aten ops"
    return (f"AOT Autograd traces {culprit.get('op')} into {traced} (its Python decomposition), which computes "
            f"otherwise than the op eager runs (max abs diff {culprit.get('max_abs_diff')}, judged against fp64, "
            "both run eagerly: no compile). The captured graph is wrong before Inductor; Inductor compiles it and "
            "inherits the difference (each of its nodes matches its compile).")


def _culprit_answer(report: dict[str, Any], culprit: dict[str, Any]) -> str:
    if culprit.get("kind") == "amplified":
        own, out = culprit.get("own_error") or {}, culprit.get("output_difference") or {}
        amplifiers = ", ".join(f"{a.get('op')} at {a.get('source') or '?'} ({a.get('explains') or a.get('why')})"
                               for a in culprit.get("amplifiers") or []) or "a later op"
        return (f"Compiled, it is only {ulps(own.get('ulps_vs_eager'))} ulps from eager (within every per-op "
                f"tolerance), but {amplifiers} turns that into a material difference of output "
                f"{out.get('output', '?')} (max |diff| {out.get('max_abs_diff', '?')}); found by "
                f"{culprit.get('replays', '?')} eager replays, no extra compile.")
    if culprit.get("kind") == "saved_layout":
        return saved_layout_answer(culprit)
    if culprit.get("kind") == "capture_decomposition":
        return decomposition_answer(culprit)
    crash, error = culprit.get("crash"), culprit.get("error")
    place = f"node {culprit.get('node')} of {culprit.get('graph')}" + (
        f", module {culprit['module']}" if culprit.get("module") else "")
    if crash:
        first = (crash.get("message") or "").splitlines()[:1]
        sentence = f"Compiling or running {place} raises {crash.get('exception')}{': ' + first[0] if first else ''}."
    elif error and exact_reason(error):
        sentence = f"Judged by equality, not in ulps: {error.get('reason')} ({place})."
    elif error:
        sentence = (f"Its output is {ulps(error.get('compiled_rms_ulps'))} ulps RMS off the fp64 reference where "
                    f"eager's own error is {ulps(error.get('eager_rms_ulps'))} ulps ({place}).")
    else:
        sentence = f"It diverges from eager ({place})."
    confirmed = culprit.get("confirmed_alone")
    if confirmed is not None and not crash:
        sentence += " Compiled alone it still fails." if confirmed else " Compiled alone it matches: it needs its neighbours."
    subsystem = report.get("subsystem")
    if subsystem:
        sentence += f" Cause: {subsystem_sentence(subsystem)}"
    return sentence


def saved_layout_answer(culprit: dict[str, Any]) -> str:
    """A backward op that reads the layout, not the values, of a value the compiled forward saves
    laid out otherwise (culprit kind ``saved_layout``)."""
    layout, out = culprit.get("saved_layout") or {}, culprit.get("output_difference") or {}
    saved_by = layout.get("saved_by") or {}
    changed = f"the gradient of {out['gradient_of']}" if out.get("gradient_of") else f"output {out.get('output', '?')}"
    return (f"The compiled forward saves {layout.get('value', '?')} (made by {saved_by.get('op', '?')}) with strides "
            f"{layout.get('compiled_strides')} where eager's are {layout.get('eager_strides')}, the same values; "
            f"{culprit.get('op', '?')} reads the layout, not the values: eager's backward replayed on that layout "
            f"changes {changed} in {out.get('elements', '?')} of {out.get('total', '?')} elements (max |diff| "
            f"{short_number(out.get('max_abs_diff'))}). Each graph matches compiled alone; one eager replay, no extra "
            "compile.")


# ---- why a program's compiled result differs while no op is found (report key ``not_reproducible_cause``) --
NOT_REPRODUCIBLE_CAUSES = {
    "stale_cache": "the program's compile of the diverging graph was served from Inductor's on-disk cache, "
                   "and a fresh compile of it matches: the cached artifact may be stale",
    "saved_layout": "the gradients differ, yet the forward and the backward graph each match compiled alone: the "
                    "compiled forward saves a value for the backward laid out otherwise (the same values, other "
                    "strides), and a backward op reads the layout, not the values (see saved_layout)",
    "backward_together": "the gradients differ, yet the forward and the backward graph each match compiled alone "
                         "(the backward judged on eager's saved values): the difference is made where they meet "
                         "(what the compiled forward saves for the backward) or by the real compile's partition",
    "backward_not_reached": "the gradients differ, and no backward graph was captured to judge",
    "recapture_matches": "an output of the program's compiled call differs, yet our recapture of that graph, "
                         "compiled on the same call's inputs, matches: the program's compile differs from ours "
                         "(its settings, a size or scale it specialised, state outside the graph)",
    "model_level_only": "the model differs through torch.compile, yet every captured graph matches compiled alone "
                        "(on its first call's inputs)",
}


def not_reproducible_cause(report: dict[str, Any], served_from_cache: bool = False) -> dict[str, Any] | None:
    """Which of :data:`NOT_REPRODUCIBLE_CAUSES` a ``not_reproducible`` report is, from what the run
    recorded (the diverging call's output, the graphs judged and how, a cache hit), never guessed:
    ``{"cause", "evidence", "explanation"}``; None for every other verdict."""
    if report.get("verdict") != "not_reproducible":
        return None
    divergence = (report.get("script") or {}).get("first_divergence_call") or {}
    output = str(divergence.get("output") or "")
    judged = ", ".join(f"{g.get('name')}: {g.get('whole')}" for g in report.get("graphs") or [])
    kinds = {g.get("kind") for g in report.get("graphs") or []}
    if served_from_cache:
        cause = "stale_cache"
    elif output.startswith("gradient of") and report.get("saved_layout"):
        cause = "saved_layout"
    elif output.startswith("gradient of"):
        cause = "backward_together" if "backward" in kinds else "backward_not_reached"
    elif divergence:
        cause = "recapture_matches"
    else:
        cause = "model_level_only"
    where = (f"{divergence.get('graph')} call {divergence.get('graph_call')}: {output or '?'} "
             f"({divergence.get('reason') or '?'})" if divergence else f"model-level check: {report.get('model_level')}")
    if cause == "saved_layout":
        misread = report["saved_layout"][0]
        where += (f"; {misread.get('value')} (saved by {misread.get('op')}) strides {misread.get('eager_strides')} eager, "
                  f"{misread.get('compiled_strides')} compiled, misread by {(misread.get('reader') or {}).get('op')}")
    return {"cause": cause, "evidence": f"{where}; judged alone: {judged or 'no graph'}",
            "explanation": NOT_REPRODUCIBLE_CAUSES[cause]}


def within(item: dict[str, Any]) -> str:
    """Why a listed finding is no divergence: upstream's ``same`` passed the outputs (the gate), or
    they are within the end-to-end tolerance (a model file's program; a script call clearly above
    eager's error: the below-tolerance look)."""
    return ("within torch._dynamo.utils.same's tolerance" if item.get("reason") == "upstream_same"
            else "within the end-to-end tolerance")


def within_upstream_sentences(report: dict[str, Any]) -> list[str]:
    """A sentence per finding the upstream gate listed (``within_upstream``; a script's graphs'
    ``within_upstream``): wrong by the tool's ulp rule alone while the program's outputs pass
    ``torch._dynamo.utils.same`` (or the end-to-end tolerance), so never a divergence (issue 36)."""
    sentences = []
    for item in report.get("within_upstream") or []:
        error = item.get("error") or {}
        own = (f" ({ulps(error.get('compiled_rms_ulps'))} ulps RMS vs eager's {ulps(error.get('eager_rms_ulps'))})"
               if error else "")
        why = within(item)
        sentences.append(f"{item.get('op', '?')} (node {item.get('node', '?')}, graph {item.get('graph', '?')}, "
                         f"{item.get('source') or 'source unknown'}) is wrong on its own{own}, but the program's "
                         f"outputs are {why}: listed, not a divergence.")
    for graph in (report.get("script") or {}).get("graphs") or []:
        for item in graph.get("within_upstream") or []:
            wrong = f" ({', '.join(item['ops'])} wrong on its own)" if item.get("ops") else ""
            why = within(item)
            sentences.append(f"{graph.get('graph', '?')} call {item.get('call', '?')}, {item.get('output', '?')}{wrong}: "
                             f"{ulps(item.get('compiled_rms_ulps'))} ulps RMS (eager {ulps(item.get('eager_rms_ulps'))}), "
                             f"{why}: listed, not a divergence.")
    return sentences
