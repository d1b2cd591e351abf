"""Safe by construction: one probe per defect of issue 15, each as a user (or an attacker) would
meet it. Folder rules are tested on ``OutputFolder`` directly; contract errors through the CLI in
this process (they end before any compile); signals, script mode, the start-up hook and the
uninstall in real processes."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bisect_engine.cli import main
from bisect_engine.output.folder import FolderBusy, OutputError, OutputFolder
from bisect_engine.output.repro import ReproSpec, render

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
GOOD_MODEL = "import torch\ndef get_model():\n    return torch.nn.Tanh()\n"


def _environment(**extra: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BISECT_ACCURACY_")}
    return {**environ, "PYTHONDONTWRITEBYTECODE": "1", **extra}


def _cli(tmp_path: Path, source: str, *extra: str, out: Path | None = None) -> Any:
    """The CLI in this process (probes that end before any compile)."""
    model = tmp_path / "model.py"
    model.write_text(source)
    out = out or tmp_path / "out"
    return CliRunner().invoke(main, ["run", str(model), "--out", str(out), "-q", "--verify-runs", "0", *extra])


# -- 1, 3, 5, 6: the output folder is ours alone ------------------------------------------------


def test_a_symlinked_report_is_refused_and_its_target_never_touched(tmp_path: Path) -> None:
    out, outside = tmp_path / "out", tmp_path / "precious.txt"
    out.mkdir()
    outside.write_text("the user's file")
    (out / "report.json").symlink_to(outside)
    with pytest.raises(OutputError, match=r"report.json \(a symbolic link\), which this tool did not write"):
        OutputFolder(out).open()
    with OutputFolder(out, force=True) as folder:  # --force moves the link aside, never follows it
        folder.write_json("report.json", {"verdict": "clean"})
        assert folder.previous == out / "previous" / "1"
    assert (out / "previous" / "1" / "report.json").is_symlink()
    assert outside.read_text() == "the user's file"
    assert json.loads((out / "report.json").read_text()) == {"verdict": "clean"}


def test_a_link_planted_after_the_folder_is_opened_is_replaced_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "precious.txt"
    outside.write_text("the user's file")
    with OutputFolder(tmp_path / "out") as folder:
        (folder.path / "repro.py").symlink_to(outside)
        folder.write_text("repro.py", "print('repro')\n")
        (folder.path / "graphs").symlink_to(tmp_path, target_is_directory=True)
        with pytest.raises(OutputError, match="symbolic link"):
            folder.write_text("graphs/graph_0.py", "x = 1\n")
    assert outside.read_text() == "the user's file"
    assert not (folder.path / "repro.py").is_symlink() and not (tmp_path / "graph_0.py").exists()


def test_the_users_own_files_are_refused_unless_forced_and_then_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "repro.py").write_text("my own script\n")
    (out / "notes.txt").write_text("not named like ours: left alone\n")
    result = _cli(tmp_path, GOOD_MODEL + "def get_inputs():\n    return (torch.ones(2),)\n", out=out)
    assert result.exit_code == 2 and "which this tool did not write; pass --force" in result.output
    assert (out / "repro.py").read_text() == "my own script\n"
    with OutputFolder(out, force=True) as folder:
        assert folder.moved_foreign == ["repro.py"]
    assert (out / "previous" / "1" / "repro.py").read_text() == "my own script\n"
    assert (out / "notes.txt").exists()


def test_a_second_run_on_a_busy_folder_is_refused(tmp_path: Path) -> None:
    with OutputFolder(tmp_path / "out"):
        with pytest.raises(FolderBusy, match=f"another bisect-accuracy run is using .* \\(pid {os.getpid()}\\)"):
            OutputFolder(tmp_path / "out").open()
        result = _cli(tmp_path, GOOD_MODEL + "def get_inputs():\n    return (torch.ones(2),)\n")
        assert result.exit_code == 2 and "another bisect-accuracy run is using" in result.output
    OutputFolder(tmp_path / "out").open().close()  # free again once the first is done


def test_a_rerun_keeps_the_earlier_run_and_leaves_no_stale_file(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with OutputFolder(out) as folder:
        folder.write_json("report.json", {"verdict": "divergent"})
        folder.write_text("repro.py", "first\n")
        folder.write_text("graphs/graph_0.py", "graph\n")
    with OutputFolder(out) as folder:
        folder.write_json("report.json", {"verdict": "clean"})
        assert folder.previous == out / "previous" / "1"
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["previous", "report.json"]
    kept = out / "previous" / "1"
    assert json.loads((kept / "report.json").read_text()) == {"verdict": "divergent"}
    assert (kept / "repro.py").read_text() == "first\n" and (kept / "graphs" / "graph_0.py").exists()
    with OutputFolder(out):
        pass
    assert (out / "previous" / "2" / "report.json").exists()


def test_a_file_changed_by_someone_else_since_our_run_counts_as_theirs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with OutputFolder(out) as folder:
        folder.write_text("repro.py", "ours\n")
    (out / "repro.py").write_text("edited by the user\n")
    with pytest.raises(OutputError, match="repro.py, which this tool did not write"):
        OutputFolder(out).open()


# -- 7: faults are messages ----------------------------------------------------------------------


def _mount_tmpfs(path: Path, options: str) -> bool:
    path.mkdir()
    if os.geteuid() != 0:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                          capture_output=True).returncode == 0


def test_a_full_disk_is_a_message_and_leaves_no_truncated_file(tmp_path: Path) -> None:
    disk = tmp_path / "small"
    if not _mount_tmpfs(disk, "size=64k"):
        pytest.skip("needs root to mount a 64 KiB tmpfs")
    try:
        with OutputFolder(disk / "out") as folder:
            folder.write_text("report.json", "{}\n")
            with pytest.raises(OutputError, match="report.json: no space left on the device"):
                folder.write_bytes("report.json", b"x" * 200_000)
            assert (disk / "out" / "report.json").read_text() == "{}\n"  # the old one, whole
            assert [p.name for p in (disk / "out").iterdir() if p.name.endswith(".tmp")] == []
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_a_read_only_output_folder_is_refused_before_any_work(tmp_path: Path) -> None:
    disk = tmp_path / "ro"
    if not _mount_tmpfs(disk, "size=64k,ro"):
        pytest.skip("needs root to mount a read-only tmpfs")
    try:
        result = _cli(tmp_path, GOOD_MODEL + "def get_inputs():\n    return (torch.ones(2),)\n", out=disk)
        assert result.exit_code == 2 and "the file system is read-only" in result.output
        assert "Traceback" not in result.output
    finally:
        subprocess.run(["umount", str(disk)], check=False)


# -- 9: honest repros ----------------------------------------------------------------------------


def test_user_named_text_cannot_break_out_of_the_repros_comments() -> None:
    hostile = "model.py\nimport os; os.system('echo pwned')\u2028#"
    spec = ReproSpec(title=f"aten.relu.default in {hostile}", finding=(("model", hostile), ("source", hostile)),
                     forward_code="def forward(self, x):\n    return (x,)", input_names=("x",), output_names=("x",),
                     inputs_blob=b"", inductor_config=(), unrenderable_config=(f"key{hostile}",),
                     environment=(("platform", hostile),), notes=(f"note {hostile}",))
    script = render(spec).script
    compile(script, "repro.py", "exec")
    assert not [line for line in script.splitlines() if line.startswith("import os; os.system")]
    assert "model.py\\nimport os; os.system('echo pwned')\\u2028#" in script


# -- 11, 12, 13: nothing checked is not clean; user errors are exit 2 ------------------------------

CONTRACT_ERRORS = {
    "sys_exit": ("import sys, torch\nsys.exit(0)\ndef get_model():\n    return torch.nn.Tanh()\n"
                 "def get_inputs():\n    return (torch.ones(2),)\n", "called sys.exit(0)"),
    "not_a_tuple": (GOOD_MODEL + "def get_inputs():\n    return torch.ones(2)\n",
                    "get_inputs() must return a tuple of the model's positional arguments, a dict of its keyword "
                    "arguments or an (args, kwargs) pair; it returned a Tensor"),
    "keyword_not_a_name": (GOOD_MODEL + "def get_inputs():\n    return {1: torch.ones(2)}\n",
                           "get_inputs() returned keyword arguments whose names are not identifiers: 1"),
    "no_tensor_output": ("import torch\ndef get_model():\n    return lambda x: {'n': int(x.sum())}\n"
                         "def get_inputs():\n    return (torch.ones(2),)\n", "the model's output holds no tensor"),
    "empty_batches": (GOOD_MODEL + "def get_inputs():\n    return (torch.ones(2),)\ndef get_batches():\n    return []\n",
                      "get_batches() gave no batches: nothing to check"),
    "optimizer_not_an_optimizer": (GOOD_MODEL.replace("torch.nn.Tanh()", "torch.nn.Linear(2, 2)")
                                   + "def get_inputs():\n    return (torch.ones(1, 2),)\n"
                                   "def get_batches():\n    return [(torch.ones(1, 2),)]\n"
                                   "def loss_fn(out):\n    return out.sum()\n"
                                   "def get_optimizer(parameters):\n    return 'sgd'\n",
                                   "get_optimizer(parameters) must return a torch.optim.Optimizer; it returned str"),
    "batch_of_the_wrong_shape": (GOOD_MODEL.replace("torch.nn.Tanh()", "torch.nn.Linear(2, 2)")
                                 + "def get_inputs():\n    return (torch.ones(1, 2),)\n"
                                 "def get_batches():\n    return [(torch.ones(1, 2),), (torch.ones(1, 3),)]\n",
                                 "the model raised on batch 1 ((1, 3) float32)"),
}


@pytest.mark.parametrize("returned", ["{'x': torch.ones(2), 'scale': 3.0}", "((torch.ones(2),), {'scale': 3.0})"])
def test_get_inputs_may_give_keyword_arguments(tmp_path: Path, returned: str) -> None:
    import torch

    from bisect_engine.load.model_file import load_model_spec

    path = tmp_path / "model.py"
    path.write_text("import torch\nclass M(torch.nn.Module):\n    def forward(self, x, scale=1.0):\n"
                    "        return x * scale\ndef get_model():\n    return M()\n"
                    f"def get_inputs():\n    return {returned}\n")
    spec = load_model_spec(path)
    assert len(spec.inputs) == 2 and spec.inputs[1] == 3.0  # keyword arguments travel last, by position
    assert torch.equal(spec.model(*spec.inputs), torch.full((2,), 3.0))  # ... and reach the model by name


@pytest.mark.parametrize("name", sorted(CONTRACT_ERRORS))
def test_user_errors_are_exit_2_with_one_line(tmp_path: Path, name: str) -> None:
    source, message = CONTRACT_ERRORS[name]
    result = _cli(tmp_path, source)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_an_unwritable_inductor_cache_is_a_message_not_a_crash(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.write_text("a file where the cache folder should be")
    (tmp_path / "model.py").write_text(GOOD_MODEL + "def get_inputs():\n    return (torch.ones(2),)\n")
    # A process of its own: Inductor creates its cache folder as it is imported.
    result = subprocess.run([str(BIN / "bisect-accuracy"), "run", "model.py", "--out", "out", "-q"], cwd=tmp_path,
                            capture_output=True, text=True, env=_environment(TORCHINDUCTOR_CACHE_DIR=str(cache)))
    assert result.returncode == 2 and f"Inductor's cache folder {cache} is not writable" in result.stderr
    assert "Traceback" not in result.stderr


NAN_INPUTS = GOOD_MODEL + "def get_inputs():\n    return (torch.tensor([1.0, float('nan'), 3.0]),)\n"
MUTATES_AND_EDITS_SYS_PATH = """\
import sys, torch
sys.path.remove(sys.path[0])  # a model file may edit sys.path as it likes

