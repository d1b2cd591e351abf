"""The views in the output folder: what ``report.json`` now carries for them (per-node errors,
sources, the culprit's device and differences), ``write_outputs`` writing ``report.html`` and
``bug_report.md``, and ``bisect-accuracy report OUT`` re-rendering them."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from bisect_engine.load.capture import capture
from bisect_engine.load.model_file import ModelSpec
from bisect_engine.localise.options import EngineOptions
from bisect_engine.localise.pipeline import RunResult, run_captured
from bisect_engine.output.folder import OutputFolder
from bisect_engine.output.report import build_report
from bisect_engine.output.summary import summary
from bisect_engine.output.writer import OutputOptions, write_outputs
from bisect_engine.progress import Progress
from conftest import stub_versions
from fakes import FakeCompiler, kernel
from report_fixtures import FIXTURES


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(8)
        self.up = torch.nn.Linear(8, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(torch.relu(self.up(self.norm(x))))


@pytest.fixture(scope="module")
def spec_and_graphs() -> tuple[ModelSpec, list[Any]]:
    torch.manual_seed(0)
    model = Block().eval()
    spec = ModelSpec(Path("block.py"), model, (torch.randn(4, 8),), None, None)
    with torch.no_grad():
        graphs, _ = capture(spec.model, spec.inputs)
    return spec, graphs


def _run(spec_and_graphs: tuple[ModelSpec, list[Any]], faulty: str | None) -> RunResult:
    spec, graphs = spec_and_graphs
    relu = next(n for n in graphs[0].graph_module.graph.nodes if n.target is torch.ops.aten.relu.default)
    compiler = FakeCompiler((faulty or "nothing",), kernel(relu) if faulty else None)
    return run_captured(spec, graphs, EngineOptions(stop_after="subsystem"), Progress(enabled=False), compiler=compiler)


def test_every_judged_value_carries_its_error_and_source(spec_and_graphs) -> None:
    report = build_report(_run(spec_and_graphs, "relu"))
    digests = report["graphs"][0]["digests"]
    assert all(d["error"]["scope"] == "node" and d["source"].startswith("test_report_views.py:") for d in digests)
    relu = next(d for d in digests if d["op"] == "aten.relu.default")
    assert relu["error"]["outcome"] == "mismatch" and relu["error"]["compiled_rms_ulps"] > 1e5
    layer_norm = [d for d in digests if d["op"] == "aten.native_layer_norm.default"]
    assert layer_norm and all(d["producer"] == "native_layer_norm" != d["node"] for d in layer_norm)
    culprit = report["culprit"]
    assert culprit["device"] == "cpu" and culprit["error"]["max_abs_diff"] == 1.0  # the fake adds 1
    assert "max_rel_diff" in culprit["error"]


def test_a_clean_graph_carries_the_errors_of_its_outputs_only(spec_and_graphs) -> None:
    digests = build_report(_run(spec_and_graphs, None))["graphs"][0]["digests"]
    judged = [d for d in digests if "error" in d]
    assert judged and all(d["error"]["scope"] == "graph" for d in judged) and len(judged) < len(digests)


def test_write_outputs_writes_the_page_and_the_issue_and_the_summary_points_to_them(spec_and_graphs, tmp_path,
                                                                                    monkeypatch) -> None:
    stub_versions(monkeypatch, "PyTorch version: test")
    with OutputFolder(tmp_path) as folder:
        report = write_outputs(_run(spec_and_graphs, "relu"), OutputOptions(tmp_path, verify_runs=0), folder)
    assert report["html_path"] == str(tmp_path / "report.html") and (tmp_path / "report.html").is_file()
    assert report["bug_report_path"] == str(tmp_path / "bug_report.md")
    issue = (tmp_path / "bug_report.md").read_text()
    assert "PyTorch version: test" in issue and "class Repro" in issue
    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert on_disk["versions"] == "PyTorch version: test" and on_disk["html_path"] == report["html_path"]
    assert summary(report).splitlines()[-2:] == [f"  html:    {tmp_path / 'report.html'}",
                                                 f"  issue:   {tmp_path / 'bug_report.md'}  (a GitHub issue body)"]
    with OutputFolder(tmp_path) as folder:
        clean = write_outputs(_run(spec_and_graphs, None), OutputOptions(tmp_path, verify_runs=0), folder)
    assert "bug_report_path" not in clean and not (tmp_path / "bug_report.md").exists()  # not the last run's
    assert (tmp_path / "previous" / "1" / "bug_report.md").exists()  # the last run's, kept
    assert "CLEAN" in (tmp_path / "report.html").read_text()


def _report_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bisect_engine.cli", "report", *args],
                          capture_output=True, text=True, timeout=120)


def test_the_report_command_re_renders_a_folder_and_leaves_report_json_alone(tmp_path: Path) -> None:
    source = (FIXTURES / "report_divergent.json").read_text()
    (tmp_path / "report.json").write_text(source)
    result = _report_cli(str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"bisect-accuracy: wrote {tmp_path / 'report.html'}",
                                          f"bisect-accuracy: wrote {tmp_path / 'bug_report.md'}"]
    assert "Inductor computes aten.relu.default wrong" in (tmp_path / "report.html").read_text()
    assert (tmp_path / "report.json").read_text() == source


@pytest.mark.parametrize(("content", "message"), [
    (None, "report.json does not exist"),
    ("{not json", "is not a readable JSON report"),
    ('{"verdict": "clean"}', "is not a bisect-accuracy report"),
    ("[1, 2]", "is not a bisect-accuracy report"),
])
def test_the_report_command_exits_2_on_a_folder_without_a_report(tmp_path: Path, content: str | None,
                                                                 message: str) -> None:
    if content is not None:
        (tmp_path / "report.json").write_text(content)
    result = _report_cli(str(tmp_path))
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "report.html").exists()


def test_the_report_command_exits_2_on_a_missing_folder(tmp_path: Path) -> None:
    result = _report_cli(str(tmp_path / "nowhere"))
    assert result.returncode == 2 and result.stderr.strip() == f"bisect-accuracy: error: no such output folder: {tmp_path / 'nowhere'}"


def test_inputs_that_feed_nan_absolve_the_compiler_only_without_a_compiler_culprit() -> None:
    """One report, one story: eager's NaN from the inputs beside a compiler culprit (compiled turns
    a floor-division of inf into NaN) is no 'the compiler is not at fault'."""
    from bisect_engine.output.summary import nan_lines

    nan = {"made_by": "input", "inputs": [{"input": "arg0_1", "nan": 0, "inf": 2}], "eager": None, "compiled": None}
    alone = "\n".join(nan_lines({"nan": nan, "culprit": None}))
    assert "the compiler is not at fault" in alone
    beside = "\n".join(nan_lines({"nan": nan, "culprit": {"made_by": "compiler", "op": "aten.div.Tensor_mode"}}))
    assert "not at fault" not in beside and "eager's NaN/Inf come from the inputs: arg0_1" in beside


def test_a_not_reproducible_report_says_which_cause_from_what_the_run_recorded() -> None:
    """Issue 37 item 1: the program's compiled result differs and no op is found: which cause, from
    the diverging call's output, the graphs judged alone and a cache hit; never for other verdicts."""
    from bisect_engine.output.summary import verdict_lines
    from bisect_engine.output.wording import not_reproducible_cause

    graphs = [{"name": "forward_0", "kind": "forward", "whole": "match"},
              {"name": "backward_0", "kind": "backward", "whole": "match"}]
    gradient = {"graph": "graph_0", "graph_call": 1, "output": "gradient of input 0 (L_x_)", "reason": "rms"}
    report = {"verdict": "not_reproducible", "graphs": graphs, "script": {"first_divergence_call": gradient}}
    cause = not_reproducible_cause(report)
    assert cause is not None and cause["cause"] == "backward_together"
    assert "gradient of input 0" in cause["evidence"] and "backward_0: match" in cause["evidence"]
    assert not_reproducible_cause({**report, "graphs": graphs[:1]})["cause"] == "backward_not_reached"
    assert not_reproducible_cause(report, served_from_cache=True)["cause"] == "stale_cache"
    output = {**gradient, "output": "output 0"}
    assert not_reproducible_cause({**report, "script": {"first_divergence_call": output}})["cause"] == "recapture_matches"
    assert not_reproducible_cause({"verdict": "not_reproducible", "graphs": graphs,
                                   "model_level": "mismatch"})["cause"] == "model_level_only"
    assert not_reproducible_cause({**report, "verdict": "clean"}) is None
    lines = verdict_lines({**report, "not_reproducible_cause": cause})
    assert any(line.strip().startswith("cause:   backward_together") for line in lines)
