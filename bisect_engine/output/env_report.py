"""What ``bisect-accuracy compare`` prints and writes: the summary lines, ``comparison.json`` and,
per op that changed, a commit-bisection repro (``bisect/GRAPH_NODE/bisect_repro.py`` with its
values in ``bisect_values.pt`` beside it; exit 1 where the op behaves as in this environment, 0 as recorded, 125
when it cannot run: the ``git bisect run`` convention)."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any, cast

import torch
import torch.fx as fx

from ..load.bundle import Bundle
from ..localise.environments import Comparison, OpChange
from .folder import OutputError, OutputFolder
from ..verdict.compare import Tolerance, rounding_unit

REPRO, REPRO_VALUES = "bisect_repro.py", "bisect_values.pt"


def summary_lines(comparison: Comparison) -> list[str]:
    lines = [f"environment: {line}" for line in comparison.environment] or ["environment: no fact differs"]
    lines += [f"graph {name}: recorded, not captured here" for name in comparison.missing_graphs]
    lines += [f"graph {name}: captured here, not recorded" for name in comparison.new_graphs]
    for graph in comparison.graphs:
        head = f"graph {graph.name}: {graph.aligned} of {graph.recorded_nodes} recorded ops aligned ({graph.current_nodes} here)"
        lines.append(head)
        lines += [f"  graph changed: {line}" for line in graph.structure]
        for change in graph.changes:
            lines.append(f"  {change.op} ({change.node}): {change.side} result changed, {_direction(change)} "
                         f"({change.drift.distance_rms_ulps:.3g} ulps rms from recorded; error vs fp64 "
                         f"{change.drift.recorded_error_ulps:.3g} -> {change.drift.new_error_ulps:.3g} ulps)"
                         + (" [compiled moved with it]" if change.also_compiled else "") + _versus_eager(change))
        if graph.not_checked:
            lines.append(f"  not checked: {len(graph.not_checked)} op(s), e.g. {graph.not_checked[0]}")
        if graph.compile_error:
            lines.append(f"  compiled side not checked: {graph.compile_error.splitlines()[0][:160]}")
    first = comparison.changes[0] if comparison.changes else None
    if first is not None:
        lines.append(f"first change: {first.op} in {first.graph} ({first.side} side: "
                     f"{'an ATen kernel' if first.side == 'eager' else 'Inductor / Triton'}), {_direction(first)}"
                     + _versus_eager(first))
    elif not comparison.changed:
        lines.append("no change: every recorded op computes as recorded, within its own noise")
    return lines


def _versus_eager(change: OpChange) -> str:
    """"; compiled now equals eager (toward eager: 38.2 -> 0.4 ulps)" and the like."""
    gap = change.eager_gap
    if gap is None:
        return ""
    said = "compiled now equals eager within noise" if gap.matches_eager else "compiled differs from eager"
    moved = f"{gap.toward} eager" if gap.toward else "gap to eager unchanged"
    return f"; {said} ({moved}: {gap.recorded_gap_ulps:.3g} -> {gap.new_gap_ulps:.3g} ulps rms)"


def _direction(change: OpChange) -> str:
    return {"farther": "farther from fp64 (regression)", "closer": "closer to fp64 (improvement)"}.get(
        change.drift.direction, "changed")


def check_out_dir(out_dir: Path, bundle: Bundle) -> None:
    """``compare --out`` is never the bundle's own folder (its files would be set aside)."""
    if out_dir.resolve() == bundle.path.resolve():
        raise OutputError(f"--out {out_dir} is the bundle being compared; choose another folder")


def write_comparison(folder: OutputFolder, comparison: Comparison, repros: list[dict[str, Any]],
                     bundle: Bundle) -> list[Path]:
    body = {"changed": comparison.changed, "environment": list(comparison.environment),
            "missing_graphs": list(comparison.missing_graphs), "new_graphs": list(comparison.new_graphs),
            "graphs": [g.to_json() for g in comparison.graphs], "model_output_change": comparison.model_output_change,
            "compiles": comparison.compiles, "bundle": str(bundle.path)}
    written = [folder.write_json("comparison.json", body)]
    for repro in repros:
        change: OpChange = repro["change"]
        written += write_repro(folder, f"bisect/{change.graph}_{change.node}", repro, bundle)
    return written


def write_repro(folder: OutputFolder, where: str, repro: dict[str, Any], bundle: Bundle) -> list[Path]:
    """One changed op's repro folder: ``bisect_repro.py`` and ``bisect_values.pt``."""
    change: OpChange = repro["change"]
    key = f"{change.graph}/{_recorded_value(change)}"
    values = {f"input/{name}": value.detach().cpu() for name, value in repro["inputs"].items() if isinstance(value, torch.Tensor)}
    values["recorded"] = bundle.values[f"{key}/{change.side}"]
    buffer = io.BytesIO()
    torch.save(values, buffer)
    text = render_repro(change, repro["node"], {k: v for k, v in repro["inputs"].items() if not isinstance(v, torch.Tensor)},
                        values["recorded"].dtype, bundle.environment.get("torch", "?"))
    return [folder.write_bytes(f"{where}/{REPRO_VALUES}", buffer.getvalue()),
            folder.write_text(f"{where}/{REPRO}", text)]


def _recorded_value(change: OpChange) -> str:
    return change.value if change.node == change.recorded_node else change.value.replace(change.node, change.recorded_node, 1)


