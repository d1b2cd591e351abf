"""Hardening, round 2 (issue 25): one probe per row, each as a user (or an attacker) would meet it.
No Inductor compile: a fake compiler, the folder itself, the CLI up to its first error, or a
script compiled with ``backend='eager'``."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import CliRunner

from bisect_engine.cli import main
from bisect_engine.load.capture import capture
from bisect_engine.load.model_file import ModelSpec
from bisect_engine.localise.options import EngineOptions
from bisect_engine.localise.pipeline import RunResult, run_captured
from bisect_engine.output import integrity, writer
from bisect_engine.output.folder import OutputError, OutputFolder
from bisect_engine.output.repro import Interpreters, ReproCheck
from bisect_engine.output.writer import OutputOptions, write_outputs
from bisect_engine.progress import Progress
from conftest import stub_versions
from fakes import FakeCompiler, kernel
from report_fixtures import FIXTURES

ROOT = Path(__file__).resolve().parents[1]


def _environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A process that starts the hook as the installed .pth would (a sitecustomize on its path)."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text("import bisect_engine.autostart\n")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BISECT_ACCURACY_")}
    return {**environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": f"{site}{os.pathsep}{ROOT}", **extra}


def _cli(tmp_path: Path, source: str, *extra: str) -> Any:
    model = tmp_path / "model.py"
    model.write_text(source)
    return CliRunner().invoke(main, ["run", str(model), "--out", str(tmp_path / "out"), "-q", "--verify-runs", "0",
                                     *extra])


class Block(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(torch.relu(x * 2))


def _run(inputs: tuple[Any, ...], faulty: bool) -> RunResult:
    spec = ModelSpec(Path("block.py"), Block(), inputs, None, None)
    with torch.no_grad():
        graphs, _ = capture(spec.model, spec.inputs)
    relu = next(n for n in graphs[0].graph_module.graph.nodes if n.target is torch.ops.aten.relu.default)
    compiler = FakeCompiler(("relu",) if faulty else ("nothing",), kernel(relu) if faulty else None)
    return run_captured(spec, graphs, EngineOptions(stop_after="subsystem"), Progress(enabled=False), compiler=compiler)


# -- 1, 2: the verified text is the rendered text -------------------------------------------------


def test_1_a_repro_swapped_in_out_is_never_what_gets_verified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[Path, str]] = []
    written = writer.write_repro

    def write_then_swap(rendered: Any, folder: OutputFolder) -> Path:
        path = written(rendered, folder)
        path.write_text("print('repro: REPRODUCED: swapped'); raise SystemExit(1)\n")  # the attacker's text
        return path

    def fake_verify(path: Path, runs: int, **_: Any) -> Any:
        seen.append((path, path.read_text()))
        return ReproCheck(str(path), "REPRODUCED", ({"outcome": "reproduced"},))

    monkeypatch.setattr(writer, "write_repro", write_then_swap)
    monkeypatch.setattr(writer, "verify_repro", fake_verify)
    stub_versions(monkeypatch, "test")
    with OutputFolder(tmp_path / "out") as folder:
        report = write_outputs(_run((torch.randn(4, 8),), True), OutputOptions(tmp_path / "out", verify_runs=1), folder)
    [(path, text)] = seen
    assert tmp_path / "out" not in path.parents and "swapped" not in text and "class Repro" in text
    assert report["repro"]["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert report["repro"]["path"] == str(tmp_path / "out" / "repro.py")
    assert not path.exists()  # the private copy is removed
    assert integrity.repro_edited(report, tmp_path / "out")  # the swapped file no longer matches


def test_2_the_report_command_says_when_repro_py_was_edited(tmp_path: Path) -> None:
    report = json.loads((FIXTURES / "report_divergent.json").read_text())
    text = "print('the verified repro')\n"
    report["repro"].update(path=str(tmp_path / "repro.py"), sha256=hashlib.sha256(text.encode()).hexdigest())
    (tmp_path / "report.json").write_text(json.dumps(report))
    (tmp_path / "repro.py").write_text(text)
    same = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert same.exit_code == 0 and "edited" not in same.output
    assert "REPRODUCED" in (tmp_path / "report.html").read_text()
    (tmp_path / "repro.py").write_text(text + "print('edited by hand')\n")
    edited = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert edited.exit_code == 0 and "edited after verification (hash differs)" in edited.output
    page, issue = (tmp_path / "report.html").read_text(), (tmp_path / "bug_report.md").read_text()
    assert "REPRODUCED" not in page and "edited after verification (hash differs)" in page
    assert "verified in fresh processes" not in issue


# -- 4: NaN in the inputs ----------------------------------------------------------------------


def test_4_nan_in_the_inputs_is_exit_2_and_no_inductor_bug_report(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from bisect_engine.cli import model_file_status

    stub_versions(monkeypatch, "test")
    inputs = (torch.tensor([[1.0, float("nan"), 3.0]]),)
    with OutputFolder(tmp_path / "out") as folder:
        report = write_outputs(_run(inputs, False), OutputOptions(tmp_path / "out", verify_runs=0), folder)
    assert report["verdict"] == "nan" and report["nan"]["made_by"] == "input"
    assert not (tmp_path / "out" / "bug_report.md").exists() and "bug_report_path" not in report
    assert model_file_status(report) == 2


# -- 11, 18: the folder moves only what is ours ----------------------------------------------------


def test_11_a_file_named_previous_is_refused_with_exit_2_and_blocks_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with OutputFolder(out) as folder:
        folder.write_json("report.json", {"verdict": "clean"})
    (out / "previous").write_text("the user's notes\n")
    with pytest.raises(OutputError, match="previous is a file this tool did not write"):
        OutputFolder(out).open()
    result = _cli(tmp_path, "import torch\ndef get_model():\n    return torch.nn.Tanh()\n"
                  "def get_inputs():\n    return (torch.ones(2),)\n")
    assert result.exit_code == 2 and "previous is a file this tool did not write" in result.output, result.output
    assert (out / "previous").read_text() == "the user's notes\n"
    assert not (out / "internal-error.log").exists()
    (out / "previous").unlink()
    OutputFolder(out).open().close()  # nothing left behind blocks the next run


def test_18_force_never_moves_a_folder_the_manifest_does_not_list(tmp_path: Path) -> None:
    (tmp_path / "graphs").mkdir()
    (tmp_path / "graphs" / "__init__.py").write_text("# the user's own package\n")
    (tmp_path / "train.py").write_text("import graphs\n")
    with pytest.raises(OutputError, match=r"graphs/, which this tool did not write .* never moved, even with --force"):
        OutputFolder(tmp_path, force=True).open()
    assert (tmp_path / "graphs" / "__init__.py").exists() and not (tmp_path / "previous").exists()


def test_18_force_moves_a_foreign_file_and_the_summary_does_not_call_it_an_earlier_run(tmp_path: Path) -> None:
    from bisect_engine.output.summary import summary

    (tmp_path / "repro.py").write_text("mine\n")
    with OutputFolder(tmp_path, force=True) as folder:
        report = folder.write_report(json.loads((FIXTURES / "report_clean.json").read_text()))
    text = summary(report)
    assert "earlier run" not in text and "files this tool did not write (repro.py) moved to" in text


# -- 12, 17: environment variables ---------------------------------------------------------------

SCRIPT = "import torch\nf = torch.compile(lambda x: x * 2, backend='eager')\nprint(float(f(torch.ones(2)).sum()))\n"


BAD_VARIABLES = [("BISECT_ACCURACY_VERIFY_RUNS", "nan", "a whole number"),
                 ("BISECT_ACCURACY_CHECK_EVERY", "inf", "a whole number"),
                 ("BISECT_ACCURACY_TIMEOUT", "-inf", "a number"),
                 ("BISECT_ACCURACY_OUT", "AFILE", "a folder")]


@pytest.mark.parametrize(("variable", "value", "accepted"), BAD_VARIABLES)
def test_12_17_a_bad_variable_is_one_line_naming_it_and_what_is_accepted(tmp_path: Path, variable: str, value: str,
                                                                         accepted: str) -> None:
    from bisect_engine.script.levels import settings_from_environment

    (tmp_path / "afile").write_text("not a folder\n")
    value = str(tmp_path / "afile") if value == "AFILE" else value
    with pytest.raises(ValueError) as raised:
        settings_from_environment({"BISECT_ACCURACY_LEVEL": "2", "BISECT_ACCURACY_OUT": str(tmp_path / "out"),
                                   variable: value})
    [line] = str(raised.value).splitlines()
    assert line.startswith(f"{variable}={value!r}: expected {accepted}"), line


def test_12_17_under_the_hook_a_bad_variable_is_that_one_line_and_the_program_runs_as_alone(tmp_path: Path) -> None:
    """The start-up hook's side of the case above, in a process (one variable: the message is the
    settings' own, each checked above)."""
    (tmp_path / "s.py").write_text(SCRIPT)
    environ = _environment(tmp_path, BISECT_ACCURACY_LEVEL="2", BISECT_ACCURACY_OUT=str(tmp_path / "out"))
    run = subprocess.run([sys.executable, str(tmp_path / "s.py")], capture_output=True, text=True, timeout=120,
                         env={**environ, "BISECT_ACCURACY_VERIFY_RUNS": "nan"})
    assert run.returncode == 0 and run.stdout == "4.0\n"  # the program runs as it would alone
    [line] = run.stderr.splitlines()
    assert line.startswith("bisect-accuracy: BISECT_ACCURACY_VERIFY_RUNS='nan': expected a whole number"), line
    assert line.count("bisect-accuracy:") == 1 and "report" not in line


