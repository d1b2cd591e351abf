"""Issue 37: a kernel that kills its process is a verdict, not the tool's death.

The supervisor's decisions on a run whose first attempt died by a signal (pure, on report files),
the crash signals that count, and one real child process killed by a planted native crash
(Inductor's C++ relu throwing inside its OpenMP region: ``std::terminate``, SIGABRT) beside a clean
one. The whole path (model file and script) runs under ``BISECT_CORPUS=all``
(``repro_cases/native_crash_relu.py``, ``tests/test_script_mode.py``'s native-crash test).
"""
from __future__ import annotations

import ctypes.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bisect_engine import supervise
from bisect_engine.localise import isolate
from bisect_engine.output import repro_runtime


def _report(out: Path, report: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report))


def test_a_rerun_that_localises_the_crash_keeps_its_verdict_and_says_the_first_run_died(tmp_path: Path) -> None:
    _report(tmp_path, {"schema": 1, "verdict": "crash", "culprit": {"op": "aten.relu.default"}})
    assert supervise._after_rerun(tmp_path, -int(signal.SIGABRT), 1) == 1
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "crash" and report["culprit"]["op"] == "aten.relu.default"
    assert report["native_crash"] == {"signal": "SIGABRT", "exit": -6, "rerun_exit": 1, "isolated_rerun": True}


@pytest.mark.parametrize("second, verdict", [(-int(signal.SIGSEGV), None), (0, "clean")])
def test_a_native_crash_the_rerun_cannot_localise_is_an_error_never_a_clean(tmp_path: Path, second: int,
                                                                             verdict: str | None) -> None:
    if verdict is not None:
        _report(tmp_path, {"schema": 1, "verdict": verdict})
    assert supervise._after_rerun(tmp_path, -int(signal.SIGABRT), second) == supervise.EXIT_INTERNAL
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "error" and report["error"]["exit_status"] == 3
    assert report["native_crash"]["signal"] == "SIGABRT" and report["native_crash"]["rerun_exit"] == second


def test_only_crash_signals_are_native_crashes() -> None:
    assert "SIGSEGV" in (isolate.native_crash_message(-int(signal.SIGSEGV)) or "")
    assert isolate.native_crash_message(-int(signal.SIGKILL)) is None  # the OOM killer: our harness
    assert isolate.native_crash_message(1) is None


def test_a_crash_repro_that_kills_its_child_reproduces(tmp_path: Path) -> None:
    script = tmp_path / "dies.py"
    script.write_text("import os, signal, sys\n"
                      f"if os.environ.get({repro_runtime.CRASH_CHILD!r}): os.kill(os.getpid(), signal.SIGABRT)\n"
                      "sys.exit(7)\n")
    assert repro_runtime.crash_in_child(str(script)) == repro_runtime.EXIT_REPRODUCED
    script.write_text("import sys\nsys.exit(0)\n")
    assert repro_runtime.crash_in_child(str(script)) == 0  # the child's own verdict stands


# Four bytes stored past the end of a 20-byte tensor, inside its block's slack: a plain heap never
# notices (the process ends normally: exit 0, checked by hand), glibc's heap checker aborts at the free.
_TAIL_STORE = ("import ctypes, torch\nt = torch.empty(5)\nctypes.memset(t.data_ptr() + 20, 0x41, 4)\ndel t\n")


