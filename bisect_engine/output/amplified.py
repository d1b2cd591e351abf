"""Pure: the report's words for an amplified divergence and for "closer to fp64" differences.

``describe(node)`` is the report's own node description (op, source line, module), passed in so
this module needs nothing from :mod:`bisect_engine.output.report`.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

from ..strategies.amplify import Amplification
from ..verdict.oracle import GraphContext
from .repro import ReproSpec, repro_spec, serialise_inputs

Describe = Callable[[str], dict[str, Any]]

WHY = {
    "quantises": "turns a float difference into a different integer or boolean",
    "nonfinite": "turns a finite difference into NaN/Inf",
    "jump": "multiplies the relative difference by orders of magnitude",
}


def _number(value: float) -> float | str:
    return float(f"{value:.4g}") if math.isfinite(value) else str(value)


def amplification_json(amplification: Amplification, describe: Describe) -> dict[str, Any]:
    """``culprit`` keys of an amplified finding: the op's own tiny error, the amplifiers on the
    path to the output (each with its source line), the output difference and the replays used."""
    amplifiers = [{**describe(a.node), "why": a.why, "explains": WHY[a.why], "change": _number(a.change),
                   "inputs_change": _number(a.inputs_change)} for a in amplification.amplifiers]
    return {
        "own_error": {"ulps_vs_eager": _number(amplification.own_ulps), **amplification.own.to_json()},
        "amplifiers": amplifiers,
        "amplifier": amplifiers[0]["op"] if amplifiers else None,
        "together": list(amplification.together),
        "output_difference": {"output": amplification.output, **amplification.output_difference.to_json()},
        "path": list(amplification.path),
        "replays": amplification.replays,
    }


def amplification_lines(culprit: dict[str, Any]) -> list[str]:
    """Summary lines for an amplified culprit."""
    own = culprit["own_error"]
    lines = [f"  own:     {own['ulps_vs_eager']} ulps from eager at most ({own['elements']} of {own['total']} elements"
             f" differ), within every per-op tolerance"]
    for amplifier in culprit["amplifiers"]:
        lines.append(f"  amplified by: {amplifier['op']} (node {amplifier['node']}, {amplifier['source'] or '?'}):"
                     f" {amplifier['explains']}")
    output = culprit["output_difference"]
    lines.append(f"  output:  {output['output']} differs materially ({output['elements']} of {output['total']}"
                 f" elements, max |diff| {output['max_abs_diff']}); eager replays: {culprit['replays']}, no extra compile")
    return lines


def differences_lines(differences: list[dict[str, Any]]) -> list[str]:
    """One summary line per "compiled differs from eager but is closer to fp64" difference."""
    lines = []
    for entry in differences:
        setting = entry.get("setting")
        if entry.get("cast_elided"):
            lines.append(_cast_elided_line(entry, setting))
            continue
        fix = ("" if not setting else f"; {setting['name']}={setting['value']!r} makes compiled follow eager (checked)"
               if setting.get("follows_eager") else f"; {setting['name']}={setting['value']!r} checked: compiled still differs")
        # counted by element (a mask, an index, or a saved float not closer by the ulp rule): what
        # is true of each, never "an exact value" of a float (pytorch#186799's saved atan2)
        measure = (f" {entry['elements']} element(s) differ from eager; against fp64 rounded to its dtype, compiled is"
                   f" off in {entry['compiled_wrong']} element(s), eager in {entry['eager_wrong']}"
                   if entry.get("exact") else
                   f" {entry['difference_max_ulps']} ulps from eager, fp64 error {entry['compiled_rms_ulps']}"
                   f" vs eager's {entry['eager_rms_ulps']} ulps RMS")
        lines.append(f"  differs (closer to fp64): {entry['op']} (node {entry['node']}, {entry['source'] or '?'}):"
                     f"{measure}{fix}")
        backward = entry.get("backward")
        if backward:
            amplified = ", ".join(f"{a['op']} (node {a['node']}, {a['source'] or '?'})" for a in backward["amplifiers"])
            of = f" (of {backward['gradient_of']})" if backward.get("gradient_of") else ""
            lines.append(f"    and in {backward['graph']}: gradient {backward['output']}{of} differs materially"
                         f" ({backward['elements']} of {backward['total']} elements, max |diff| {backward['max_abs_diff']})"
                         + (f", flipped by {amplified}" if amplified else "") + "; one eager replay, no compile")
    return lines


def _cast_elided_line(entry: dict[str, Any], setting: dict[str, Any] | None) -> str:
    """A cast to a narrower float whose rounding the compiled code skipped (a round trip, or a value
    read wide again; intended by Inductor unless ``emulate_precision_casts``)."""
    cast = entry["cast_elided"]
    checked = ("" if not setting else f"; {setting['name']}={setting['value']!r} makes compiled follow eager (checked)"
               if setting.get("follows_eager") else f"; {setting['name']}={setting['value']!r} checked: compiled still differs")
    together = f" (with {', '.join(cast['together'])})" if cast.get("together") else ""
    return (f"  cast elided: compiled skips the {cast['dtype']} rounding of the cast at {entry['op']} (node "
            f"{entry['node']}{together}, {entry['source'] or '?'}), keeping the value unrounded; eager replayed "
            f"without it gives compiled's outputs{checked}")


def amplified_repro_spec(context: GraphContext, amplification: Amplification, describe: Describe, *,
                         config: dict[str, Any], unrenderable_config: list[str], environment: dict[str, str],
                         finding: list[tuple[str, str]], notes: list[str]) -> ReproSpec | None:
    """The repro of an amplified finding: the culprit op compiled alone, and the amplifying path
    (culprit to output, everything else eager) run on its compiled and its eager output; it
    reproduces when the outputs then differ materially. None when there is no path to embed."""
    downstream_nodes = [n for n in amplification.path if n != amplification.culprit]
    if not downstream_nodes:
        return None
    culprit = context.subgraph([amplification.culprit])
    downstream = context.subgraph(downstream_nodes)
    names = tuple(dict.fromkeys([*culprit.input_names,
                                 *(n for n in downstream.input_names if n not in culprit.output_names)]))
    values = {name: context.eager_values[name] for name in names}
    op = describe(amplification.culprit)
    amplifiers = [describe(a.node) for a in amplification.amplifiers]
    amplified_by = ", ".join(f"{a['op']} ({a['source'] or '?'})" for a in amplifiers) or "the path below"
    spec = repro_spec(
        culprit, values, config=config, unrenderable_config=unrenderable_config, environment=environment,
        title=f"{op['op']}: a tiny compiled difference that {amplifiers[0]['op'] if amplifiers else 'the model'}"
              " amplifies into materially different outputs",
        finding=[*finding, ("differs", f"{op['op']} ({op['source'] or '?'}), "
                                       f"{_number(amplification.own_ulps)} ulps from eager at most"),
                 ("amplified by", amplified_by),
                 ("output", f"{amplification.output} differs materially")],
        notes=notes, expect="amplified", seed=context.seed,
    )
    return dataclasses.replace(
        spec, input_names=names, inputs_blob=serialise_inputs([values[n] for n in names]),
        downstream_code=downstream.graph_module.code.strip(), downstream_input_names=downstream.input_names,
        downstream_output_names=downstream.output_names, culprit_input_names=culprit.input_names,
    )