def render_repro(change: OpChange, node: fx.Node, plain_inputs: dict[str, Any], dtype: torch.dtype,
                 recorded_torch: str, tolerance: Tolerance = Tolerance()) -> str:
    """The repro's text (pure: same change, same bytes)."""
    slot = None if change.value == change.node else output_slot(node, change.value)
    limit_rms, limit_max = change.drift.limits(tolerance)
    return _TEMPLATE.format(op=change.op, side=change.side, graph=change.graph, node=change.node,
                            recorded_torch=recorded_torch, op_call=op_call_source(node, plain_inputs), slot=slot,
                            unit=repr(rounding_unit(dtype)), tiny=repr(torch.finfo(dtype).tiny),
                            limit_rms=repr(limit_rms), limit_max=repr(limit_max), values=REPRO_VALUES)


def output_slot(node: fx.Node, value_name: str) -> int | None:
    """Which output of a multi-output ``node`` the value ``value_name`` is (its ``getitem``
    index), or None where no user of ``node`` is named so."""
    for user in node.users:
        if user.name == value_name:
            return int(cast(int, user.args[1]))
    return None


# The generated repros' shared text (this module's and ``output/determinism.py``'s): the op called on
# ``T``, its recorded inputs by name, looked up from ``OP`` as ``torch.ops`` spells it. A generated
# script cannot import the tool, so this is text, filled by ``op_call_source``.
OP_CALL_SOURCE = '''def arguments(T):
    return {args}, {kwargs}


def op_call(torch):
    op = torch.ops
    for part in OP.split("."):
        op = getattr(op, part)
    return lambda T: op(*arguments(T)[0], **arguments(T)[1])
'''


def op_call_source(node: fx.Node, plain_inputs: dict[str, Any]) -> str:
    """``OP_CALL_SOURCE`` for ``node``'s arguments (plain inputs by value, tensors as ``T[name]``)."""
    return OP_CALL_SOURCE.format(args=render_argument(node.args, plain_inputs),
                                 kwargs=render_argument(dict(node.kwargs), plain_inputs))


def render_argument(arg: Any, plain_inputs: dict[str, Any]) -> str:
    """A node's argument as repro source: a plain input by its value, a tensor as ``T[name]``,
    containers element by element."""
    if isinstance(arg, fx.Node):
        return repr(plain_inputs[arg.name]) if arg.name in plain_inputs else f"T[{arg.name!r}]"
    if isinstance(arg, tuple):
        return "(" + "".join(render_argument(a, plain_inputs) + ", " for a in arg) + ")"
    if isinstance(arg, list):
        return "[" + ", ".join(render_argument(a, plain_inputs) for a in arg) + "]"
    if isinstance(arg, dict):
        return "{" + ", ".join(f"{k!r}: {render_argument(v, plain_inputs)}" for k, v in arg.items()) + "}"
    if isinstance(arg, torch.device):
        return f"torch.device({str(arg)!r})"
    if isinstance(arg, float) and arg != arg or arg in (float("inf"), float("-inf")):
        return f"float({str(arg)!r})"
    return repr(arg)


_TEMPLATE = '''"""Commit-bisection repro: {op} ({side} side) in {graph} ({node}) changed from torch {recorded_torch}.

Runs the op alone on the recorded inputs and compares with the result recorded under torch
{recorded_torch}: exit 1 when it moved beyond the op's own noise (behaves as in the new
environment), 0 when it computes as recorded, 125 when it cannot run (git bisect run: skip).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OP = {op!r}
SIDE = {side!r}  # "eager": the ATen kernel; "compiled": the op compiled alone by Inductor
SLOT = {slot!r}  # which output of the op (None: its only one)
UNIT, TINY = {unit}, {tiny}  # the dtype's unit roundoff, its smallest normal
LIMIT_RMS, LIMIT_MAX = {limit_rms}, {limit_max}  # ulps: the op's own noise (2 x its error vs fp64 + floors)


{op_call}

def run(torch, T):
    call = op_call(torch)
    if SIDE == "compiled":
        call = torch.compile(call, backend="inductor", fullgraph=True)
    result = call(T)
    return result if SLOT is None else result[SLOT]


def distance(torch, result, recorded):
    """rms and max |result - recorded| in ulps at the tensor's scale; and whether finiteness differs."""
    if result.shape != recorded.shape or result.dtype != recorded.dtype:
        return float("inf"), float("inf"), True
    if not recorded.is_floating_point():
        same = torch.equal(result, recorded)
        return 0.0 if same else float("inf"), 0.0 if same else float("inf"), not same
    a, b = result.double(), recorded.double()
    finite = torch.isfinite(a) & torch.isfinite(b)
    if bool((torch.isfinite(a) != torch.isfinite(b)).any()):
        return float("inf"), float("inf"), True
    if not bool(finite.any()):
        return 0.0, 0.0, False
    scale = max(float(b[finite].square().mean().sqrt()), float(a[finite].square().mean().sqrt()))
    error = (a[finite] - b[finite]).abs() / (UNIT * max(scale, TINY))
    return float(error.square().mean().sqrt()), float(error.max()), False


def main():
    try:
        import torch
        values = torch.load(os.path.join(HERE, {values!r}), weights_only=True)
        T = {{name[len("input/"):]: value for name, value in values.items() if name.startswith("input/")}}
        result = run(torch, T)
    except Exception as error:  # cannot run here: not a verdict
        print(f"cannot run: {{type(error).__name__}}: {{error}}")
        return 125
    rms, largest, nonfinite = distance(torch, result.detach().cpu(), values["recorded"])
    moved = nonfinite or rms > LIMIT_RMS or largest > LIMIT_MAX
    print(f"{{OP}} ({{SIDE}}): {{rms:.3g}} ulps rms, {{largest:.3g}} max from the recorded result "
          f"(noise limits {{LIMIT_RMS:.3g}}, {{LIMIT_MAX:.3g}}): {{'CHANGED' if moved else 'as recorded'}}")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
'''