def scale_in_place(x):
    x.mul_(2)
    return torch.sin(x)

def get_model():
    return scale_in_place

def get_inputs():
    return (torch.linspace(-1, 1, 8),)
"""


def test_nan_in_the_inputs_is_the_inputs_problem_never_the_compilers(tmp_path: Path) -> None:
    result = _cli(tmp_path, NAN_INPUTS, "--stage", "localise")
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["inputs_nonfinite"] == [{"argument": 0, "path": None, "nan": 1, "inf": 0}]
    assert report["nan"]["made_by"] == "input" and report["culprit"] is None, result.output
    assert "the compiler is not at fault" in result.output


def test_a_function_that_writes_to_its_input_is_judged_on_copies(tmp_path: Path) -> None:
    result = _cli(tmp_path, MUTATES_AND_EDITS_SYS_PATH, "--stage", "localise")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out" / "report.json").read_text())["verdict"] == "clean"


# -- processes: signals, script mode, the hook ----------------------------------------------------

SLOW_MODEL = """\
import time, torch
from pathlib import Path

@torch._dynamo.disable
def wait(x):
    Path(__file__).with_name("started").write_text("1")
    time.sleep(120)
    return x

class Model(torch.nn.Module):
    def forward(self, x):
        return wait(torch.tanh(x)) * 2

