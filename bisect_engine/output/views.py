"""The human views of a report, written beside ``report.json``: ``report.html`` (every run) and
``bug_report.md`` (every finding), rendered from the report alone.

Torch-free, so ``bisect-accuracy report OUT`` re-renders a folder in a fraction of a second.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from ..errors import UsageError
from ..verdicts import FINDINGS
from .bug_report import collect_versions, is_input_problem, render_bug_report
from .folder import OutputFolder
from .html import render_html
from .integrity import mark_edited, repro_edited

REPORT_NAME, HTML_NAME, BUG_REPORT_NAME, REPRO_NAME = "report.json", "report.html", "bug_report.md", "repro.py"


def bug_report_here(report: dict[str, Any]) -> bool:
    """A finding of this folder's own (never an input problem; a top-level report whose verdict
    comes from another process points at that process's folder, which holds the bug report)."""
    return (report.get("verdict") in FINDINGS and not is_input_problem(report)
            and report.get("verdict_from") != "processes")


def add_view_paths(report: dict[str, Any], out_dir: Path) -> None:
    """``html_path`` and, for a finding, ``bug_report_path``: where :func:`write_views` writes."""
    report["html_path"] = str(out_dir / HTML_NAME)
    if bug_report_here(report):
        report["bug_report_path"] = str(out_dir / BUG_REPORT_NAME)
    else:
        report.pop("bug_report_path", None)


def write_views(report: dict[str, Any], folder: OutputFolder,
                versions: Callable[[], str] | None = None) -> list[Path]:
    """``OUT/report.html`` always, ``OUT/bug_report.md`` for a finding; the paths written.

    The bug report's ``Versions`` are the report's own (collected by the run), else
    ``versions()`` when given, else a note that they were not collected.
    """
    repro_text = read_repro(report, folder.path)
    bug_report = None
    if bug_report_here(report):
        collected = report.get("versions") or (versions() if versions else "(not collected)")
        bug_report = render_bug_report(report, collected, repro_text)
    written = []
    if bug_report is not None:
        written.append(folder.write_text(BUG_REPORT_NAME, bug_report))
    else:
        folder.remove(BUG_REPORT_NAME)  # a re-render of a report that is no finding any more
    written.insert(0, folder.write_text(HTML_NAME, render_html(report, repro_text, bug_report)))
    return written


def read_repro(report: dict[str, Any], out_dir: Path) -> str | None:
    """The repro script of ``report``: in ``out_dir`` (a folder moved as a whole), else at its path."""
    recorded = (report.get("repro") or {}).get("path")
    if not recorded:
        return None
    for path in (out_dir / REPRO_NAME, Path(recorded)):
        try:
            return path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
    return None


def load_report(out_dir: Path) -> dict[str, Any]:
    """``OUT/report.json``, checked to be a report; a :class:`UsageError` saying what is wrong."""
    if not out_dir.is_dir():
        raise UsageError(f"no such output folder: {out_dir}")
    path = out_dir / REPORT_NAME
    if not path.is_file():
        raise UsageError(f"{path} does not exist: run `bisect-accuracy run MODEL.py --out {out_dir}` first")
    try:
        report = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"{path} is not a readable JSON report: {error}") from error
    if not isinstance(report, dict) or "verdict" not in report or "graphs" not in report:
        raise UsageError(f"{path} is not a bisect-accuracy report (no verdict and graphs)")
    return report


def rerender(out_dir: Path) -> list[Path]:
    """``bisect-accuracy report OUT``: the views again, from ``OUT/report.json`` (left unchanged),
    written under the folder's lock without setting the run aside."""
    report = load_report(out_dir)
    if repro_edited(report, out_dir):
        mark_edited(report)  # report.json stays as the run wrote it; the views say what changed
    add_view_paths(report, out_dir)
    with OutputFolder(out_dir, reuse=True) as folder:
        return write_views(report, folder, versions=lambda: "(collected when re-rendering, not by the run)\n"
                           + collect_versions())
