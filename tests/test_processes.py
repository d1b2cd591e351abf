"""Every process of a checked program under one verdict (issue 25 rows 3 and 9, issue 24 item 7).

A script's spawned children are checked like the script (through the CLI too: the settings travel
as ``BISECT_ACCURACY_*`` variables), each writes ``OUT/pid<N>/report.json``, and the top-level
report's verdict covers them; two programs started on one ``OUT`` in environment-variable mode
end with one top-level verdict over both, whichever ends first, each printing its own report.
The real-process tests plant Inductor's relu bug (``cpp.inject_relu_bug_TESTING_ONLY``) in one
process only, with a fresh Inductor cache; the pure rules are tested on plain dicts.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import seeded_cache_dir, suite_tempdir

from bisect_engine.script import processes
from bisect_engine.script.levels import Level, ScriptSettings, settings_from_environment
from bisect_engine.script.processes import NO_REPORT, cover, covering_verdict, process_reports

ROOT = Path(__file__).resolve().parents[1]

SPAWNING = """\
import multiprocessing
import torch


def work(planted):
    import torch._inductor.config as config
    if planted:
        config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    f = torch.compile(lambda x: torch.relu(x) * 2)
    print("child", float(f(torch.randn(8)).sum()))


if __name__ == "__main__":
    g = torch.compile(lambda x: torch.tanh(x) * 2, backend="eager")
    print("parent", float(g(torch.ones(3)).sum()))
    child = multiprocessing.get_context(START_METHOD).Process(target=work, args=(True,))
    child.start()
    child.join()
    raise SystemExit(child.exitcode)
"""

# One of two programs on one OUT: argv[1] "bug" compiles relu with the planted bug, "clean" compiles
# with the eager backend; argv[2]: a file to wait for before ending ("-": end at once), so the test
# decides which one ends first.
TWIN = """\
import os, sys, time
import torch
import torch._inductor.config as config
planted = sys.argv[1] == "bug"
config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy" if planted else None
f = torch.compile(lambda x: torch.relu(x) * 2, backend="inductor" if planted else "eager")
f(torch.randn(8))
while sys.argv[2] != "-" and not os.path.exists(sys.argv[2]):
    time.sleep(0.1)
