"""The CLI's contract for bad input: a clear message, exit status 2, no traceback, no output."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def _run(tmp_path: Path, source: str | None, *extra: str) -> subprocess.CompletedProcess[str]:
    model = tmp_path / "model.py"
    if source is not None:
        model.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "bisect_engine.cli", "run", str(model), "--out", str(tmp_path / "out"), "-q", *extra],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )


def _in_process(tmp_path: Path, source: str | None, *extra: str) -> subprocess.CompletedProcess[str]:
    """The same command in this process (click's runner): a refusal that ends before any compile
    needs no interpreter of its own (each took ~6 CPU-seconds to import torch); the supervisor, the
    console script's exit and a traceback's absence at process level are tested by the subprocess
    runs around it (``_run``)."""
    from click.testing import CliRunner

    from bisect_engine.cli import main

    model = tmp_path / "model.py"
    if source is not None:
        model.write_text(source)
    result = CliRunner().invoke(main, ["run", str(model), "--out", str(tmp_path / "out"), "-q", *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return subprocess.CompletedProcess(["bisect-accuracy"], result.exit_code, result.stdout, result.stderr)


def torch_has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


GOOD_INPUTS = "import torch\ndef get_inputs():\n    return (torch.ones(3),)\n"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (None, "no such model file"),
        ("import torch\ndef get_model():\n    return torch.nn.ReLU()\n", "must define get_inputs()"),
        ("def get_model():\n    pass\nraise ValueError('broken import')\n",
         "importing model.py raised ValueError: broken import"),
        (GOOD_INPUTS + "def get_model():\n    raise RuntimeError('no weights')\n", "get_model() raised RuntimeError: no weights"),
        (GOOD_INPUTS + "def get_model():\n    return 3\n", "not a module or callable"),
        (GOOD_INPUTS + "def get_model():\n    def f(x):\n        raise KeyError('boom')\n    return f\n",
         "the model raised while being captured"),
        (GOOD_INPUTS + "def get_model():\n    return torch.nn.Identity()\ndef loss_fn(out):\n    return out\n",
         "loss_fn(output) must return a scalar tensor"),
    ],
)
def test_bad_input_exits_2_with_a_message_and_no_traceback(tmp_path: Path, source: str | None, message: str) -> None:
    result = _in_process(tmp_path, source)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


def test_bad_options_are_usage_errors(tmp_path: Path) -> None:
    result = _run(tmp_path, GOOD_INPUTS + "def get_model():\n    return torch.nn.ReLU()\n", "--stage", "nowhere")
    assert result.returncode == 2 and "Invalid value for '--stage'" in result.stderr


@pytest.mark.parametrize(
    ("device", "message"),
    [("nowhere", "--device nowhere: not a torch device"),
     ("meta" if torch_has_cuda() else "cuda", "device is available here")],
)
def test_a_device_that_cannot_run_the_model_is_a_usage_error(tmp_path: Path, device: str, message: str) -> None:
    result = _in_process(tmp_path, GOOD_INPUTS + "def get_model():\n    return torch.nn.ReLU()\n", "--device", device)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "out").exists()


def test_help_documents_the_stages(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "bisect_engine.cli", "run", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    for word in ("--stage", "localise", "subsystem", "--rng", "--max-compiles", "--timeout", "--out"):
        assert word in result.stdout


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all", reason="a real CLI run (make test's time): "
                    "test_pipeline's test_max_compiles_caps_every_stage_and_the_report_says_which covers the cut, "
                    "the report and the summary line in process")
def test_an_exhausted_compile_budget_is_reported_not_hidden(tmp_path: Path) -> None:
    case = Path(__file__).resolve().parents[1] / "repro_cases" / "fused_pattern_pass.py"
    result = subprocess.run(
        [sys.executable, "-m", "bisect_engine.cli", "run", str(case), "--out", str(tmp_path / "out"), "-q",
         "--max-compiles", "3", "--verify-runs", "0"],
        capture_output=True, text=True, cwd=tmp_path, timeout=600,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == "divergent" and report["culprit"] is None
    assert report["budget"].startswith("--max-compiles 3 reached") and report["stats"]["compiles"] <= 3
    assert "search stopped: --max-compiles 3 reached" in result.stdout


@pytest.mark.parametrize(("options", "named"), [
    (["--oracle", "strict"], "--oracle is for model files"),
    (["--rng", "strict"], "--rng is for model files"),
    (["--seed", "7"], "--seed is for model files"),
    (["--random-inputs"], "--random-inputs is for model files"),
    (["--workers", "2"], "--workers is for model files"),
    (["--oracle", "eager"], "--oracle is for model files"),
    # --oracle bitwise is honoured in script mode: only --seed is named
    (["--oracle", "bitwise", "--seed", "1"], "error: --seed is for model files"),
])
def test_script_mode_refuses_the_options_it_does_not_honour(tmp_path: Path, options: list[str], named: str) -> None:
    """Script mode judges each compiled call by its own rule: an option it would ignore is refused
    (exit 2, one line, the script never runs), never dropped silently."""
    marker = tmp_path / "ran"
    result = _run(tmp_path, f"open({str(marker)!r}, 'w').write('x')\n", *options)
    assert result.returncode == 2, result.stdout + result.stderr
    assert named in result.stderr and "Traceback" not in result.stderr
    assert not marker.exists()


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all", reason="a CLI process that imports torch: "
                    "BISECT_CORPUS=all; test_determinism's test_a_scripts_graphs_are_asked_the_question_as_a_model_files_are "
                    "covers the path")
def test_script_mode_asks_the_determinism_question_of_the_graphs_the_script_compiles(tmp_path: Path) -> None:
    """``--question determinism`` runs the script (once, its graphs captured): one that compiles
    nothing is told so (exit 2, one line), never called clean."""
    marker = tmp_path / "ran"
    result = _run(tmp_path, f"open({str(marker)!r}, 'w').write('x')\n", "--question", "determinism")
    assert result.returncode == 2, result.stdout + result.stderr
    assert marker.exists() and "compiled nothing" in result.stderr and "Traceback" not in result.stderr


def test_script_mode_takes_those_options_at_their_defaults(tmp_path: Path) -> None:
    """Typing a default value is still typing it: only the absence of the option passes."""
    marker = tmp_path / "ran"
    result = _run(tmp_path, f"open({str(marker)!r}, 'w').write('x')\n")
    assert marker.exists(), result.stderr  # the script ran (it compiled nothing: its own message, exit 2)
    assert "is for model files" not in result.stderr