@pytest.mark.skipif(not ctypes.util.find_library("c_malloc_debug"), reason="no glibc heap checker here")
def test_a_crash_repros_child_runs_under_the_heap_checker(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """An out-of-bounds store that does not abort a plain process (pytorch#196681's tail store
    aborted 1 plain run of 2) aborts the heap-checked child of a crash repro, and the same for
    the tool's isolated children (``isolate._heap_checked_children``), whose environment it
    restores."""
    script = tmp_path / "tail.py"
    script.write_text(_TAIL_STORE)
    assert repro_runtime.crash_in_child(str(script)) == repro_runtime.EXIT_REPRODUCED
    assert "REPRODUCED: the compiled code killed its process (SIGABRT" in capfd.readouterr().out
    before = {key: os.environ.get(key) for key in ("LD_PRELOAD", "MALLOC_CHECK_")}
    with isolate._heap_checked_children():
        assert "c_malloc_debug" in os.environ["LD_PRELOAD"] and os.environ["MALLOC_CHECK_"] == "3"
        checked = subprocess.run([sys.executable, str(script)])
    assert checked.returncode == -signal.SIGABRT
    assert {key: os.environ.get(key) for key in before} == before


class _Step(torch.nn.Module):
    def forward(self, x):  # unannotated: the traced code would import the annotation text
        return torch.relu(torch.tanh(x)).sum(dim=1)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the planted throw aborts only inside an OpenMP region")
def test_a_kernel_that_aborts_kills_the_child_not_the_tool() -> None:
    """The planted relu aborts the child; the message names SIGABRT and this process goes on (a
    child that returns values is the e2e runs' path: BISECT_CORPUS=all)."""
    import torch._inductor.config as inductor_config

    graph = torch.fx.symbolic_trace(_Step())
    inputs = [torch.randn(64, 512)]
    isolated = isolate.Isolated(None)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # the child runs with this process's threads: two make the OpenMP region
    try:
        with inductor_config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "runtime_error"}):
            message = isolated.native_crash(graph, inputs, "planted")
        assert message is not None and "SIGABRT" in message and message.startswith(isolate.NATIVE_CRASH), message
        assert isolated.crashes == 0 and isolated._process is None  # the dead child is let go; the next is fresh
    finally:
        torch.set_num_threads(threads)
        isolated.close()


@pytest.mark.parametrize("guarded", [False, True])
def test_a_spawned_child_never_runs_an_unguarded_script_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             guarded: bool) -> None:
    """Script mode runs the user's file as ``__main__``; ``spawn`` would run it again in each worker
    or isolated child (issue 37's tail-store crash, a script without a main guard, crashed the
    isolated child that way). While a child starts, an unguarded script's ``__main__`` is hidden;
    a guarded one is kept (its definitions may be named by pickled jobs); both restored after."""
    import multiprocessing.spawn
    import sys
    import types

    from bisect_engine.localise.workers import main_not_rerun

    script = tmp_path / "train.py"
    body = "import torch\nprint(torch.compile(torch.sin)(torch.ones(3)))\n"
    script.write_text(f"def main():\n    {body.splitlines()[1]}\nif __name__ == '__main__':\n    main()\n"
                      if guarded else body)
    user_main = types.ModuleType("__main__")
    user_main.__file__, user_main.__spec__ = str(script), None  # as runpy.run_path leaves it
    monkeypatch.setitem(sys.modules, "__main__", user_main)
    with main_not_rerun():
        data = multiprocessing.spawn.get_preparation_data("child")
    assert ("init_main_from_path" in data) is guarded
    assert sys.modules["__main__"] is user_main


class _FakeChild:
    """A child process and its pipe: it answers ``reply`` (pickled) or dies with ``exitcode``."""

    def __init__(self, reply: object = None, exitcode: int = 0, alive: bool = False) -> None:
        import pickle

        self._data = pickle.dumps(reply) if reply is not None else None
        self.exitcode, self._alive = exitcode, alive

    def is_alive(self) -> bool:
        return self._alive

    def join(self, timeout: float | None = None) -> None:
        self._alive = False

    def send_bytes(self, blob: bytes) -> None:
        pass

    def poll(self, timeout: float = 0.0) -> bool:
        return self._data is not None

    def recv_bytes(self) -> bytes:
        data, self._data = self._data, None
        assert data is not None
        return data


