"""Many model files in one command (``bisect_engine.many``): a folder or a list of model files, one
run per model in its own process, one table, ``OUT/summary.json``, the worst status; the local pool
and Ray's local mode give the same verdicts as one run each."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from bisect_engine.errors import UsageError
from bisect_engine.many import ModelRun, exit_code, model_files, out_names, table

CLEAN = ("import torch\n\ndef get_model():\n    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())\n\n"
         "def get_inputs():\n    torch.manual_seed(0)\n    return (torch.randn(4, 8),)\n")
PLANTED = ("import torch._inductor.config as inductor_config\n"
           "inductor_config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'\n" + CLEAN)
BROKEN = "def get_model():\n    raise RuntimeError('no weights')\n\ndef get_inputs():\n    return ()\n"


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="many-cache-")}
    return subprocess.run([sys.executable, "-m", "bisect_engine.cli", "run", *args], capture_output=True, text=True,
                          cwd=cwd, env=environment, timeout=900)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    (root / "a_clean.py").write_text(CLEAN)
    (root / "b_relu.py").write_text(PLANTED)
    (root / "c_broken.py").write_text(BROKEN)
    (root / "helper_script.py").write_text("print('not a model')\n")
    return root


def test_a_folder_expands_to_its_model_files_in_order(folder: Path) -> None:
    assert [p.name for p in model_files([folder])] == ["a_clean.py", "b_relu.py", "c_broken.py"]
    assert [p.name for p in model_files([folder / "b_relu.py", folder])] == ["b_relu.py", "a_clean.py", "c_broken.py"]


@pytest.mark.parametrize(("name", "message"), [("helper_script.py", "is a plain script"),
                                               ("missing.py", "no such model file")])
def test_what_is_not_a_model_file_is_refused(folder: Path, name: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        model_files([folder / "a_clean.py", folder / name])


def test_output_names_are_unique(tmp_path: Path) -> None:
    paths = [tmp_path / "x" / "model.py", tmp_path / "y" / "model.py", tmp_path / "y" / "other.py"]
    assert out_names(paths) == ["x__model", "y__model", "other"]


@pytest.mark.parametrize(("codes", "status"), [([0, 0], 0), ([0, 1], 1), ([2, 1], 1), ([4, 0], 4), ([2, 0], 2),
                                               ([3, 1], 3), ([0, 130], 130)])
def test_the_worst_status_wins(codes: list[int], status: int) -> None:
    runs = [ModelRun(f"m{i}.py", "out", code, None, None, None, 1.0, "") for i, code in enumerate(codes)]
    assert exit_code(runs) == status


def test_the_table_names_every_model_and_counts_them() -> None:
    runs = [ModelRun("/m/a.py", "/o/a", 0, "clean", None, 3, 2.0, ""),
            ModelRun("/m/b.py", "/o/b", 1, "divergent", "aten.relu.default", 2, 3.5, ""),
            ModelRun("/m/c.py", "/o/c", 2, None, None, None, 0.5, "bisect-accuracy: error: boom")]
    text = table(runs)
    assert "divergent!" in text and "aten.relu.default" in text and "no report (bisect-accuracy: error: boom)" in text
    assert text.endswith("3 model(s): 1 with a finding, 1 clean, 1 other")


@pytest.fixture(scope="module")
def single(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str | None]:
    """The clean and the planted model, each through a run of its own."""
    out = tmp_path_factory.mktemp("single")
    verdicts = {}
    for name in ("a_clean", "b_relu"):
        _run([str(folder / f"{name}.py"), "--out", str(out / name), "--stage", "localise", "-q"], folder)
        verdicts[name] = json.loads((out / name / "report.json").read_text())["verdict"]
    return verdicts


@pytest.mark.e2e
@pytest.mark.parametrize("executor", ["local", "ray"])
def test_a_folder_gives_the_verdicts_of_one_run_each(folder: Path, single: dict[str, str | None], tmp_path: Path,
                                                     executor: str) -> None:
    if executor == "ray":
        pytest.importorskip("ray")
    result = _run([str(folder), "--out", str(tmp_path / "many"), "--stage", "localise", "--executor", executor,
                   *(["--jobs", "2"] if executor == "local" else [])], folder)
    assert result.returncode == 1, result.stdout + result.stderr  # a finding outranks the refused file
    summary = json.loads((tmp_path / "many" / "summary.json").read_text())
    rows = {Path(m["model"]).stem: m for m in summary["models"]}
    assert list(rows) == ["a_clean", "b_relu", "c_broken"]
    assert rows["b_relu"]["op"] == "aten.relu.default" and rows["b_relu"]["exit_code"] == 1
    assert rows["c_broken"]["verdict"] is None and rows["c_broken"]["exit_code"] == 2
    assert "get_model() raised RuntimeError" in rows["c_broken"]["message"]
    assert {name: rows[name]["verdict"] for name in single} == single == {"a_clean": "clean", "b_relu": "divergent"}
    assert "3 model(s): 1 with a finding, 1 clean, 1 other" in result.stdout


def test_many_model_options_are_refused_for_one_model(folder: Path, tmp_path: Path) -> None:
    result = _run([str(folder / "a_clean.py"), "--out", str(tmp_path / "o"), "--jobs", "2"], folder)
    assert result.returncode == 2 and "--jobs is for several model files or a folder" in result.stderr


def test_an_out_summary_not_ours_is_refused(folder: Path, tmp_path: Path) -> None:
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "summary.json").write_text('{"mine": true}')
    result = _run([str(folder), "--out", str(tmp_path / "o")], folder)
    assert result.returncode == 2 and "was not written by bisect-accuracy" in result.stderr
    assert (tmp_path / "o" / "summary.json").read_text() == '{"mine": true}'