def get_model():
    return Model()

def get_inputs():
    return (torch.ones(3),)
"""


def _spawn(command: list[str], cwd: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(command, cwd=cwd, env=_environment(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for(path: Path, process: subprocess.Popen[str], limit_s: float = 180) -> None:
    deadline = time.monotonic() + limit_s
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the model never started"
        time.sleep(0.2)


def _session_processes(process: subprocess.Popen[str]) -> list[str]:
    listed = subprocess.run(["ps", "-o", "pid=", "-s", str(process.pid)], capture_output=True, text=True)
    return listed.stdout.split()


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_run_at_once_with_a_report_and_no_child_left(tmp_path: Path, sig: int, code: int) -> None:
    (tmp_path / "model.py").write_text(SLOW_MODEL)
    process = _spawn([str(BIN / "bisect-accuracy"), "run", "model.py", "--out", "out", "-q"], tmp_path)
    _wait_for(tmp_path / "started", process)
    sent = time.monotonic()
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=60)
    assert time.monotonic() - sent < 5, "took too long to stop"
    assert process.returncode == code, stderr
    assert f"interrupted by {signal.Signals(sig).name}" in stderr and "Traceback" not in stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == "interrupted" and report["interrupted"]["signal"] == signal.Signals(sig).name
    assert _session_processes(process) == []


def _script(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "train.py"
    script.write_text("import torch\nf = torch.compile(lambda x: torch.tanh(x) * 2, backend='eager')\n"
                      "print(float(f(torch.ones(3)).sum()))\n" + body)
    return script


def test_the_scripts_own_ctrl_c_stays_its_own(tmp_path: Path) -> None:
    script = _script(tmp_path, "raise KeyboardInterrupt\n")
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=_environment())
    ours = subprocess.run([str(BIN / "bisect-accuracy"), "run", str(script), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=_environment(), timeout=300)
    assert plain.returncode == -signal.SIGINT and ours.returncode == 130
    assert ours.stdout == plain.stdout and ours.stderr.count("KeyboardInterrupt") >= 1
    assert json.loads((tmp_path / "out" / "report.json").read_text())["verdict"] == "interrupted"
    hooked = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                            env=_environment(BISECT_ACCURACY_LEVEL="2", BISECT_ACCURACY_OUT=str(tmp_path / "hook")))
    assert hooked.returncode == plain.returncode  # the hook never changes a program's status


def test_a_script_status_that_collides_with_ours_is_said(tmp_path: Path) -> None:
    script = _script(tmp_path, "import sys\nsys.exit(3)\n")
    ours = subprocess.run([str(BIN / "bisect-accuracy"), "run", str(script), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, env=_environment(), timeout=300)
    assert ours.returncode == 3 and "note: exit status 3 is the script's own" in ours.stderr
    assert json.loads((tmp_path / "out" / "report.json").read_text())["script"]["exit_code_collides"] is True


def test_an_empty_file_checks_nothing_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "empty.py").write_text("")
    ours = subprocess.run([str(BIN / "bisect-accuracy"), "run", str(tmp_path / "empty.py"), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, env=_environment(), timeout=300)
    assert ours.returncode == 2 and "the script compiled nothing" in ours.stderr


CHILD = """\
import torch
def wrong(graph_module, example_inputs):
    return lambda *args: tuple(v + 1 for v in graph_module(*args))