# -- 13: loss_fn raising -------------------------------------------------------------------------


def test_13_a_raising_loss_fn_is_named_not_the_model(tmp_path: Path) -> None:
    result = _cli(tmp_path, "import torch\ndef get_model():\n    return torch.nn.Linear(2, 2)\n"
                  "def get_inputs():\n    return (torch.ones(1, 2),)\n"
                  "def loss_fn(out):\n    raise ValueError('bad loss')\n")
    assert result.exit_code == 2, result.output
    assert "loss_fn(output) raised: ValueError: bad loss" in result.output and "the model raised" not in result.output


# -- 14: verifier interpreters die with the tool; their folder is swept next run -----------------

KILLED_PARENT = """\
import os, sys
from bisect_engine.output.repro import Interpreters, ReproCheck
interpreters = Interpreters(2, preload=())
interpreters.start()
print(interpreters.cwd, *[p.pid for p in interpreters._processes], flush=True)
os.kill(os.getpid(), 9)
"""


def test_14_verifiers_die_with_a_killed_tool_and_its_folder_is_swept(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-c", KILLED_PARENT], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == -signal.SIGKILL
    cwd, *pids = run.stdout.split()
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() and "Z" not in _state(pid) for pid in pids):
        assert time.monotonic() < deadline, "a verifier outlived the tool"
        time.sleep(0.1)
    assert Path(cwd).is_dir()  # left by the kill -9
    assert cwd in integrity.sweep_stale_folders()
    assert not Path(cwd).exists()


