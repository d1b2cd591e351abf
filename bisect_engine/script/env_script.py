"""``bisect-accuracy record SCRIPT`` / ``compare A`` of a plain script: the environment bundle of
the graphs a program compiles.

The script runs once, unmodified, as ``python SCRIPT ARGS`` would run it, under script mode's
session at level 1 (:mod:`bisect_engine.script.session`): its compiles go through the checking
backend, and the first call of each Dynamo graph compiled by Inductor is captured as its forward
aten graph with that call's real inputs (:func:`~bisect_engine.load.capture.capture_graph_module`,
as the session's localisation captures it), instead of being written to ``OUT/graphs``. Once the
script has ended, the graphs are recorded (:func:`~bisect_engine.localise.env_record.record_graphs`:
every op alone, eager, fp64 and compiled, under the ``mode=`` / ``options=`` the script compiled it
with) or compared with a bundle (:func:`~bisect_engine.localise.environments.compare_graphs`).
Graph ``forward_N`` is the N-th Dynamo graph the script compiled, in both environments.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..errors import UsageError
from ..load.bundle import file_sha256
from ..verdict.fx_eval import clone_value
from ..verdict.graphs import CapturedGraph
from .levels import Level, ScriptSettings
from .runner import _run_as_main, _session_from_dynamo_import
from .session import ActiveSession, GraphRecord, start_session

NOT_INDUCTOR = "compiled by {backend}, not Inductor: the bundle's compiled side is Inductor's"


@dataclass
class ScriptGraphs:
    """The forward aten graphs a script's run compiled, with the Inductor options of each."""

    captured: list[CapturedGraph] = field(default_factory=list)
    patches: dict[str, dict[str, Any]] = field(default_factory=dict)  # graph name -> the script's options
    not_recorded: list[str] = field(default_factory=list)  # "graph_1: why"
    compiled: int = 0  # Dynamo graphs the script compiled

    def add(self, record: GraphRecord, args: Sequence[Any]) -> None:
        """The session's level-1 callback: the first call of ``record``'s graph, captured."""
        from torch._inductor import config as inductor_config

        from ..load.capture import capture_graph_module

        if record.inductor_options is None:
            self.not_recorded.append(f"{record.name}: {NOT_INDUCTOR.format(backend=record.backend)}")
            return
        with inductor_config.patch(record.inductor_options):
            graphs = capture_graph_module(record.graph_module, clone_value(list(args)), record.compile_id)
        forwards = [graph for graph in graphs if graph.kind == "forward"]
        for k, graph in enumerate(forwards):
            name = f"forward_{record.index}" + (f"_{k}" if k else "")
            # inputs copied now: the program may later update what they alias (its parameters)
            self.captured.append(dataclasses.replace(graph, name=name, index=record.index,
                                                     inputs=clone_value(list(graph.inputs))))
            self.patches[name] = dict(record.inductor_options)


@dataclass(frozen=True)
class ScriptRun:
    graphs: ScriptGraphs
    exit_code: int
    message: str | None  # the script's traceback or SystemExit message


def run_capturing(script: Path, argv: Sequence[str], failure_allowed: bool = False) -> ScriptGraphs:
    """Run the script once with every compiled graph's first call captured; a script that fails
    (unless ``failure_allowed`` and it compiled a graph first: ``compare``, where a failure may be
    the very change), is interrupted or compiles nothing Inductor compiles is a :class:`UsageError`
    (one line)."""
    run = _run_once(script, argv)
    graphs = run.graphs
    failed = f"the script {script.name} failed (exit {run.exit_code}{_last_line(run.message)})"
    if run.exit_code != 0 and not (failure_allowed and graphs.captured):
        raise UsageError(f"{failed}; it must run to its end in this environment")
    if run.exit_code != 0:
        graphs.not_recorded.append(f"{failed}: only the graphs it compiled until then are compared")
    if graphs.compiled == 0:
        raise UsageError(f"the script {script.name} compiled nothing (no torch.compile, nn.Module.compile or "
                         "torch._dynamo.optimize call ran): nothing to record or compare")
    if not graphs.captured:
        raise UsageError(f"no graph of {script.name} could be captured: " + "; ".join(graphs.not_recorded))
    return graphs


def _run_once(script: Path, argv: Sequence[str]) -> ScriptRun:
    settings = ScriptSettings(level=Level.RECORD, out_dir=Path(os.devnull))  # never opened: nothing goes to OUT
    graphs = ScriptGraphs()
    active: list[ActiveSession] = []
    failures: list[str] = []

    def start(_module: Any) -> None:
        try:
            started = start_session(settings, script.resolve(), argv, "cli")
            started.session.on_record = graphs.add
            active.append(started)
        except Exception as error:  # noqa: BLE001 - said below, never raised into the script's import
            failures.append(f"{type(error).__name__}: {error}")

    with _session_from_dynamo_import(start):
        try:
            exit_code, message, _stopped, interrupted = _run_as_main(script, argv)
        finally:
            for started in active:
                started.close()
    if failures:
        raise UsageError(f"harness: script mode's session did not start ({failures[0]})")
    if interrupted:
        raise UsageError(f"the script {script.name} was interrupted ({interrupted})")
    for record in active[0].session.graphs if active else []:
        graphs.compiled += 1
        if record.outcome == "error" and record.detail:
            graphs.not_recorded.append(f"{record.name}: harness: capture failed ({record.detail.get('error')})")
    return ScriptRun(graphs, exit_code, message)


def _last_line(message: str | None) -> str:
    lines = [line for line in (message or "").strip().splitlines() if line.strip()]
    return f": {lines[-1].strip()[:200]}" if lines else ""


def script_model(script: Path, argv: Sequence[str]) -> dict[str, Any]:
    """The manifest's ``model`` entry of a script bundle: what ``compare`` runs again."""
    return {"path": str(script.resolve()), "name": script.name, "sha256": file_sha256(script), "kind": "script",
            "argv": list(argv), "cwd": os.getcwd()}


def record_script(script: Path, argv: Sequence[str], write: Any, value_cap: int) -> dict[str, Any]:
    """``record SCRIPT``: run it once, then write the bundle of the graphs it compiled."""
    from ..localise.env_record import record_graphs

    graphs = run_capturing(script, argv)
    settings = {"script_compile_options": {name: _plain(options) for name, options in graphs.patches.items()},
                "graphs_not_recorded": graphs.not_recorded}
    return record_graphs(graphs.captured, [], write, script_model(script, argv), settings, value_cap,
                         device=script_device(), patches=graphs.patches)


def compare_script(bundle: Any, script: Path) -> tuple[Any, list[dict[str, Any]], list[str]]:
    """``compare A`` of a script bundle: run the script once here (its recorded arguments), then
    judge each recorded graph's ops; also the lines on graphs not captured here."""
    from ..localise.environments import compare_graphs

    graphs = run_capturing(script, bundle.manifest["model"].get("argv", []), failure_allowed=True)
    comparison, repros = compare_graphs(bundle, graphs.captured, [], device=script_device(), patches=graphs.patches)
    return comparison, repros, [f"here: {line}" for line in graphs.not_recorded]


def script_device() -> str:
    """Where the script ran: CUDA when it used it (the environment facts then name the device)."""
    import torch

    return "cuda" if torch.cuda.is_available() and torch.cuda.is_initialized() else "cpu"


def _plain(options: dict[str, Any]) -> dict[str, Any]:
    return {k: v if isinstance(v, (bool, int, float, str, type(None))) else repr(v) for k, v in options.items()}

