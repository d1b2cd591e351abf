"""Many model files in one command (``bisect_engine.many``): a folder or a list of model files, one
run per model in its own process, one table, ``OUT/summary.json``, the worst status; the local pool
and Ray's local mode give the same verdicts as one run each."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import Job, background_result, fixtures_read, seeded_cache_dir, suite_tempdir

from bisect_engine.errors import UsageError
from bisect_engine.many import ModelRun, exit_code, model_files, out_names, table

CLEAN = ("import torch\n\ndef get_model():\n    return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())\n\n"
         "def get_inputs():\n    torch.manual_seed(0)\n    return (torch.randn(4, 8),)\n")
PLANTED = ("import torch._inductor.config as inductor_config\n"
           "inductor_config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'\n" + CLEAN)
BROKEN = "def get_model():\n    raise RuntimeError('no weights')\n\ndef get_inputs():\n    return ()\n"


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(seeded_cache_dir(suite_tempdir("many-cache-")))}
    return subprocess.run([sys.executable, "-m", "bisect_engine.cli", "run", *args], capture_output=True, text=True,
                          cwd=cwd, env=environment, timeout=900)


def _folder(factory: pytest.TempPathFactory) -> Path:
    root = factory.mktemp("models")
    (root / "a_clean.py").write_text(CLEAN)
    (root / "b_relu.py").write_text(PLANTED)
    (root / "c_broken.py").write_text(BROKEN)
    (root / "helper_script.py").write_text("print('not a model')\n")
    return root


_FOLDERS: dict[str, Path] = {}
_FOLDER_LOCK = threading.Lock()


def _models(factory: pytest.TempPathFactory) -> Path:
    """The models' folder, made once (by the background run or the first test that reads it)."""
    with _FOLDER_LOCK:
        if "models" not in _FOLDERS:
            _FOLDERS["models"] = _folder(factory)
        return _FOLDERS["models"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _models(tmp_path_factory)


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


def _many(folder: Path, out: Path, executor: str) -> tuple[subprocess.CompletedProcess[str], dict[str, dict]]:
    result = _run([str(folder), "--out", str(out), "--stage", "localise", "--executor", executor,
                   *(["--jobs", "2"] if executor == "local" else [])], folder)
    summary = json.loads((out / "summary.json").read_text())
    return result, {Path(m["model"]).stem: m for m in summary["models"]}


def _local(factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict[str, dict]]:
    return _many(_models(factory), factory.mktemp("local") / "many", "local")


def background_jobs(session: pytest.Session) -> list[Job]:
    """The local pool's run of the folder, in the background pool beside the in-process tests
    (tests/conftest.py), where a test of this file reads it."""
    if "many_local" not in fixtures_read(session, sys.modules[__name__]):
        return []
    factory = session.config._tmp_path_factory  # type: ignore[attr-defined]
    return [Job("many:local", 60.0, lambda: _local(factory))]


@pytest.fixture(scope="module")
def many_local(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict[str, dict]]:
    """The folder on the local pool: each model a `bisect-accuracy run` process of its own."""
    return background_result("many:local", lambda: _local(tmp_path_factory))


@pytest.mark.e2e
def test_a_folder_gives_one_verdict_per_model_and_the_worst_status(
        many_local: tuple[subprocess.CompletedProcess[str], dict[str, dict]]) -> None:
    result, rows = many_local
    assert result.returncode == 1, result.stdout + result.stderr  # a finding outranks the refused file
    assert list(rows) == ["a_clean", "b_relu", "c_broken"]
    assert rows["b_relu"]["op"] == "aten.relu.default" and rows["b_relu"]["exit_code"] == 1
    assert rows["a_clean"]["verdict"] == "clean" and rows["b_relu"]["verdict"] == "divergent"
    assert rows["c_broken"]["verdict"] is None and rows["c_broken"]["exit_code"] == 2
    assert "get_model() raised RuntimeError" in rows["c_broken"]["message"]
    assert "3 model(s): 1 with a finding, 1 clean, 1 other" in result.stdout
    for name in ("a_clean", "b_relu"):  # each row is its own run's report
        report = json.loads((Path(rows[name]["out_dir"]) / "report.json").read_text())
        assert report["verdict"] == rows[name]["verdict"]


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all",
                    reason="BISECT_CORPUS=all: Ray's local cluster and three runs as tasks take about 130 s of make "
                           "test's 15 minutes on 2 cores; the local pool's test covers `many` beside it")
def test_ray_tasks_give_the_local_pools_verdicts(folder: Path, tmp_path: Path,
                                                 many_local: tuple[subprocess.CompletedProcess[str], dict[str, dict]]) -> None:
    pytest.importorskip("ray")
    result, rows = _many(folder, tmp_path / "many", "ray")
    assert result.returncode == many_local[0].returncode, result.stdout + result.stderr
    keys = ("verdict", "op", "exit_code")
    assert {n: tuple(r[k] for k in keys) for n, r in rows.items()} == {n: tuple(r[k] for k in keys) for n, r in many_local[1].items()}


def test_many_model_options_are_refused_for_one_model(folder: Path, tmp_path: Path) -> None:
    result = _run([str(folder / "a_clean.py"), "--out", str(tmp_path / "o"), "--jobs", "2"], folder)
    assert result.returncode == 2 and "--jobs is for several model files or a folder" in result.stderr


def test_an_out_summary_not_ours_is_refused(folder: Path, tmp_path: Path) -> None:
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "summary.json").write_text('{"mine": true}')
    result = _run([str(folder), "--out", str(tmp_path / "o")], folder)
    assert result.returncode == 2 and "was not written by bisect-accuracy" in result.stderr
    assert (tmp_path / "o" / "summary.json").read_text() == '{"mine": true}'


@pytest.mark.parametrize(("jobs", "users", "seen"), [(2, None, "PASSIVE"), (2, "ACTIVE", "ACTIVE"), (1, None, None)])
def test_runs_at_once_let_openmp_threads_sleep_while_they_wait_unless_the_user_says(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, jobs: int, users: str | None, seen: str | None) -> None:
    """Several of our processes at once spin on each other's cores (benchmarks/omp_waits.py); one at a
    time keeps OpenMP's default, which is faster alone."""
    import bisect_engine.many as many

    if users is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", users)
    policies: list[str | None] = []

    def run(command: list[str], env: dict[str, str] | None = None, **_: object) -> subprocess.CompletedProcess[str]:
        policies.append((env if env is not None else os.environ).get("OMP_WAIT_POLICY"))
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(many.subprocess, "run", run)
    many.local_executor(jobs)([(str(tmp_path / "a.py"), str(tmp_path / "a")), (str(tmp_path / "b.py"), str(tmp_path / "b"))], [])
    assert policies == [seen, seen]
    assert os.environ.get("OMP_WAIT_POLICY") == users  # this process's own left as it was