def _state(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_14_a_live_runs_folder_is_never_swept(tmp_path: Path) -> None:
    interpreters = Interpreters(0)
    try:
        assert interpreters.cwd not in integrity.sweep_stale_folders() and Path(interpreters.cwd).is_dir()
    finally:
        interpreters.close()


# -- 16: the script's own exit 3 -----------------------------------------------------------------


def test_16_a_scripts_own_exit_3_is_kept_apart_from_ours(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text(SCRIPT + "import sys\nsys.exit(3)\n")
    run = subprocess.run([sys.executable, "-m", "bisect_engine.cli", "run", str(tmp_path / "s.py"), "--out",
                          str(tmp_path / "out"), "-q"], capture_output=True, text=True, timeout=120,
                         env=_environment(tmp_path))
    assert run.returncode == 3
    assert "script.internal_error is null: this tool did not fail" in run.stderr
    script = json.loads((tmp_path / "out" / "report.json").read_text())["script"]
    assert script["exit_code"] == 3 and script["internal_error"] is None and script["exit_code_collides"] is True
    assert not (tmp_path / "out" / "internal-error.log").exists()


# -- 5: Ctrl-C while torch imports -----------------------------------------------------------------

SLOW_TORCH = "import time\nfrom pathlib import Path\nPath(__file__).parents[1].joinpath('importing').write_text('1')\ntime.sleep(60)\n"


def test_5_ctrl_c_while_torch_imports_is_exit_130(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(SLOW_TORCH)  # torch's import, held open
    (tmp_path / "model.py").write_text("import torch\ndef get_model():\n    return None\ndef get_inputs():\n    return ()\n")
    process = subprocess.Popen([sys.executable, "-m", "bisect_engine.cli", "run", "model.py", "--out", "out", "-q"],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**_environment(tmp_path), "PYTHONPATH": f"{fake}{os.pathsep}{ROOT}"},
                               # as a terminal starts it: a background job of a script inherits SIGINT ignored
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 30
    while not (fake / "importing").exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "bisect-accuracy: interrupted" in stderr and "Aborted!" not in stderr and "Traceback" not in stderr


# -- 19: a full disk at the very end ---------------------------------------------------------------


class FullDisk(OutputFolder):
    full = False

    def write_bytes(self, name: str, data: bytes) -> Path:
        if self.full and not name.startswith(".bisect-accuracy"):
            raise OutputError(f"cannot write {self.path / name}: no space left on the device")
        return super().write_bytes(name, data)


def test_19_a_full_disk_at_the_end_still_prints_the_verdict_and_what_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import bisect_engine.api
    from bisect_engine import cli

    stub_versions(monkeypatch, "test")
    result = _run((torch.randn(4, 8),), True)
    with FullDisk(tmp_path / "out") as folder:
        folder.full = True
        report = write_outputs(result, OutputOptions(tmp_path / "out", verify_runs=0), folder)
    assert report["verdict"] == "divergent" and report["culprit"]["op"] == "aten.relu.default"
    assert any("report.json: no space left on the device" in reason for reason in report["not_written"])
    monkeypatch.setattr(bisect_engine.api, "bisect_file", lambda *_args, **_kw: report)
    status = cli._run_model_file(tmp_path / "m.py", EngineOptions(), OutputOptions(tmp_path / "out"), True)
    printed = capsys.readouterr().out
    assert status == 1 and "aten.relu.default" in printed
    assert "NOT WRITTEN: cannot write" in printed and "no space left on the device" in printed


# -- 15: report.json has one key set on every exit path, published as a JSON Schema ---------------


def _schema() -> dict[str, Any]:
    from bisect_engine.output.folder import SCHEMA_PATH

    return json.loads(SCHEMA_PATH.read_text())


def _on_disk(out: Path) -> dict[str, Any]:
    import jsonschema

    report = json.loads((out / "report.json").read_text())
    jsonschema.validate(report, _schema())
    return report


def test_15_every_exit_path_writes_the_same_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bisect_engine.api
    from bisect_engine import cli
    from bisect_engine.output.report import bare_report

    stub_versions(monkeypatch, "test")
    reports = {}
    for status, faulty in ((0, False), (1, True)):
        with OutputFolder(tmp_path / str(status)) as folder:
            write_outputs(_run((torch.randn(4, 8),), faulty), OutputOptions(tmp_path / str(status), verify_runs=0), folder)
        reports[status] = _on_disk(tmp_path / str(status))
    for status, verdict in ((4, "incomplete"), (130, "interrupted"), (143, "interrupted")):
        with OutputFolder(tmp_path / str(status)) as folder:
            folder.write_report(bare_report("m.py", verdict))
        reports[status] = _on_disk(tmp_path / str(status))
    (tmp_path / "2").mkdir()
    (tmp_path / "m.py").write_text("import torch\ndef get_model():\n    return torch.nn.Tanh()\n"
                                   "def get_inputs():\n    return torch.ones(2)\n")
    usage = CliRunner().invoke(main, ["run", str(tmp_path / "m.py"), "--out", str(tmp_path / "2"), "-q"])
    assert usage.exit_code == 2
    reports[2] = _on_disk(tmp_path / "2")
    assert reports[2]["verdict"] == "error" and "must return a tuple" in reports[2]["error"]["message"]

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("planted internal fault")

    monkeypatch.setattr(bisect_engine.api, "bisect_file", broken)
    assert cli._run_model_file(tmp_path / "m.py", EngineOptions(), OutputOptions(tmp_path / "3"), True) == 3
    reports[3] = _on_disk(tmp_path / "3")
    assert reports[3]["error"]["kind"] == "internal" and (tmp_path / "3" / "internal-error.log").exists()
    OutputFolder(tmp_path / "3").open().close()  # its log is listed as ours: the next run is not blocked
    required = set(_schema()["required"])
    assert {status: set(r) >= required for status, r in reports.items()} == dict.fromkeys(reports, True)
    assert reports[0]["repro"] is None and reports[4]["culprit"] is None  # absent is null


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("report_*.json")))
def test_15_every_fixture_fits_the_schema(name: str) -> None:
    import jsonschema

    from bisect_engine.output.folder import complete_report

    jsonschema.validate(complete_report(json.loads((FIXTURES / f"{name}.json").read_text())), _schema())


# -- 8: the program ends the run early -------------------------------------------------------------


def test_8_sys_exit_0_in_forward_is_a_report_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()  # a usage error writes its report into an existing folder, never creates one
    result = _cli(tmp_path, "import sys, torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
                  "        sys.exit(0)\ndef get_model():\n    return M()\ndef get_inputs():\n    return (torch.ones(2),)\n")
    assert result.exit_code == 2 and "the model called sys.exit(0) while being run: the run ended early" in result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == "error" and "ended early" in report["error"]["message"]


WRONG_THEN_OS_EXIT = """\
import os, torch
def wrong(gm, example_inputs):
    return lambda *args: tuple(v + 1 for v in gm(*args))
f = torch.compile(lambda x: torch.sin(x) * 3, backend=wrong)
f(torch.ones(4))
os._exit(0)
"""


def test_8_os_exit_0_after_a_divergence_still_reports_it(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text(WRONG_THEN_OS_EXIT)
    run = subprocess.run([sys.executable, "-m", "bisect_engine.cli", "run", str(tmp_path / "s.py"), "--out",
                          str(tmp_path / "out"), "-q", "--level", "2"], capture_output=True, text=True, timeout=120,
                         env=_environment(tmp_path))
    assert run.returncode == 1, run.stderr
    assert "the program ended itself with os._exit(0)" in run.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == "divergent" and report["script"]["ended_early"] == "os._exit(0)"


# -- 10: level 1 with --check-every 1 on a long run --------------------------------------------------


def test_10_saved_inputs_stop_at_a_count_cap_said_in_the_report(tmp_path: Path) -> None:
    (tmp_path / "s.py").write_text(SCRIPT + "for i in range(130):\n    f(torch.ones(2) * i)\n")
    run = subprocess.run([sys.executable, "-m", "bisect_engine.cli", "run", str(tmp_path / "s.py"), "--out",
                          str(tmp_path / "out"), "-q", "--level", "1", "--check-every", "1"],
                         capture_output=True, text=True, timeout=600, env=_environment(tmp_path))  # a hang guard only
    assert run.returncode == 0, run.stderr
    saved = list((tmp_path / "out" / "graphs").glob("*.pt"))
    stopped = json.loads((tmp_path / "out" / "report.json").read_text())["script"]["recording_stopped"]
    assert len(saved) == 100 and "in 100 file(s)" in stopped and "BISECT_ACCURACY_MAX_RECORD_FILES" in stopped


# -- 6: --timeout on a model call that hangs -------------------------------------------------------

HANGING_MODEL = """\
import time, torch

@torch._dynamo.disable
def wait(x):
    time.sleep(300)
    return x

class Model(torch.nn.Module):
    def forward(self, x):
        return wait(torch.tanh(x)) * 2

def get_model():
    return Model()

def get_inputs():
    return (torch.ones(3),)
"""


def test_6_timeout_stops_a_hanging_model_call_with_exit_4_and_names_the_stage(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(HANGING_MODEL)
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "bisect_engine.cli", "run", "model.py", "--out", "out", "-q",
                          "--timeout", "1"], cwd=tmp_path, capture_output=True, text=True, timeout=150,
                         env=_environment(tmp_path))
    assert run.returncode == 4, run.stderr
    # 1 s, the 35 s grace a repro's verification may take, and the start-up; far below the call's 300 s
    # (a bound loose enough for a loaded machine: it still fails when the watchdog never fires)
    assert time.monotonic() - started < 120
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    stage = report["interrupted"]["stage"]
    assert report["interrupted"]["signal"] == "timeout" and stage
    assert f"--timeout reached: a call into the model did not return (stage: {stage})" in run.stderr


# -- 7: huge inputs ------------------------------------------------------------------------------


def test_7_inputs_too_large_for_memory_are_refused_before_the_run(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from bisect_engine.load import memory

    model, inputs = torch.nn.Linear(256, 256), (torch.ones(1024, 256),)  # 1 MiB of input, 256 KiB of weights
    memory.check_memory(model, inputs, available=lambda: 64 * 2**20)  # fits in 64 MiB
    with pytest.raises(memory.UsageError, match=r"parameters, their gradients and its inputs take 0\.00 GiB"):
        memory.check_memory(model, inputs, available=lambda: 2**20)
    monkeypatch.setattr(memory, "available_bytes", lambda: 2**19)  # less than the 1 MiB input alone
    result = _cli(tmp_path, "import torch\ndef get_model():\n    return torch.nn.Tanh()\n"
                  "def get_inputs():\n    return (torch.ones(1024, 256),)\n")
    assert result.exit_code == 2 and "refused before starting" in result.output, result.output
