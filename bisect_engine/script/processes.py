"""Every process of a checked program, covered by one top-level verdict.

A program's processes each check their own compiled calls and write their own report: the first
process of a session writes ``OUT/report.json``; every other one (a spawned or ``subprocess``
child, or a second program started on the same ``OUT`` while the first runs) writes
``OUT/pid<pid>/report.json``. The top-level report's ``verdict`` is the most severe of them all
(``verdicts.SEVERITY``), ``verdict_from: "processes"`` when another process's verdict decided it,
and a process that started writing but left no report yet counts as not checked (``incomplete``).
Whichever process finishes last brings the top-level report up to date (:func:`cover_root`), so
the order in which they end does not matter.

Through the CLI (``bisect-accuracy run script.py``) the run's settings travel to the script's
children as ``BISECT_ACCURACY_*`` variables (:func:`hook_travels`): the start-up hook starts in
each child that imports ``torch._dynamo`` (the ``.pth`` line, or, where it is not installed, a
private ``sitecustomize`` on ``PYTHONPATH`` that imports it and then the program's own).

Torch-free (the start-up hook's path), standard library only.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from ..environ import environ_set
from ..verdicts import SEVERITY
from .levels import (CHECK_EVERY_VARIABLE, LEVEL_VARIABLE, MAX_COMPILES_VARIABLE, MAX_RECORD_FILES_VARIABLE,
                     MAX_RECORD_VARIABLE, ORACLE_VARIABLE, OUT_VARIABLE, ROOT_PID_VARIABLE, STOP_VARIABLE, TIMEOUT_VARIABLE,
                     VERIFY_RUNS_VARIABLE, ScriptSettings)

REPORT_FILE = "report.json"
LOCK_FILE = ".bisect-accuracy.lock"  # the same as output.folder.LOCK_FILE
NO_REPORT = "no_report"  # a process folder without a report: still running, or ended before writing it
COVER_WAIT_S = 3.0  # how long a finishing process waits for the top-level folder's lock


def process_reports(root: Path) -> list[dict[str, Any]]:
    """Each ``pid<N>`` folder under ``root``: its pid, verdict (``no_report`` when none) and report."""
    found = []
    for folder in sorted(root.glob("pid*")):
        if not folder.is_dir() or folder.is_symlink() or not folder.name[3:].isdigit():
            continue
        path = folder / REPORT_FILE
        try:
            verdict = json.loads(path.read_text()).get("verdict") or NO_REPORT
        except (OSError, ValueError, AttributeError):
            verdict = NO_REPORT
        found.append({"pid": folder.name[3:], "verdict": verdict, "report": str(path)})
    return found


def covering_verdict(own: str, processes: list[dict[str, Any]]) -> str:
    """The most severe verdict of this process and the others; one with no report is not checked."""
    verdicts = [own] + ["incomplete" if p["verdict"] == NO_REPORT else p["verdict"] for p in processes]
    ranked = [v for v in verdicts if v in SEVERITY]
    return min(ranked, key=SEVERITY.index, default=own)


def cover(report: dict[str, Any], processes: list[dict[str, Any]]) -> dict[str, Any]:
    """``report`` (the top-level one) with its verdict covering ``processes``; its own verdict kept
    in ``script.own_verdict``. Pure: returns a new dict."""
    script = dict(report.get("script") or {})
    own = script.get("own_verdict") or report["verdict"]
    verdict = covering_verdict(own, processes)
    script.update(own_verdict=own, processes=processes,
                  processes_not_finished=[p["pid"] for p in processes if p["verdict"] == NO_REPORT])
    covered = {**report, "verdict": verdict, "script": script}
    covered.pop("verdict_from", None)
    if verdict != own:
        covered["verdict_from"] = "processes"
    return covered


def process_lines(script: dict[str, Any]) -> list[str]:
    """The summary's lines for the other processes: each one's verdict and its own report."""
    processes = script.get("processes") or []
    if not processes:
        return []
    lines = [f"  processes: {len(processes)} other process(es) of this program checked their own compiles"
             f" (this one: {script.get('own_verdict')})"]
    for process in processes:
        verdict = process["verdict"]
        if verdict == NO_REPORT:
            verdict = "no report (still running, or ended before writing it): not checked"
        lines.append(f"  process {process['pid']}: {verdict}; report: {process['report']}")
    return lines


# -- a second program on the same OUT -----------------------------------------------------------


def written_since(root: Path, started: float) -> bool:
    """``root`` holds a report written after ``started`` (this process's start): another program
    ran on the same folder meanwhile, so its report is part of this run, never an earlier run's."""
    try:
        return (root / REPORT_FILE).stat().st_mtime >= started
    except OSError:
        return False


def process_started_at(fallback: float) -> float:
    """When this process started (wall clock, Linux ``/proc``), else ``fallback``: a program that
    was already running when another wrote ``OUT`` is a companion of it, not a later run."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])  # since boot
        since_start = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return min(fallback, time.time() - since_start)
    except (OSError, ValueError, IndexError, AttributeError):
        return fallback


def lock_holder(root: Path) -> int | None:
    """The pid holding ``root``'s lock, or None when it is free (or unreadable)."""
    try:
        descriptor = os.open(root / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None
    except OSError:
        text = os.read(descriptor, 64).decode(errors="replace").strip()
        return int(text) if text.isdigit() else -1
    finally:
        os.close(descriptor)


def should_cover_root(root: Path, environ: Any = os.environ) -> bool:
    """A process that wrote ``OUT/pid<N>`` brings the top-level report up to date at its exit,
    unless the top level is held by this session's first process, which reads every process's
    report at its own exit (the CLI around a script, a parent waiting for its children)."""
    if not (root / REPORT_FILE).exists():
        return False
    holder = lock_holder(root)
    return holder is None or str(holder) != environ.get(ROOT_PID_VARIABLE)


# -- the CLI's settings, handed to the script's children ----------------------------------------


def child_environment(settings: ScriptSettings, root_pid: int) -> dict[str, str]:
    """The ``BISECT_ACCURACY_*`` variables that give a child process the same checks."""
    environ = {LEVEL_VARIABLE: str(int(settings.level)), OUT_VARIABLE: str(settings.out_dir.absolute()),
               ROOT_PID_VARIABLE: str(root_pid), CHECK_EVERY_VARIABLE: str(settings.check_every),
               VERIFY_RUNS_VARIABLE: str(settings.verify_runs), MAX_RECORD_VARIABLE: repr(settings.max_record_mb),
               MAX_RECORD_FILES_VARIABLE: str(settings.max_record_files)}
    if settings.stop_on_divergence:
        environ[STOP_VARIABLE] = "1"
    if settings.max_compiles:
        environ[MAX_COMPILES_VARIABLE] = str(settings.max_compiles)
    if settings.timeout_s is not None:
        environ[TIMEOUT_VARIABLE] = repr(settings.timeout_s)
    if settings.oracle != "outputs":
        environ[ORACLE_VARIABLE] = settings.oracle
    return environ


SITECUSTOMIZE = '''\
"""bisect-accuracy: start the checking hook in this child of a checked script, then the program's own sitecustomize."""
import sys, importlib
try:
    import bisect_engine.autostart
except ImportError:
    pass
_here = sys.path.index(__file__.rsplit("/", 1)[0]) if __file__.rsplit("/", 1)[0] in sys.path else None
if _here is not None:
    _saved = sys.path.pop(_here)
    del sys.modules["sitecustomize"]
    try:
        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    finally:
        sys.path.insert(_here, _saved)
'''


def hook_installed() -> bool:
    """The ``.pth`` start-up hook is in this interpreter's site-packages (children start it)."""
    from .hook import hook_path

    return hook_path().exists()


@contextlib.contextmanager
def hook_travels(settings: ScriptSettings) -> Iterator[None]:
    """While the script runs, its children inherit the run's settings (and, where the ``.pth``
    hook is not installed, a private ``sitecustomize`` that starts it); restored after."""
    extra = child_environment(settings, os.getpid())
    shim = None if hook_installed() else Path(tempfile.mkdtemp(prefix="bisect-accuracy-hook-"))
    if shim is not None:
        (shim / "sitecustomize.py").write_text(SITECUSTOMIZE)
        extra["PYTHONPATH"] = os.pathsep.join(p for p in (str(shim), os.environ.get("PYTHONPATH", "")) if p)
    try:
        with environ_set(extra):
            yield
    finally:
        if shim is not None:
            shutil.rmtree(shim, ignore_errors=True)


def wait_for_lock(root: Path, wait_s: float = COVER_WAIT_S) -> bool:
    """Whether ``root``'s lock came free within ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while lock_holder(root) is not None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def cover_root(root: Path, wait_s: float = COVER_WAIT_S) -> bool:
    """Bring ``root/report.json`` up to date with every process's report (its views re-rendered);
    False when its lock stayed busy (its holder covers at its own exit) or it holds no report."""
    from ..output.folder import OutputError, OutputFolder
    from ..output.views import add_view_paths, write_views

    if not wait_for_lock(root, wait_s):
        return False
    try:
        with OutputFolder(root, reuse=True) as folder:
            report = json.loads((root / REPORT_FILE).read_text())
            covered = cover(report, process_reports(root))
            if covered == report:
                return True
            add_view_paths(covered, folder.path)
            folder.write_report(covered)
            write_views(covered, folder)
    except (OutputError, OSError, ValueError):
        return False
    return True
