"""The real-reports corpus (issue 37): scripts from pytorch's issue tracker, each kept as its
reporter wrote it (``tests/real_reports/issue_<number>_<slug>.py``), run unmodified through
``bisect-accuracy run script.py``.

Each file opens with a docstring (the issue's URL, the thread's conclusion, a check on torch 2.13.0
CPU against an fp64 reference) and one literal ``REAL_REPORT`` header: the class read by hand from
the thread, the verdict a compiler engineer would accept and the op it must name. The end-to-end
runs (one CLI process each, a fresh Inductor cache, a fresh working folder) are slow and run only
under ``BISECT_CORPUS=all``; a case the tool does not name yet carries ``known_miss`` and is a
strict xfail. ``make test`` keeps the fast check that every header parses and is consistent.
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import Job, background_result, parse_python

from bisect_engine.verdicts import Verdict

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "tests" / "real_reports"
CASES = sorted(FOLDER.glob("issue_*.py"))
CORPUS = os.environ.get("BISECT_CORPUS", "ci")

# A real compiler bug (or a native crash) must name its op; every "not a bug" class is clean.
BUG_CLASSES = {"real_bug", "crash"}
CLEAN_CLASSES = {"cast_elision", "more_accurate", "noise", "nondeterministic", "clean_control", "not_on_2_13"}
HEADER_KEYS = {"issue", "class", "verdict", "op", "cli_args", "known_miss"}
ISSUE_URL = re.compile(r"https://github\.com/pytorch/pytorch/issues/(\d+)")


def header(path: Path) -> dict[str, Any]:
    """The case's ``REAL_REPORT`` literal: the first statement after the module docstring."""
    body = parse_python(path.read_text()).body
    assert len(body) >= 2 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant), \
        f"{path.name}: no module docstring"
    node = body[1]
    assert isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["REAL_REPORT"], \
        f"{path.name}: REAL_REPORT must follow the docstring"
    value = ast.literal_eval(node.value)
    assert isinstance(value, dict)
    return value


# -- make test: the headers ------------------------------------------------------------------


def test_the_corpus_is_there() -> None:
    assert CASES, f"no issue_*.py in {FOLDER}"


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_the_header_parses_and_agrees_with_its_docstring(case: Path) -> None:
    report = header(case)
    assert set(report) == HEADER_KEYS, f"{case.name}: keys {sorted(report)}"
    number = int(case.stem.split("_")[1])
    assert report["issue"] == number, f"{case.name}: issue {report['issue']} is not the file's {number}"
    docstring = ast.get_docstring(parse_python(case.read_text())) or ""
    assert number in {int(n) for n in ISSUE_URL.findall(docstring)}, f"{case.name}: the docstring lacks the issue's URL"
    assert "2.13" in docstring, f"{case.name}: the docstring lacks the check on torch 2.13.0"
    assert report["class"] in BUG_CLASSES | CLEAN_CLASSES, report["class"]
    assert report["verdict"] in {v.value for v in Verdict}, report["verdict"]
    assert isinstance(report["cli_args"], list) and all(isinstance(a, str) for a in report["cli_args"])
    assert report["known_miss"] is None or (isinstance(report["known_miss"], str) and report["known_miss"])
    if report["class"] in CLEAN_CLASSES:
        assert (report["verdict"], report["op"]) == ("clean", None), f"{case.name}: a non-bug is clean, naming nothing"
    else:
        assert isinstance(report["op"], str) and report["op"].startswith("aten."), f"{case.name}: a bug names its op"
        # a real bug whose outputs upstream's same passes is listed by its op, never the headline (issue 36 item 4)
        assert report["verdict"] in (("crash",) if report["class"] == "crash" else ("divergent", "nan", "clean")), case.name
        if report["verdict"] == "clean":  # listed within upstream's same, or as closer to fp64 (a departure)
            assert ("within_upstream" in docstring and "same" in docstring) or (
                "differences" in docstring and "closer to fp64" in docstring), f"{case.name}: a clean bug says why"



def test_the_header_check_refuses_a_bad_header(tmp_path: Path) -> None:
    """The header check can fail: a header placed after other code is refused."""
    bad = tmp_path / "issue_1_bad.py"
    bad.write_text('"""https://github.com/pytorch/pytorch/issues/1 torch 2.13"""\nimport torch\nREAL_REPORT = {}\n')
    with pytest.raises(AssertionError, match="must follow the docstring"):
        header(bad)


# -- BISECT_CORPUS=all: each case through the CLI --------------------------------------------


@dataclass
class CaseRun:
    exit_code: int
    output: str
    report: dict[str, Any] | None
    seconds: float
    repro_exit: int | None  # the emitted repro run again in a fresh process


