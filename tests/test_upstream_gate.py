"""The upstream gate on a model file's per-graph headline (issue 36, ``localise/upstream.py``): a
graph's finding made by the ulp rule alone is the verdict only where the program's own outputs (the
model-level check, scope model) fail too. A fake compiler (no Inductor) plants the fault; the model
is captured for real, and the model-level check runs it through ``torch.compile`` with that compiler
(through AOT Autograd, so the fault is planted there too)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from bisect_engine.load.capture import capture
from bisect_engine.load.model_file import ModelSpec
from bisect_engine.localise.options import EngineOptions
from bisect_engine.localise.pipeline import RunResult, run_captured
from bisect_engine.output.report import build_report
from bisect_engine.output.summary import summary
from bisect_engine.progress import Progress
from fakes import FakeCompiler, kernel


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.down(torch.relu(self.up(x))) + x)


@pytest.fixture(scope="module")
def spec() -> ModelSpec:
    torch.manual_seed(0)
    return ModelSpec(Path("block.py"), Block().eval(), (torch.randn(4, 8),), None, None)


@pytest.fixture(scope="module")
def captured(spec: ModelSpec) -> list[Any]:
    with torch.no_grad():
        graphs, _ = capture(spec.model, spec.inputs)
    return graphs


def _relu(captured: list[Any]) -> tuple[Any, ...]:
    graph = captured[0].graph_module.graph
    return kernel(next(n for n in graph.nodes if n.target is torch.ops.aten.relu.default))


def _run(spec: ModelSpec, captured: list[Any], compiler: FakeCompiler, **options: Any) -> tuple[RunResult, dict[str, Any]]:
    result = run_captured(spec, captured, EngineOptions(**options), Progress(enabled=False), compiler=compiler)
    return result, build_report(result)




# relu 2e-4 high: ~1,700 ulps RMS at the op, hundreds at the model's output (beyond the end-to-end
# rule's 4x eager + 64 units), far inside torch._dynamo.utils.same's allclose at tol 1e-3; 3e-6
# high: within the end-to-end rule at the output
@pytest.mark.parametrize("high, reason, words", [
    (2e-4, "upstream_same", "within torch._dynamo.utils.same's tolerance"),
    (3e-6, "end_to_end", "within the end-to-end tolerance")])
def test_a_finding_whose_program_outputs_pass_is_listed_and_the_run_is_clean(spec, captured, high: float,
                                                                              reason: str, words: str) -> None:
    compiler = FakeCompiler(("relu",), _relu(captured), fault=lambda value: value * (1 + high))
    result, report = _run(spec, captured, compiler)
    assert report["verdict"] == "clean" and report["culprit"] is None and report["model_level"] == "match"
    (listed,) = report["within_upstream"]
    assert (listed["op"], listed["graph"], listed["kind"], listed["reason"]) == \
        ("aten.relu.default", "forward_0", "node", reason)
    assert listed["error"]["reason"] in ("rms", "max") and listed["error"]["compiled_rms_ulps"] > 10
    (output,) = listed["program_outputs"]
    assert output["outcome"] == "match" and output["reason"] == ("upstream_same" if reason == "upstream_same" else "")
    assert output["compiled_rms_ulps"] > output["eager_rms_ulps"]  # errors kept, not dropped
    # one model-level compile: the gate's, which the run's model-level check then reuses
    assert compiler.by_stage.get("model_check") == 1
    assert "listed:  aten.relu.default (node relu, graph forward_0) is wrong on its own" in summary(report)
    assert words in summary(report)


def test_a_finding_whose_error_reaches_the_programs_outputs_keeps_its_headline(spec, captured) -> None:
    compiler = FakeCompiler(("relu",), _relu(captured))  # relu + 1
    result, report = _run(spec, captured, compiler, stop_after="localise")
    assert (report["verdict"], report["culprit"]["op"]) == ("divergent", "aten.relu.default")
    assert report["within_upstream"] == [] and report["model_level"] == "mismatch"
    assert compiler.by_stage.get("model_check") == 1


@pytest.mark.parametrize("oracle", ["strict", "eager"])
def test_the_gate_is_off_where_the_user_asked_for_another_judge(spec, captured, oracle: str) -> None:
    compiler = FakeCompiler(("relu",), _relu(captured), fault=lambda value: value * (1 + 2e-5))
    result, report = _run(spec, captured, compiler, stop_after="localise", oracle=oracle)
    assert (report["verdict"], report["culprit"]["op"]) == ("divergent", "aten.relu.default")
    assert report["within_upstream"] == [] and "model_check" not in compiler.by_stage


def test_an_exact_rule_finding_keeps_its_headline_without_asking_the_program(spec, captured) -> None:
    # compiled relu turns every value infinite: a non-finite value is an exact rule, never gated
    compiler = FakeCompiler(("relu",), _relu(captured), fault=lambda value: value / 0.0)
    result, report = _run(spec, captured, compiler, stop_after="localise")
    assert report["verdict"] in ("divergent", "nan") and report["culprit"]["op"] == "aten.relu.default"
    assert report["within_upstream"] == [] and "model_check" not in compiler.by_stage


def test_the_gate_moves_the_graphs_values_to_disk_and_judges_as_with_them_in_memory(spec, captured, monkeypatch,
                                                                                     tmp_path) -> None:
    """The model-level check runs with the run's values moved to memory-mapped files (issue 34):
    every verdict, listing and digest as with them held in memory; the model's parameters not moved."""
    from bisect_engine.localise import run_steps
    from bisect_engine.localise import release as releasing
    from bisect_engine.verdict import offload

    if not offload.scratch_on_disk(str(tmp_path)):
        pytest.skip("the temporary folder is in memory: nothing is moved there")
    compiler = FakeCompiler(("relu",), _relu(captured), fault=lambda value: value * (1 + 2e-4))
    with offload.using(offload.Offload(folder=str(tmp_path))):  # room unknown: nothing moves
        _, held = _run(spec, captured, compiler)
    moved: list[int] = []
    monkeypatch.setattr(offload, "MIN_BYTES", 0)  # this model's values are small: every one moved
    original = releasing.spill_run_values
    for module in (run_steps, releasing):  # the graphs' moves, and the model-level check's (release.room_for_model_check)
        monkeypatch.setattr(module, "spill_run_values",
                            lambda driver, need, **kw: moved.append(original(driver, need, **kw)))
    parameters = [(t, t._version, t.data_ptr()) for t in spec.model.parameters()]
    with offload.using(offload.Offload(room=lambda: 0, folder=str(tmp_path))) as short:  # memory asks at every point
        _, spilled = _run(spec, captured, FakeCompiler(("relu",), _relu(captured), fault=lambda value: value * (1 + 2e-4)))
    assert moved and max(moved) > 0 and short.moved >= sum(moved)  # the gate's move among the graphs' (the first: none)
    assert held["stats"]["offload"]["moved_mb"] == 0 and spilled["stats"]["offload"]["moves"] >= 1
    assert [(t, t._version, t.data_ptr()) for t in spec.model.parameters()] == parameters  # not moved
    for key in ("verdict", "culprit", "model_level", "within_upstream", "graphs", "differences"):
        assert spilled.get(key) == held.get(key), key


def test_the_graphs_judged_after_a_listed_finding_count_as_localisation(tmp_path: Path) -> None:
    """A training step: the forward's relu finding is listed (its program outputs pass), then the
    backward is judged; its compiles are localisation's, not the gate's model-level check's (which
    compiles once)."""
    torch.manual_seed(0)
    spec = ModelSpec(Path("block.py"), Block().train(), (torch.randn(4, 8),), lambda output: output.square().mean(), None)
    graphs, _ = capture(spec.model, spec.inputs, loss_fn=spec.loss_fn)
    compiler = FakeCompiler(("relu",), _relu(graphs), fault=lambda value: value * (1 + 2e-4))
    result, report = _run(spec, graphs, compiler)
    assert report["verdict"] == "clean" and [g["name"] for g in report["graphs"]] == ["forward_0", "backward_0"]
    assert [(f["op"], f["graph"]) for f in report["within_upstream"]] == [("aten.relu.default", "forward_0")]
    assert compiler.by_stage.get("model_check") == 1, dict(compiler.by_stage)
    assert compiler.by_stage.get("localise", 0) >= 2, dict(compiler.by_stage)  # at least one a graph
