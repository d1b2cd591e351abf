"""The determinism question's output: ``report.json``'s ``determinism`` key, the summary lines, and
the repro of the op whose runs differ (``determinism/repro.py`` with ``determinism/values.pt``:
runs the op alone twice or more on the recorded inputs, exit 1 when two runs differ, 0 when
every run is equal, 2 when it cannot run here).

The report's functions and the repro's text are pure (same answer, same bytes); writing and the
fresh-interpreter check of the repro are :func:`write_repro` and :func:`run_repro`.
"""
from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.fx as fx

from ..localise.determinism import GraphDeterminism, RunToRun
from ..verdicts import Verdict
from .env_report import op_call_source, output_slot
from .folder import OutputFolder

REPRO_FOLDER = "determinism"
REPRO_RUNS = 5  # the repro's runs: two are compared first, then more until one differs
NONDETERMINISTIC = "nondeterministic"  # the verdict: two identical runs differ (exit 1)


def verdict_of(graphs: list[GraphDeterminism]) -> str:
    """``nondeterministic`` where any graph's runs differ; ``incomplete`` where a graph was not
    checked; else ``clean``."""
    if any(graph.differs for graph in graphs):
        return NONDETERMINISTIC
    if not graphs or any(graph.error for graph in graphs):
        return Verdict.INCOMPLETE.value
    return Verdict.CLEAN.value


def first_finding(graphs: list[GraphDeterminism]) -> tuple[GraphDeterminism, RunToRun] | None:
    return next(((graph, graph.op) for graph in graphs if graph.op is not None), None)


def determinism_key(graphs: list[GraphDeterminism], repro: dict[str, Any] | None, seconds: float) -> dict[str, Any]:
    """``report.json`` ``determinism``: every graph's answer, the first op named, its repro."""
    first = first_finding(graphs)
    return {
        "runs": graphs[0].runs if graphs else 0,
        "graphs": [{"name": g.name, "eager_differs": g.eager_differs, "compiled_differs": g.compiled_differs,
                    "op": _op_json(g.op), "error": g.error or None} for g in graphs],
        "op": None if first is None else {"graph": first[0].name, **(_op_json(first[1]) or {})},
        "side": None if first is None else first[1].side,
        "repro": repro,
        "seconds": round(seconds, 2),
    }


def _op_json(op: RunToRun | None) -> dict[str, Any] | None:
    return None if op is None else {"node": op.node, "op": op.op, "side": op.side, "value": op.value,
                                    "differing_runs": op.differing_runs}


def summary_lines(report: dict[str, Any]) -> list[str]:
    """The lines printed at the end, from the report alone."""
    key = report["determinism"]
    lines = [f"bisect-accuracy: determinism: {report['verdict']} ({len(key['graphs'])} graph(s), "
             f"{key['runs']} runs per side, {key['seconds']:.1f} s)"]
    for graph in key["graphs"]:
        sides = [side for side in ("eager", "compiled") if graph[f"{side}_differs"]]
        state = f"runs differ ({', '.join(sides)})" if sides else ("NOT CHECKED" if graph["error"] else "runs equal")
        lines.append(f"  {graph['name']}: {state}" + (f": {graph['error']}" if graph["error"] else ""))
        if sides and graph["op"] is None and not graph["error"]:
            lines.append("    no op alone changes run to run (the graph's fusion or threading does): not localised")
    judged = {f"{graph['name']}: {graph['error']}" for graph in key["graphs"] if graph["error"]}
    lines += [f"  NOT CHECKED: {item}" for item in report.get("not_checked") or [] if item not in judged]
    if key["op"]:
        op = key["op"]
        lines.append(f"  first op whose runs differ: {op['op']} ({op['node']} in {op['graph']}), {op['side']} side, "
                     f"{op['differing_runs']} of {key['runs'] - 1} later runs differ from the first")
    if key["repro"]:
        lines.append(f"  repro: {key['repro']['path']} (exit {key['repro']['exit_code']} here)")
    return lines


