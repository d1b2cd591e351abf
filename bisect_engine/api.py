"""The public API: one call from a model file to a report on disk.

Side effects live here and nowhere deeper: creating the output folder, writing ``report.json``
(and the repro). Everything it calls returns values.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import time
from pathlib import Path
from typing import Any

from .model_file import load_model_spec
from .pipeline import Options, RunResult, run
from .scan_flow import run_scanned
from .progress import Progress
from .compare import Outcome
from .graphs import reference_inputs
from .repro import Interpreters, input_recipes, render, verify_repro, write_repro
from .repro_runtime import random_inputs
from .report import build_report, finding_repro_spec, repro_target

log = logging.getLogger(__name__)


def bisect_file(model_path: str | Path, out_dir: str | Path, options: Options = Options(),
                progress: Progress | None = None, verify_runs: int = 3, device: str | None = None) -> dict[str, Any]:
    """Run the whole pipeline on a model file; write ``OUT/report.json`` and the repro.

    ``device``: run the model there (its parameters, inputs and batches moved), e.g. ``"cuda"``.
    """
    if options.started_at is None:
        options = dataclasses.replace(options, started_at=time.perf_counter())
    spec = load_model_spec(model_path, device)
    progress = progress or Progress(enabled=False)
    # The repro's fresh interpreters start once a graph diverges, so their imports overlap the search.
    interpreters = Interpreters(verify_runs, Path(out_dir))
    if options.on_divergence is None:
        options = dataclasses.replace(options, on_divergence=interpreters.start)
    try:
        result = run_scanned(spec, options, progress) if spec.get_batches else run(spec, options, progress)
        return write_outputs(result, Path(out_dir), verify_runs, progress, options.random_inputs, interpreters)
    finally:
        interpreters.close()
        progress.close()


def write_outputs(result: RunResult, out_dir: Path, verify_runs: int = 3,
                  progress: Progress | None = None, random_inputs: bool = False,
                  interpreters: Interpreters | None = None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    report = build_report(result)
    recipes, inputs_note = checked_recipes(result) if random_inputs and verify_runs >= 0 else (None, "real")
    spec = finding_repro_spec(result, recipes) if verify_runs >= 0 else None  # -1: stage stops before the repro
    if spec is not None:
        path = write_repro(render(spec), out_dir)
        report["repro"] = {"path": str(path), "status": "UNVERIFIED", "runs": []}
        if verify_runs > 0:
            started = time.perf_counter()
            with (progress or Progress(enabled=False)).step(f"verifying repro in {verify_runs} fresh process(es)"):
                report["repro"] = verify_repro(path, verify_runs, interpreters=interpreters).to_json()
            report["stats"]["repro_seconds"] = round(time.perf_counter() - started, 2)
        report["repro"]["inputs"] = inputs_note
    report["report_path"] = str(out_dir / "report.json")
    (out_dir / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    return report


def checked_recipes(result: RunResult) -> tuple[list[dict[str, Any]] | None, str]:
    """Random stand-ins for the repro's inputs, only if the finding still reproduces with them
    (checked here, in process, with one compile); else the real inputs, and why."""
    target = repro_target(result)
    if target is None:
        return None, "real"
    graph, names, expect = target
    if expect == "eager_nonfinite":
        return None, "real (a NaN the model makes needs its real inputs)"
    subgraph = graph.context.subgraph(names)
    recipes = input_recipes(reference_inputs(subgraph, graph.context.eager_values))
    verdict = graph.context.judge(subgraph, result.compiler, label="random-inputs",
                                  inputs=random_inputs(recipes, graph.context.seed))
    wanted = Outcome.CRASH if expect == "crash" else Outcome.MISMATCH
    if verdict.outcome is wanted:
        return recipes, "random (checked to reproduce)"
    return None, f"real (random inputs did not reproduce: {verdict.outcome.value})"