f = torch.compile(lambda x: torch.sin(x) * 3, backend=wrong)
f(torch.ones(4))
"""


def test_a_child_process_keeps_its_own_report(tmp_path: Path) -> None:
    """Environment-variable mode: the parent's clean report never overwrites its child's divergent one,
    and its top-level verdict covers the child."""
    (tmp_path / "child.py").write_text(CHILD)
    parent = _script(tmp_path, f"import subprocess, sys\nsubprocess.run([sys.executable, {str(tmp_path / 'child.py')!r}], check=True)\n")
    run = subprocess.run([sys.executable, str(parent)], capture_output=True, text=True, timeout=300,
                         env=_environment(BISECT_ACCURACY_LEVEL="2", BISECT_ACCURACY_OUT=str(tmp_path / "out")))
    assert run.returncode == 0, run.stderr
    parent_report = json.loads((tmp_path / "out" / "report.json").read_text())
    children = list((tmp_path / "out").glob("pid*/report.json"))
    assert len(children) == 1 and json.loads(children[0].read_text())["verdict"] == "divergent"
    # one top-level verdict covers every process (issue 25 row 9); the parent's own is kept beside it
    assert (parent_report["verdict"], parent_report["script"]["own_verdict"]) == ("divergent", "clean")
    assert [p["verdict"] for p in parent_report["script"]["processes"]] == ["divergent"]


def test_recording_stops_at_its_size_cap_and_says_so(tmp_path: Path) -> None:
    script = _script(tmp_path, "for i in range(20):\n    f(torch.ones(3000) * i)\n")
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                         env=_environment(BISECT_ACCURACY_LEVEL="1", BISECT_ACCURACY_OUT=str(tmp_path / "out"),
                                          BISECT_ACCURACY_CHECK_EVERY="1", BISECT_ACCURACY_MAX_RECORD_MB="0.05"))
    assert run.returncode == 0, run.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    saved = list((tmp_path / "out" / "graphs").glob("*.pt"))
    assert report["script"]["recording_stopped"].startswith("inputs no longer saved after")
    assert 1 <= len(saved) < 20


@pytest.mark.e2e
def test_uninstalling_the_package_removes_the_hook_and_python_keeps_starting(tmp_path: Path) -> None:
    """A throwaway venv: install, install-hook, uninstall; every Python start stays silent."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "click", "tqdm"], check=True, capture_output=True, timeout=600)
    subprocess.run([*pip, "--no-deps", str(ROOT)], check=True, capture_output=True, timeout=600)
    python = str(venv / "bin" / "python")
    installed = subprocess.run([str(venv / "bin" / "bisect-accuracy"), "install-hook"], capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    hook = Path(installed.stdout.rsplit(": ", 1)[1].strip())
    assert hook.exists()
    assert subprocess.run([python, "-c", "pass"], capture_output=True, text=True).stderr == ""
    subprocess.run([python, "-m", "pip", "uninstall", "-y", "-q", "bisect-accuracy"], check=True, capture_output=True)
    assert not hook.exists()
    started = subprocess.run([python, "-c", "print('ok')"], capture_output=True, text=True)
    assert (started.stdout, started.stderr) == ("ok\n", "")