@pytest.mark.parametrize("reused", [True, False])
def test_a_crash_counts_only_in_a_fresh_child(monkeypatch: pytest.MonkeyPatch, reused: bool) -> None:
    """Heap corruption one candidate leaves in a reused child can abort it during the next
    (issue 196681's tail store blamed a lone ``mul``): a crash in a reused child is judged again in
    a fresh one, whose answer stands; a crash in a fresh child is the candidate's at once."""
    children = [_FakeChild(exitcode=-int(signal.SIGABRT)), _FakeChild(reply="values")]
    started: list[_FakeChild] = []

    def child(self: isolate.Isolated) -> tuple[_FakeChild, _FakeChild]:
        started.append(children.pop(0))
        self._process = started[-1]
        return started[-1], started[-1]

    monkeypatch.setattr(isolate.Isolated, "_child", child)
    evaluator = isolate.Isolated(judge=None)
    evaluator._process = _FakeChild(alive=True) if reused else None
    result, message = evaluator._run(b"job", "graph_0")
    if reused:
        assert (result, message, len(started)) == ("values", "", 2)
    else:
        assert result is None and "SIGABRT" in message and len(started) == 1
    evaluator.close()


def test_a_child_imports_a_model_file_never_a_script(tmp_path: Path) -> None:
    """A worker or isolated child imports the model file as the tool did (what it registers in
    Inductor at import); a plain script's top level is the program, so it is never imported there
    (pytorch#196681: each isolated child ran the script again, failed to start, and every candidate
    read as a crash with no text: the graph's first node was blamed and its repro did not crash)."""
    from types import SimpleNamespace

    from bisect_engine.localise.workers import model_file_path

    script = tmp_path / "train.py"
    script.write_text("import torch\nprint(torch.compile(torch.sin)(torch.ones(3)))\n")
    model = tmp_path / "model.py"
    model.write_text("def get_model():\n    return None\n\ndef get_inputs():\n    return ()\n")
    assert model_file_path(SimpleNamespace(path=script)) is None
    assert model_file_path(SimpleNamespace(path=model)) == str(model)
    assert model_file_path(None) is None and model_file_path(SimpleNamespace(path=None)) is None


def test_a_child_that_cannot_start_is_our_harness_never_a_crash_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that answers "unavailable" compiled nothing: before, ``take`` turned its empty
    outputs into a CRASH verdict with an empty message; now it is ``WorkerDied`` (exit 3)."""
    from types import SimpleNamespace

    from bisect_engine.errors import WorkerDied
    from bisect_engine.localise.workers import JobResult

    monkeypatch.setattr(isolate, "prepare_job", lambda judge, candidate, isolating: (b"job", "mul", None, [], False))
    monkeypatch.setattr(isolate.Isolated, "_run",
                        lambda self, blob, label: (JobResult(None, "", 0, 0.0, unavailable="importing x raised"), ""))
    evaluator = isolate.Isolated(judge=SimpleNamespace(contexts={"forward_0": None}))
    with pytest.raises(WorkerDied, match="could not start"):
        evaluator.take(SimpleNamespace(graph="forward_0"))  # type: ignore[arg-type]
    evaluator.close()


def test_an_isolated_reruns_scratch_left_by_a_kill_is_swept_by_the_next_run(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The rerun's scratch folder carries its process's pid; a run killed by ``kill -9`` leaves it,
    and the next ``run``'s supervisor removes it (a live run's folder stays)."""
    import subprocess
    import sys
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    evaluator = isolate.Isolated(judge=None)  # this process's, alive
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    left = tmp_path / f"bisect-isolate-{gone}-abc123"
    left.mkdir()
    (left / "worker.log").write_text("left by a kill -9")
    monkeypatch.setattr(supervise, "_child", lambda argv, extra: 0)
    try:
        assert Path(evaluator._folder).name.startswith(f"bisect-isolate-{os.getpid()}-")
        assert supervise.supervised(["run", "model.py"]) == 0
        assert not left.exists() and Path(evaluator._folder).is_dir()
    finally:
        evaluator.close()
    assert not Path(evaluator._folder).exists()