def render_repro(graph: str, op: RunToRun, node: fx.Node, plain_inputs: dict[str, Any], threads: int = 1) -> str:
    """The repro's text (pure: same finding, same bytes); ``threads``: the intra-op threads the
    runs had (a CPU kernel's order of additions can depend on them)."""
    sides = ["eager", "compiled"] if op.side == "both" else [op.side]
    slot = None if op.value == op.node else output_slot(node, op.value)
    return _TEMPLATE.format(op=op.op, side=op.side, graph=graph, node=op.node, sides=sides, slot=slot,
                            op_call=op_call_source(node, plain_inputs), runs=REPRO_RUNS,
                            threads=threads)


def write_repro(folder: OutputFolder, graph: str, op: RunToRun, node: fx.Node, inputs: dict[str, Any]) -> Path:
    """``determinism/repro.py`` and ``determinism/values.pt`` (the op's inputs)."""
    tensors = {name: value.detach().cpu() for name, value in inputs.items() if isinstance(value, torch.Tensor)}
    buffer = io.BytesIO()
    torch.save(tensors, buffer)
    folder.write_bytes(f"{REPRO_FOLDER}/values.pt", buffer.getvalue())
    plain = {name: value for name, value in inputs.items() if not isinstance(value, torch.Tensor)}
    text = render_repro(graph, op, node, plain, torch.get_num_threads())
    return folder.write_text(f"{REPRO_FOLDER}/repro.py", text)


def run_repro(path: Path, timeout_s: float = 600.0) -> dict[str, Any]:
    """The repro in a fresh interpreter: its exit status (None: it ran past ``timeout_s``)."""
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=timeout_s)
        exit_code: int | None = done.returncode
        last = (done.stdout.strip().splitlines() or [""])[-1]
    except subprocess.TimeoutExpired:
        exit_code, last = None, f"ran past {timeout_s:.0f} s"
    return {"path": str(path), "exit_code": exit_code, "output": last, "seconds": round(time.monotonic() - started, 2)}


_TEMPLATE = '''"""Determinism repro: {op} ({side} side) in {graph} ({node}) gives different values on identical runs.

Runs the op alone on the recorded inputs (values.pt beside this file), {runs} times at most on each
side, and compares each run bit for bit with the first: exit 1 when two runs differ, 0 when every
run is equal, 2 when it cannot run here (not an answer).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OP = {op!r}
SIDES = {sides!r}  # "eager": the ATen kernel; "compiled": the op compiled alone by Inductor
SLOT = {slot!r}  # which output of the op (None: its only one)
RUNS = {runs}
THREADS = {threads}  # intra-op threads of the run that found it (CPU kernels may add in thread order)


{op_call}

def caller(torch, side):
    call = op_call(torch)
    return torch.compile(call, backend="inductor", fullgraph=True) if side == "compiled" else call


def run(torch, call, values):
    T = {{name: value.clone() for name, value in values.items()}}  # the op may write its inputs
    torch.manual_seed(0)
    with torch.no_grad():
        result = call(T)
    return result if SLOT is None else result[SLOT]


def equal(torch, a, b):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point() or a.is_complex():
        return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))
    return torch.equal(a, b)


def main():
    try:
        import torch
        torch.set_num_threads(THREADS)
        values = torch.load(os.path.join(HERE, "values.pt"), weights_only=True)
        calls = {{side: caller(torch, side) for side in SIDES}}
        firsts = {{side: run(torch, calls[side], values) for side in SIDES}}
    except Exception as error:  # cannot run here: not an answer
        print(f"cannot run: {{type(error).__name__}}: {{error}}")
        return 2
    for attempt in range(2, RUNS + 1):
        for side in SIDES:
            if not equal(torch, firsts[side], run(torch, calls[side], values)):
                print(f"{{OP}} ({{side}}): run {{attempt}} differs from run 1: NONDETERMINISTIC")
                return 1
    print(f"{{OP}} ({{', '.join(SIDES)}}): {{RUNS}} runs, all equal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''
