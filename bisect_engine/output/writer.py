"""Writing a run's output folder: ``report.json``, the repro and its verification, ``report.html``
and ``bug_report.md``.

Every file goes through :class:`~bisect_engine.output.folder.OutputFolder` (locked, atomic, never
through a link, an earlier run kept in ``previous/<n>``). The report itself is built by
:mod:`~bisect_engine.output.report` (pure) and the repro rendered by
:mod:`~bisect_engine.output.repro` (pure); this module decides what to write, writes it, and runs
the verification; the page and the issue body are rendered from the report
(:mod:`~bisect_engine.output.views`). An interrupt during verification kills its processes and
still writes the report.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import Interrupted
from ..localise.pipeline import RunResult
from ..progress import Progress
from ..localise.repro_inputs import REAL, ReproInputs
from ..verdicts import FINDINGS
from .bug_report import Versions
from .folder import OutputError, OutputFolder
from .integrity import private_repro, sha256
from .report import build_report, finding_repro_spec
from .repro import SIDECAR_NAME, Interpreters, RenderedRepro, render, verify_repro
from .trace import emit_findings, note_trace
from .views import add_view_paths, write_views

DEFAULT_OUT = Path("bisect-accuracy-out")
REPRO_FILE = "repro.py"


@dataclass(frozen=True)
class OutputOptions:
    """Where and how a run writes: the folder (``force``: accept one holding files named like
    ours that we did not write; they are moved aside), the repro's verification runs (0: do not
    verify), and whether the repro draws its inputs at random (only if checked to reproduce)."""

    out_dir: Path = DEFAULT_OUT
    verify_runs: int = 3
    random_inputs: bool = False
    force: bool = False
    trace: bool = False  # --trace: torch's structured trace, our findings in it, kept in OUT/trace/


def write_outputs(result: RunResult, output: OutputOptions, folder: OutputFolder, with_repro: bool = True,
                  progress: Progress | None = None, interpreters: Interpreters | None = None,
                  timeout_s: float | None = None, inputs: ReproInputs = REAL,
                  versions: Versions | None = None) -> dict[str, Any]:
    """``OUT/report.json``, and with ``with_repro`` the verified repro of the finding
    (``timeout_s``: what is left of the run's time for verification; ``inputs``: the repro's
    inputs, decided before output: nothing here compiles; ``versions``: collect_env, maybe
    started during the search, read for a finding and ended otherwise)."""
    with (progress or Progress(enabled=False)).step("report.json: every value's digests and verdicts"):
        report = build_report(result)
    versions = versions or Versions()
    try:
        if report["verdict"] in FINDINGS:
            versions.start()  # seconds: it runs while the repro is written and verified, if not before
        if with_repro and not result.interrupted:
            try:
                _write_repro(result, report, output, folder, progress, interpreters, timeout_s, inputs)
            except OutputError as error:  # a full disk at the end: the verdict still stands
                report["not_written"] = [str(error)]
        if report["verdict"] in FINDINGS:
            report["versions"] = versions.text()
    except Interrupted as interrupt:
        report["verdict"] = "interrupted"
        report["interrupted"] = {"signal": interrupt.name, "signum": interrupt.signum, "stage": "repro"}
        if report.get("repro"):
            report["repro"]["status"] = "INTERRUPTED"
        write_report_and_views(folder, report)
        raise
    finally:
        versions.close()
    return write_report_and_views(folder, report)


def write_report_and_views(folder: OutputFolder, report: dict[str, Any]) -> dict[str, Any]:
    """``report.json``, then ``report.html`` (and ``bug_report.md`` for a finding) rendered from it;
    where torch's structured trace is recorded, the report and its findings go into it too."""
    add_view_paths(report, folder.path)
    note_trace(report)
    try:
        folder.write_report(report)
        emit_findings(report)
        write_views(report, folder)
    except OutputError as error:  # the finished analysis is kept: the CLI prints it and what is missing
        report["not_written"] = [*(report.get("not_written") or []), str(error)]
    return report


def _write_repro(result: RunResult, report: dict[str, Any], output: OutputOptions, folder: OutputFolder,
                 progress: Progress | None, interpreters: Interpreters | None, timeout_s: float | None,
                 inputs: ReproInputs) -> None:
    inputs_note = inputs.note
    spec = finding_repro_spec(result, list(inputs.recipes) if inputs.recipes is not None else None)
    if spec is None:
        return
    rendered = render(spec)
    path = write_repro(rendered, folder)
    digest = sha256(rendered.script.encode())
    report["repro"] = {"path": str(path), "status": "UNVERIFIED", "runs": [], "inputs": inputs_note, "sha256": digest}
    if output.verify_runs > 0:
        started = time.perf_counter()
        sidecar = (SIDECAR_NAME, rendered.sidecar) if rendered.sidecar is not None else None
        with (progress or Progress(enabled=False)).step(f"verifying repro in {output.verify_runs} fresh process(es)"):
            with private_repro(rendered.script, sidecar, REPRO_FILE) as private:  # never the file in OUT
                check = verify_repro(private, output.verify_runs, timeout_s=max(timeout_s or 600.0, 30.0),
                                     interpreters=interpreters)
        report["repro"] = {**check.to_json(), "path": str(path), "inputs": inputs_note, "sha256": digest,
                           "verified": "a private copy of the rendered text, with this sha256"}
        report["stats"]["repro_seconds"] = round(time.perf_counter() - started, 2)


def write_repro(rendered: RenderedRepro, folder: OutputFolder) -> Path:
    path = folder.write_text(REPRO_FILE, rendered.script)
    if rendered.sidecar is not None:
        folder.write_bytes(SIDECAR_NAME, rendered.sidecar)
    return path
