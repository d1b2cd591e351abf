"""``record`` / ``compare --out`` go through the run's output-folder checks (output/folder.py):
a link is never followed, the user's files are never overwritten (refused, or moved aside with
--force), a folder we did not write is never moved, an earlier bundle is kept in previous/<n>, a
busy folder is refused; ``compare --out`` is never the bundle itself; a plain script that compiles
nothing or fails is one line for ``record`` (exit 2, no folder left). One tiny model (a tanh), in
this process."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bisect_engine.cli import main
from bisect_engine.output.folder import OutputFolder

MODEL = ("import torch\ndef get_model():\n    return torch.nn.Tanh()\n"
         "def get_inputs():\n    torch.manual_seed(0)\n    return (torch.randn(8),)\n")


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _one_line_exit_2(result: Any) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and result.output.strip().count("\n") == 0, result.output
    return str(result.output)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "model.py"
    path.write_text(MODEL)
    return path


@pytest.fixture(scope="module")
def bundle(model: Path) -> Path:
    out = model.parent / "A"
    result = _cli("record", str(model), "--out", str(out))
    assert result.exit_code == 0, result.output
    return out


def test_a_symlinked_manifest_is_refused_and_its_target_never_touched(model: Path, tmp_path: Path) -> None:
    out, outside = tmp_path / "A", tmp_path / "precious.txt"
    out.mkdir()
    outside.write_text("the user's file")
    (out / "manifest.json").symlink_to(outside)
    assert "manifest.json (a symbolic link)" in _one_line_exit_2(_cli("record", str(model), "--out", str(out)))
    assert outside.read_text() == "the user's file" and (out / "manifest.json").is_symlink()


def test_the_users_own_values_file_is_refused_unless_forced_and_then_kept(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "A"
    out.mkdir()
    (out / "values.pt").write_text("my own tensors\n")
    assert "pass --force" in _one_line_exit_2(_cli("record", str(model), "--out", str(out)))
    assert (out / "values.pt").read_text() == "my own tensors\n"
    assert _cli("record", str(model), "--out", str(out), "--force").exit_code == 0
    assert (out / "previous" / "1" / "values.pt").read_text() == "my own tensors\n"
    assert json.loads((out / "manifest.json").read_text())["format_version"] == 1


def test_a_second_record_keeps_the_first_bundle(model: Path, tmp_path: Path) -> None:
    out = tmp_path / "A"
    assert _cli("record", str(model), "--out", str(out)).exit_code == 0
    first = (out / "manifest.json").read_bytes()
    assert _cli("record", str(model), "--out", str(out)).exit_code == 0
    assert (out / "previous" / "1" / "manifest.json").read_bytes() == first
    assert (out / "values.pt").is_file() and (out / "manifest.json").is_file()


def test_a_busy_folder_is_refused(model: Path, tmp_path: Path) -> None:
    with OutputFolder(tmp_path / "A"):
        assert "another bisect-accuracy run" in _one_line_exit_2(_cli("record", str(model), "--out", str(tmp_path / "A")))


def test_compare_out_is_never_the_bundle_itself(bundle: Path) -> None:
    before = {p.name: p.read_bytes() for p in bundle.iterdir() if p.is_file()}
    assert "is the bundle being compared" in _one_line_exit_2(_cli("compare", str(bundle), "--out", str(bundle)))
    assert {p.name: p.read_bytes() for p in bundle.iterdir() if p.is_file()} == before


def test_compare_refuses_a_linked_report_and_a_folder_it_did_not_write(bundle: Path, tmp_path: Path) -> None:
    out, outside = tmp_path / "B", tmp_path / "precious.txt"
    out.mkdir()
    outside.write_text("the user's file")
    (out / "comparison.json").symlink_to(outside)
    assert "comparison.json (a symbolic link)" in _one_line_exit_2(_cli("compare", str(bundle), "--out", str(out)))
    (out / "comparison.json").unlink()
    (out / "bisect").mkdir()
    (out / "bisect" / "mine.py").write_text("the user's code\n")
    assert "never moved" in _one_line_exit_2(_cli("compare", str(bundle), "--out", str(out), "--force"))
    assert outside.read_text() == "the user's file" and (out / "bisect" / "mine.py").read_text() == "the user's code\n"


def test_compare_writes_through_the_folder_and_keeps_an_earlier_comparison(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "B"
    for _ in range(2):
        result = _cli("compare", str(bundle), "--out", str(out))
        assert result.exit_code == 0, result.output
    manifest = json.loads((out / ".bisect-accuracy.json").read_text())
    assert "comparison.json" in manifest["files"]
    assert json.loads((out / "previous" / "1" / "comparison.json").read_text())["changed"] is False


@pytest.mark.parametrize("body, said", [
    ("import torch\ntorch.ones(2).sum()\n", "compiled nothing"),
    ("import torch\nraise ValueError('boom')\n",
     "failed (exit 1: ValueError: boom)"),
])
def test_record_of_a_script_that_compiles_nothing_or_fails_is_one_line(tmp_path: Path, body: str, said: str) -> None:
    script = tmp_path / "train.py"
    script.write_text(body)
    assert said in _one_line_exit_2(_cli("record", str(script), "--out", str(tmp_path / "A")))
    assert not (tmp_path / "A").exists()  # never a silent empty bundle


def test_compare_refuses_a_script_as_the_model_of_a_model_bundle_in_one_line(bundle: Path, tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\nf = torch.compile(torch.tanh)\nprint(f(torch.ones(2)))\n")
    said = _one_line_exit_2(_cli("compare", str(bundle), "--model", str(script), "--out", str(tmp_path / "B")))
    assert "recorded from another model" in said and not (tmp_path / "B").exists()


def test_compare_of_a_script_that_fails_here_compares_the_graphs_it_compiled(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "train.py"
    script.write_text("import os, torch\ntorch.compile(torch.tanh)(torch.ones(3))\n"
                      "if os.environ.get('ENV_B'):\n    raise SystemExit(3)\n")
    assert _cli("record", str(script), "--out", str(tmp_path / "A")).exit_code == 0
    monkeypatch.setenv("ENV_B", "1")
    result = _cli("compare", str(tmp_path / "A"))
    assert result.exit_code == 0, result.output  # its one graph computes as recorded
    assert "failed (exit 3)" in result.output and "graph forward_0: 1 of 1" in result.output