"""


def _environment(**extra: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BISECT_ACCURACY_")}
    return {**environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(ROOT),
            "TORCHINDUCTOR_CACHE_DIR": str(seeded_cache_dir(suite_tempdir("inductor-"))), **extra}


def _report(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


# -- the rules, on plain values -----------------------------------------------------------------


@pytest.mark.parametrize("own, others, expected", [
    ("clean", [], "clean"),
    ("clean", ["divergent"], "divergent"),
    ("divergent", ["clean", "clean"], "divergent"),
    ("clean", [NO_REPORT], "incomplete"),  # a process that left no report was not checked
    ("unchecked", ["clean"], "clean"),  # a launcher that compiled nothing: its children's verdict
    ("clean", ["nan", "crash"], "crash"),
    ("incomplete", ["clean"], "incomplete"),
])
def test_the_top_level_verdict_is_the_most_severe_of_every_process(own: str, others: list[str], expected: str) -> None:
    assert covering_verdict(own, [{"pid": str(i), "verdict": v} for i, v in enumerate(others)]) == expected


def test_covering_again_starts_from_the_processs_own_verdict() -> None:
    report = {"verdict": "clean", "script": {"graphs_compiled": 1}}
    first = cover(report, [{"pid": "7", "verdict": "divergent", "report": "x"}])
    assert (first["verdict"], first["verdict_from"]) == ("divergent", "processes")
    assert first["script"]["own_verdict"] == "clean"
    again = cover(first, [{"pid": "7", "verdict": "clean", "report": "x"}])
    assert again["verdict"] == "clean" and "verdict_from" not in again
    assert report == {"verdict": "clean", "script": {"graphs_compiled": 1}}  # pure


def test_a_process_folder_without_a_report_is_listed_as_having_none(tmp_path: Path) -> None:
    (tmp_path / "pid12").mkdir()
    (tmp_path / "pid13").mkdir()
    (tmp_path / "pid13" / "report.json").write_text('{"verdict": "nan"}')
    (tmp_path / "pidgin").mkdir()  # not ours
    assert [(p["pid"], p["verdict"]) for p in process_reports(tmp_path)] == [("12", NO_REPORT), ("13", "nan")]


def test_the_clis_settings_reach_a_child_unchanged(tmp_path: Path) -> None:
    settings = ScriptSettings(level=Level.LOCALISE, out_dir=tmp_path / "out", check_every=5, stop_on_divergence=True,
                              verify_runs=2, stage="subsystem", max_compiles=40, timeout_s=90.0, max_record_mb=1.5,
                              max_record_files=7, oracle="bitwise")
    environ = processes.child_environment(settings, 4242)
    child = settings_from_environment(environ)
    assert child == ScriptSettings(**{**vars(settings), "out_dir": (tmp_path / "out").absolute()})
    assert environ["BISECT_ACCURACY_ROOT_PID"] == "4242"


def test_without_the_pth_hook_a_private_sitecustomize_starts_it_and_then_the_programs_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "hook_installed", lambda: False)
    users = tmp_path / "users"
    users.mkdir()
    (users / "sitecustomize.py").write_text("import os\nos.environ['USERS_SITECUSTOMIZE'] = 'ran'\n")
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{users}")
    before = dict(os.environ)
    probe = ("import os, sys; print(os.environ.get('USERS_SITECUSTOMIZE'), 'bisect_engine.autostart' in sys.modules, "
             "os.environ['BISECT_ACCURACY_LEVEL'])")
    with processes.hook_travels(ScriptSettings(level=Level.CHECK, out_dir=tmp_path / "out")):
        shim = os.environ["PYTHONPATH"].split(os.pathsep)[0]
        run = subprocess.run([sys.executable, "-S", "-c", "import site; site.main(); " + probe],
                             capture_output=True, text=True, timeout=60)
    assert run.stdout.split() == ["ran", "True", "2"], run.stderr
    assert dict(os.environ) == before and not Path(shim).exists()


# -- real processes -------------------------------------------------------------------------------


# SUITE full (BISECT_CORPUS=all) for the variants a cheaper case covers: make test keeps the spawn
# child through the CLI and the two programs whose buggy one ends first.
FULL = pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all", reason="SUITE full: BISECT_CORPUS=all runs it")


@pytest.mark.e2e
@pytest.mark.parametrize("start_method", ["spawn", pytest.param("fork", marks=FULL)])
def test_a_spawned_childs_wrong_kernel_is_not_clean_through_the_cli(tmp_path: Path, start_method: str) -> None:
    """Row 3: before, `clean`, exit 0, the child never checked nor named (spawn: it never started
    the hook; fork: it wrote into the parent's folder, whose clean report then replaced it)."""
    script, out = tmp_path / "spawning.py", tmp_path / "out"
    script.write_text(SPAWNING.replace("START_METHOD", repr(start_method)))
    run = subprocess.run([sys.executable, "-m", "bisect_engine.cli", "run", str(script), "--out", str(out),
                          "--level", "2", "-q"], capture_output=True, text=True, timeout=600, env=_environment())
    assert run.returncode == 1, run.stderr
    top = _report(out / "report.json")
    (child,) = top["script"]["processes"]
    assert (top["verdict"], top["verdict_from"], top["script"]["own_verdict"]) == ("divergent", "processes", "clean")
    assert child["verdict"] == "divergent" and _report(Path(child["report"]))["script"]["first_divergence_call"]
    assert f"process {child['pid']}: divergent; report: {child['report']}" in run.stderr


@pytest.mark.e2e
@FULL
def test_a_spawned_childs_wrong_kernel_is_the_top_level_verdict_in_environment_mode(tmp_path: Path) -> None:
    """Before: the child was checked (the .pth hook), but the top-level verdict was the parent's `clean`."""
    script, out = tmp_path / "spawning.py", tmp_path / "out"
    script.write_text(SPAWNING.replace("START_METHOD", "'spawn'"))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                         env=_environment(BISECT_ACCURACY_LEVEL="2", BISECT_ACCURACY_OUT=str(out)))
    assert run.returncode == 0, run.stderr  # the hook never changes the program's status
    top = _report(out / "report.json")
    assert (top["verdict"], top["script"]["own_verdict"]) == ("divergent", "clean")
    assert [p["verdict"] for p in top["script"]["processes"]] == ["divergent"]


@pytest.mark.e2e
@pytest.mark.parametrize("bug_ends", ["first", pytest.param("last", marks=FULL)])
def test_two_programs_on_one_out_get_one_verdict_and_each_names_its_own_report(tmp_path: Path, bug_ends: str) -> None:
    """Row 9: before, the one ending last set the other's report aside and wrote `clean` on top
    (bug first), and the printed path named the other program's report."""
    script, out = tmp_path / "twin.py", tmp_path / "out"
    script.write_text(TWIN)
    environ = _environment(BISECT_ACCURACY_LEVEL="2", BISECT_ACCURACY_OUT=str(out))
    first, last = ("bug", "clean") if bug_ends == "first" else ("clean", "bug")
    flag = tmp_path / "end-now"
    started = {name: subprocess.Popen([sys.executable, str(script), name, "-" if name == first else str(flag)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ)
               for name in (first, last)}
    said = {first: started[first].communicate(timeout=600)}
    flag.write_text("")
    said[last] = started[last].communicate(timeout=600)
    reports = {name: _report(Path(said[name][1].split("; report: ")[1].split()[0])) for name in said}
    assert reports["bug"]["verdict"] == "divergent", said["bug"][1]
    assert (reports["clean"].get("script", {}).get("own_verdict") or reports["clean"]["verdict"]) == "clean"
    top = _report(out / "report.json")
    assert top["verdict"] == "divergent" and len(top["script"]["processes"]) == 1
    assert not (out / "previous").exists()
