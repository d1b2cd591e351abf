"""The supervisor of ``bisect-accuracy run`` (torch-free): the run happens in a child process, so a
kernel that kills its process (abort, segfault, heap corruption) is never the tool's death.

``cli.entry`` asks :func:`supervised` first. The command runs as a child with :data:`SUPERVISED` set
(the child runs it itself); its exit status is the tool's. When the child dies by a native crash's
signal (:data:`NATIVE_CRASHES`), the command runs once more with ``errors.NATIVE_CRASH_RERUN`` set:
that run judges every compiled candidate in a child process of its own, so the op whose compiled
code crashes is named (verdict ``crash``, exit 1, a repro that crashes the same way). Either way ``report.json`` gets
``native_crash`` (the signal of the first run, and how the rerun ended). When the rerun dies too, or
ends ``clean`` though the program crashed, nothing is localised: verdict ``error``, exit 3 (our
harness could not separate the crash from the tool), never a clean. A child killed from outside (the
OOM killer, a timeout, ``kill``) is not rerun: a report says so and the supervisor ends by the same
signal. No run ends without a report.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from .errors import ISOLATE_FOLDER_PREFIX
from .errors import NATIVE_CRASH_RERUN as ISOLATE  # the rerun's switch (read by localise/isolate.py)
from .many import read_report
from .output.integrity import sweep_stale_folders

SUPERVISED = "BISECT_SUPERVISED_CHILD"  # in the child: run the command here
START_UP_SUPERVISED = "BISECT_START_UP_SUPERVISED"  # the program's process under the start-up hook's supervisor
# The signals a native crash ends with (as ``localise/isolate.py`` counts them); any other death of
# the child (SIGKILL from the OOM killer or a user, SIGTERM from a timeout) is the supervisor's own.
NATIVE_CRASHES = frozenset({signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE,
                            signal.SIGTRAP})
EXIT_FOUND, EXIT_INTERNAL = 1, 3


def supervised(argv: list[str]) -> int | None:
    """The exit status of ``argv`` (the command line after the program name) run under supervision,
    or None where this process must run it itself (not a ``run``, or already the child)."""
    if os.environ.pop(SUPERVISED, None) or not argv or argv[0] != "run":
        return None
    sweep_stale_folders(prefix=ISOLATE_FOLDER_PREFIX)  # an earlier isolated rerun's, left by a kill -9
    first = _child(argv, {})
    if first >= 0:
        return first
    if -first not in NATIVE_CRASHES:  # killed from outside (the OOM killer, a timeout, kill): no rerun
        _killed(_out_dir(argv), first)
    name = _signal_name(first)
    print(f"bisect-accuracy: the run's process died by {name} (a native crash); running it again with each "
          "compiled candidate in a child process", file=sys.stderr, flush=True)
    second = _child(argv, {ISOLATE: "1"})
    return _after_rerun(_out_dir(argv), first, second)


def _after_rerun(out_dir: Path, first: int, second: int) -> int:
    """The status of a run whose first attempt died by signal ``-first``, from its isolated rerun's
    ``second``; the report says how both ended."""
    report = read_report(out_dir / "report.json")
    crash = {"signal": _signal_name(first), "exit": first, "rerun_exit": second, "isolated_rerun": True}
    if second >= 0 and report is not None and report.get("verdict") not in ("clean", None):
        _write(out_dir, {**report, "native_crash": crash})
        return second
    why = (f"the rerun died by {_signal_name(second)} too" if second < 0 else
           "the rerun, each compiled candidate in a child process, found no crash")
    message = (f"the run's process died by {crash['signal']} (a native crash) and {why}: the crash is not "
               "localised (compiled code or the tool itself); no verdict")
    print(f"bisect-accuracy: error: {message}", file=sys.stderr, flush=True)
    _write(out_dir, {"schema": 1, "verdict": "error", "model": (report or {}).get("model"),
                     "error": {"kind": "internal", "message": message, "exit_status": EXIT_INTERNAL},
                     "native_crash": crash})
    return EXIT_INTERNAL


def supervise_start_up(out_dir: Callable[[], Path]) -> None:
    """The start-up hook's supervisor (``BISECT_ACCURACY_LEVEL=4 python train.py``), entered by
    ``autostart`` while the interpreter starts, before the program runs (nothing run, nothing
    allocated, no thread yet): this process forks and the child returns to run the program; this
    process never returns. It ends as the child did; where the child died by a native crash's signal,
    it forks once more from the same start-up state with ``errors.NATIVE_CRASH_RERUN`` set (script
    mode then runs each graph's first call in a child of its own: verdict ``crash``, the op named),
    and ends by the rerun's status with ``native_crash`` in the report at ``out_dir()`` (as ``run``'s
    supervisor does). A child killed from outside: this process ends by the same signal (the child's
    own handlers wrote what a SIGINT or SIGTERM lets them write)."""
    sweep_stale_folders(prefix=ISOLATE_FOLDER_PREFIX)  # an earlier isolated rerun's, left by a kill -9
    first = _forked({})
    if first is None:
        return
    if first >= 0:
        os._exit(first)
    if -first not in NATIVE_CRASHES:
        _die_as(-first)
    print(f"bisect-accuracy: the program's process died by {_signal_name(first)} (a native crash); running it "
          "again with each compiled graph's first call in a child process", file=sys.stderr, flush=True)
    second = _forked({ISOLATE: "1"})
    if second is None:
        return
    status = _after_rerun(out_dir(), first, second)
    sys.stderr.flush()
    os._exit(status)


def _forked(extra: dict[str, str]) -> int | None:
    """Fork: None in the child (``extra`` in its environment, SIGTERM when this process goes); in this
    process, the child's exit status, negative for a signal."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.environ.update({START_UP_SUPERVISED: "1", **extra})
        _end_with_parent()
        return None
    return _relayed(lambda: os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), lambda signum: os.kill(pid, signum))


