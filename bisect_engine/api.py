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
from .repro import render, verify_repro, write_repro
from .report import build_report, finding_repro_spec

log = logging.getLogger(__name__)


def bisect_file(model_path: str | Path, out_dir: str | Path, options: Options = Options(),
                progress: Progress | None = None, verify_runs: int = 3) -> dict[str, Any]:
    """Run the whole pipeline on a model file; write ``OUT/report.json`` and the repro."""
    if options.started_at is None:
        options = dataclasses.replace(options, started_at=time.perf_counter())
    spec = load_model_spec(model_path)
    progress = progress or Progress(enabled=False)
    try:
        result = run_scanned(spec, options, progress) if spec.get_batches else run(spec, options, progress)
        return write_outputs(result, Path(out_dir), verify_runs, progress)
    finally:
        progress.close()


def write_outputs(result: RunResult, out_dir: Path, verify_runs: int = 3,
                  progress: Progress | None = None) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    report = build_report(result)
    spec = finding_repro_spec(result) if verify_runs >= 0 else None  # -1: stage stops before the repro
    if spec is not None:
        path = write_repro(render(spec), out_dir)
        report["repro"] = {"path": str(path), "status": "UNVERIFIED", "runs": []}
        if verify_runs > 0:
            started = time.perf_counter()
            with (progress or Progress(enabled=False)).step(f"verifying repro in {verify_runs} fresh process(es)"):
                report["repro"] = verify_repro(path, verify_runs).to_json()
            report["stats"]["repro_seconds"] = round(time.perf_counter() - started, 2)
    report["report_path"] = str(out_dir / "report.json")
    (out_dir / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    return report
