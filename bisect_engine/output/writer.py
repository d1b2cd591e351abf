"""Writing a run's output folder: ``report.json``, the repro and its verification, ``report.html``
and ``bug_report.md``.

The one module of the engine that writes findings to disk (script mode's graph recordings and
rank files aside). It turns a :class:`~bisect_engine.localise.pipeline.RunResult` into the report
(:mod:`~bisect_engine.output.report`, pure), renders and writes the repro
(:mod:`~bisect_engine.output.repro`), verifies it in fresh processes, and renders the page and
the issue body from the report (:mod:`~bisect_engine.output.html`,
:mod:`~bisect_engine.output.bug_report`, pure; written by :mod:`~bisect_engine.output.views`).
"""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..localise.pipeline import RunResult
from ..progress import Progress
from ..verdict.candidate import GraphCandidate
from ..verdict.compare import Outcome
from ..verdict.graphs import reference_inputs
from ..verdict.recipes import input_recipes
from .bug_report import FINDINGS, collect_versions
from .report import build_report, finding_repro_spec, repro_target
from .repro import Interpreters, render, verify_repro, write_repro
from .views import add_view_paths, write_views

DEFAULT_OUT = Path("bisect-accuracy-out")


@dataclass(frozen=True)
class OutputOptions:
    """Where and how a run writes: the folder, the repro's verification runs (0: do not verify),
    and whether the repro draws its inputs at random (only if that was checked to reproduce)."""

    out_dir: Path = DEFAULT_OUT
    verify_runs: int = 3
    random_inputs: bool = False


def write_outputs(result: RunResult, output: OutputOptions, with_repro: bool = True,
                  progress: Progress | None = None, interpreters: Interpreters | None = None) -> dict[str, Any]:
    """``OUT/report.json``, and with ``with_repro`` the verified repro of the finding."""
    out_dir = output.out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    report = build_report(result)
    with ThreadPoolExecutor(max_workers=1) as pool:
        # collect_env takes seconds: it runs while the repro is written and verified
        versions = pool.submit(collect_versions) if report["verdict"] in FINDINGS else None
        _write_repro(result, output, with_repro, report, progress, interpreters)
        if versions is not None:
            report["versions"] = versions.result()
    report["report_path"] = str(out_dir / "report.json")
    add_view_paths(report, out_dir)
    (out_dir / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    write_views(report, out_dir)
    return report


def _write_repro(result: RunResult, output: OutputOptions, with_repro: bool, report: dict[str, Any],
                 progress: Progress | None, interpreters: Interpreters | None) -> None:
    """The repro of the finding (``report["repro"]``), verified in fresh processes."""
    out_dir = output.out_dir
    recipes, inputs_note = checked_recipes(result) if output.random_inputs and with_repro else (None, "real")
    spec = finding_repro_spec(result, recipes) if with_repro else None
    if spec is not None:
        path = write_repro(render(spec), out_dir)
        report["repro"] = {"path": str(path), "status": "UNVERIFIED", "runs": []}
        if output.verify_runs > 0:
            started = time.perf_counter()
            with (progress or Progress(enabled=False)).step(f"verifying repro in {output.verify_runs} fresh process(es)"):
                report["repro"] = verify_repro(path, output.verify_runs, interpreters=interpreters).to_json()
            report["stats"]["repro_seconds"] = round(time.perf_counter() - started, 2)
        report["repro"]["inputs"] = inputs_note


def checked_recipes(result: RunResult) -> tuple[list[dict[str, Any]] | None, str]:
    """Random stand-ins for the repro's inputs, only if the finding still reproduces with them
    (one candidate through the run's search: one compile); else the real inputs, and why."""
    target = repro_target(result)
    if target is None or result.search is None:
        return None, "real"
    graph, names, expect = target
    if expect == "eager_nonfinite":
        return None, "real (a NaN the model makes needs its real inputs)"
    subgraph = graph.context.subgraph(names)
    recipes = input_recipes(reference_inputs(subgraph, graph.context.eager_values))
    verdict = result.search.judge(GraphCandidate(graph.context.name, frozenset(names), inputs="random",
                                                 purpose="random inputs"))
    wanted = Outcome.CRASH if expect == "crash" else Outcome.MISMATCH
    if verdict.outcome is wanted:
        return recipes, "random (checked to reproduce)"
    return None, f"real (random inputs did not reproduce: {verdict.outcome.value})"