def _child(argv: list[str], extra: dict[str, str]) -> int:
    """Run the command as a child (the same interpreter and entry point): its exit status, negative
    for a signal."""
    command = ([sys.executable, "-m", "bisect_engine.cli"] if sys.argv[0].endswith("cli.py")
               else [sys.executable, sys.argv[0]])
    process = subprocess.Popen([*command, *argv], env={**os.environ, SUPERVISED: "1", **extra},
                               preexec_fn=_end_with_parent)
    return _relayed(process.wait, process.send_signal)


def _relayed(wait: Callable[[], int], send: Callable[[int], None]) -> int:
    """``wait()`` for the child, passing signals on: a terminal's Ctrl-C reaches the child itself (same
    process group); SIGINT sent to this process alone, SIGTERM and SIGHUP are passed on with ``send``."""
    def pass_on(signum: int, _frame: Any) -> None:
        if signum != signal.SIGINT or not _foreground():  # a terminal's Ctrl-C reached the child itself
            send(signum)

    previous = {s: signal.signal(s, pass_on) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    try:
        return wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _end_with_parent() -> None:
    """In the child, before the run starts: SIGTERM when the supervisor goes (even by SIGKILL), so a
    run never outlives the command its caller started; it ends as a SIGTERM'd run does."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _killed(out_dir: Path, status: int) -> None:
    """The child was killed from outside: a report says so where it left none, then this process
    ends by the same signal, as the unsupervised run would have."""
    name = _signal_name(status)
    print(f"bisect-accuracy: the run's process was killed by {name} from outside (the OOM killer, a timeout "
          "or a user); no verdict", file=sys.stderr, flush=True)
    if read_report(out_dir / "report.json") is None:
        _write(out_dir, {"schema": 1, "verdict": "error", "model": None,
                         "error": {"kind": "internal", "message": f"the run's process was killed by {name}",
                                   "exit_status": EXIT_INTERNAL}})
    _die_as(-status)


def _die_as(signum: int) -> None:
    """End this process by the signal that ended the child, as the unsupervised run would have."""
    if signum not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    signal.pause()  # a blocked signal: wait for it


def _foreground() -> bool:
    """Whether this process group is a terminal's foreground group (its Ctrl-C goes to the child too)."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


def _signal_name(status: int) -> str:
    try:
        return signal.Signals(-status).name
    except ValueError:
        return f"signal {-status}"


def _out_dir(argv: list[str]) -> Path:
    """``--out`` as the command line gives it (the run's default otherwise)."""
    for index, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--out" and index + 1 < len(argv):
            return Path(argv[index + 1])
        if arg.startswith("--out="):
            return Path(arg.split("=", 1)[1])
    return Path("bisect-accuracy-out")


def _write(out_dir: Path, report: dict[str, Any]) -> None:
    """``report.json`` through the output folder (its lock and manifest), reusing what is there."""
    from .output.folder import OutputError, OutputFolder

    try:
        with OutputFolder(out_dir, reuse=True) as folder:
            folder.write_report(report)
    except OutputError as error:
        print(f"bisect-accuracy: cannot write {out_dir / 'report.json'}: {error}", file=sys.stderr)