def _environment(cache: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BISECT_ACCURACY_")}
    return {**environ, "PYTHONDONTWRITEBYTECODE": "1", "TORCHINDUCTOR_CACHE_DIR": str(cache)}


def _run_case(case: Path, base: Path) -> CaseRun:
    import time

    work = base / case.stem
    cwd, out_dir = work / "cwd", work / "out"
    cwd.mkdir(parents=True)
    env = _environment(work / "inductor-cache")
    command = [sys.executable, "-m", "bisect_engine.cli", "run", str(case), "--out", str(out_dir),
               "--verify-runs", "1", "--quiet", *header(case)["cli_args"]]
    started = time.perf_counter()
    completed = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    seconds = time.perf_counter() - started
    report_path = out_dir / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    repro_exit = None
    repro = (report or {}).get("repro") or {}
    if repro.get("path"):
        again = subprocess.run([sys.executable, Path(repro["path"]).name], cwd=Path(repro["path"]).parent,
                               env=env, capture_output=True, text=True, timeout=600)
        repro_exit = again.returncode
    return CaseRun(completed.returncode, completed.stdout + completed.stderr, report, seconds, repro_exit)


def background_jobs(session: pytest.Session) -> list[Job]:
    """One CLI run per case, started when collection ends (tests/conftest.py), only when a test of
    this file reads them (``BISECT_CORPUS=all``)."""
    selected = [item.callspec.params["case"] for item in session.items
                if getattr(item, "module", None) is sys.modules[__name__]
                and "case_runs" in getattr(item, "fixturenames", ()) and hasattr(item, "callspec")]
    if CORPUS != "all" or not selected:
        return []
    base = session.config._tmp_path_factory.mktemp("real_reports")  # type: ignore[attr-defined]
    return [Job(f"real_report:{case.stem}", 120.0, lambda case=case: _run_case(case, base)) for case in selected]


@pytest.fixture(scope="module")
def case_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("real_reports_here")
    return {case.stem: (lambda case=case: background_result(f"real_report:{case.stem}",
                                                            lambda: _run_case(case, base)))
            for case in CASES}


def listed_ops(report: dict[str, Any]) -> list[str]:
    """The ops listed within upstream's ``same`` (a model file's findings, a script's calls), and
    those listed under ``differences`` as closer to fp64 with a gradient they flip (issue 37 item 5)."""
    script_graphs = (report.get("script") or {}).get("graphs") or []
    return [item.get("op") for item in report.get("within_upstream") or []] + [
        op for graph in script_graphs for item in graph.get("within_upstream") or [] for op in item.get("ops") or []] + [
        item.get("op") for item in report.get("differences") or [] if item.get("backward")]


CAST_OPS = ("aten._to_copy.default", "prims.convert_element_type.default")


def _marks(case: Path) -> list[Any]:
    known_miss = header(case).get("known_miss")
    return [pytest.mark.xfail(strict=True, reason=known_miss)] if known_miss else []


@pytest.mark.e2e
@pytest.mark.skipif(CORPUS != "all", reason="a CLI run per case (1-10 min each): BISECT_CORPUS=all")
@pytest.mark.parametrize("case", [pytest.param(c, id=c.stem, marks=_marks(c)) for c in CASES])
def test_the_tool_names_what_the_thread_concluded(case: Path, case_runs: dict[str, Any]) -> None:
    expected = header(case)
    run: CaseRun = case_runs[case.stem]()
    assert run.report is not None, f"no report.json (exit {run.exit_code}):\n{run.output[-3000:]}"
    culprit = run.report.get("culprit") or {}
    assert run.report["verdict"] == expected["verdict"], (run.report["verdict"], culprit.get("op"), run.output[-3000:])
    if expected["op"] is not None and expected["verdict"] == "clean":  # a bug upstream's same passes: listed
        assert expected["op"] in listed_ops(run.report), (run.report.get("within_upstream"), run.output[-3000:])
    elif expected["op"] is not None:
        assert culprit.get("op") == expected["op"], (culprit.get("op"), run.output[-3000:])
    if expected["verdict"] in ("divergent", "nan", "crash"):
        assert run.repro_exit == 1, f"the repro exited {run.repro_exit} in a fresh process"
    if expected["class"] == "cast_elision":  # the cast named, its switch checked (issue 37 item 4)
        elided = [d for d in run.report.get("differences") or [] if d.get("cast_elided")]
        assert elided and elided[0]["op"] in CAST_OPS and elided[0]["setting"]["follows_eager"], (
            run.report.get("differences"), run.output[-3000:])
