"""Graphs that only write state (a compiled optimizer step) and the user's compile mode.

Fast layers: lifting ``get_attr`` tensors to inputs; a session checking a compiled optimizer step
through cheap non-Inductor backends (a right one: clean, one step taken; a wrong one: the
parameter named); a call that compares nothing is ``not_checked`` (verdict ``incomplete``); the
``mode=`` / ``options=`` of a user's ``torch.compile`` read back. The end-to-end runs (Inductor,
planted bugs, repro in a fresh process) are the ``e2e`` tests at the bottom.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from conftest import planting_path, seeded_cache_dir
import torch
from torch import nn

from bisect_engine.load.model_file import compiled_options
from bisect_engine.script.call_check import CallVerdict
from bisect_engine.script.levels import Level, ScriptSettings
from bisect_engine.script.session import Session, script_summary
from bisect_engine.verdict.compare import Outcome
from bisect_engine.verdict.inductor_adapter import compiles_routed_through
from bisect_engine.verdict.state import lift_attributes, tensor_attributes

ROOT = Path(__file__).resolve().parents[1]
ADAMW_PLANTED = ROOT / "repro_cases" / "script_adamw_step_sqrt.py"
ADAMW_CLEAN = ROOT / "repro_cases" / "script_adamw_step_clean.py"


class _Holder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> None:
        self.total.add_(x)


def test_lifted_attributes_become_trailing_inputs_and_the_original_is_untouched() -> None:
    graph_module = torch.fx.symbolic_trace(_Holder())
    attributes = tensor_attributes(graph_module)
    assert list(attributes) == ["total"]
    lifted = lift_attributes(graph_module, ["total"])
    state = torch.ones(3)
    lifted(torch.full((3,), 2.0), state)
    assert torch.equal(state, torch.full((3,), 3.0)) and torch.equal(graph_module.total, torch.zeros(3))
    assert [n.op for n in graph_module.graph.nodes].count("get_attr") == 1


@pytest.fixture
def session_factory(tmp_path: Path) -> Iterator[Callable[..., Session]]:
    torch._dynamo.reset()
    yield lambda **kw: Session(ScriptSettings(out_dir=tmp_path / "out", **kw), tmp_path / "script.py", [], "test")
    torch._dynamo.reset()


def _steps(session: Session, backend: Any, steps: int = 2) -> nn.Linear:
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    with compiles_routed_through(session.wrap_backend):
        step = torch.compile(optimizer.step, backend=backend)
        for _ in range(steps):
            optimizer.zero_grad()
            model(torch.ones(2, 4)).square().sum().backward()
            step()
    return model


def _eager_steps(steps: int = 2) -> nn.Linear:
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=True)
    for _ in range(steps):
        optimizer.zero_grad()
        model(torch.ones(2, 4)).square().sum().backward()
        optimizer.step()
    return model


def test_a_compiled_optimizer_step_is_checked_and_taken_once(session_factory: Callable[..., Session]) -> None:
    session = session_factory(level=Level.CHECK, check_every=1)
    model = _steps(session, "aot_eager")
    assert torch.equal(model.weight, _eager_steps().weight)  # no double step: the program's state as eager's
    report = session.finish(0)
    assert report["verdict"] == "clean", report["script"]
    graphs = report["script"]["graphs"]
    assert sum(g["checks"] for g in graphs) >= 1 and all(g["outcome"] == "match" for g in graphs if g["checks"])
    assert any("writes" in note for g in graphs for note in g["notes"]), graphs


def _writes_a_wrong_weight(graph_module: torch.fx.GraphModule, _example_inputs: list[Any]) -> Callable[..., Any]:
    """A wrong compiler: the step's first parameter (the weight) ends off by one."""
    weight = next(t for t in tensor_attributes(graph_module).values() if t.shape == (3, 4))

    def run(*args: Any) -> Any:
        outputs = graph_module(*args)
        with torch.no_grad():
            weight.add_(1)
        return outputs
    return run


def test_a_wrong_optimizer_step_names_the_parameter_it_wrote(session_factory: Callable[..., Session]) -> None:
    session = session_factory(level=Level.CHECK)
    _steps(session, _writes_a_wrong_weight, steps=1)
    first = session.finish(0)["script"]["first_divergence_call"]
    assert first is not None and first["output"].endswith("(parameter weight), written in place"), first


def test_a_call_that_compares_nothing_is_not_checked(session_factory: Callable[..., Session]) -> None:
    session = session_factory(level=Level.CHECK)
    record = session.add_graph(torch.fx.symbolic_trace(_Holder()), "inductor", {})
    session._judged(record, lambda *a: None, CallVerdict(Outcome.MATCH, {}), False, [], [])
    report = session.finish(0)
    assert report["verdict"] == "incomplete" and report["script"]["calls_checked"] == 0
    assert report["script"]["graphs"][0]["outcome"] == "not_checked"
    assert report["script"]["graphs_not_checked"] == ["graph_0"]
    assert "not checked: graph_0" in script_summary({**report, "report_path": "r"})


def test_the_users_compile_mode_and_options_are_read_back() -> None:
    model = nn.Linear(2, 2)
    assert compiled_options(torch.compile(model, mode="max-autotune"))["max_autotune"] is True
    assert compiled_options(torch.compile(model, options={"epilogue_fusion": False})) == {"epilogue_fusion": False}
    assert compiled_options(torch.compile(model)) == {} and compiled_options(None) == {}
    assert compiled_options(torch.compile(model, backend="eager")) == {}


# -- end to end: Inductor, the CLI, the repro ---------------------------------------------------


def _cli(script: Path, out: Path, site: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BISECT_ACCURACY_")}
    env["TORCHINDUCTOR_CACHE_DIR"] = str(seeded_cache_dir(out.parent / "inductor-cache"))
    if site is not None:  # the plant in every fresh process (the repro's verification too)
        env["PYTHONPATH"] = planting_path(script, site, env)
    command = [sys.executable, "-m", "bisect_engine.cli", "run", "--out", str(out), "--verify-runs", "1", "-q",
               str(script), "--steps", "2"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, cwd=out.parent)


@pytest.mark.e2e
def test_a_compiled_adamw_step_with_a_wrong_sqrt_is_found_and_reproduced(tmp_path: Path) -> None:
    run = _cli(ADAMW_PLANTED, tmp_path / "out", tmp_path / "site")
    assert run.returncode == 1, run.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    expected = {"op": "aten._foreach_sqrt.default", "graph": "forward_0", "kind": "node"}
    assert {k: report["culprit"][k] for k in expected} == expected, run.stderr
    assert report["script"]["first_divergence_call"]["output"].endswith("(parameter up.weight), written in place")
    assert report["repro"]["status"] == "REPRODUCED", report["repro"]
    without = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path / "out", capture_output=True, text=True,
                             timeout=600, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                             | {"PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    assert without.returncode == 0, without.stdout + without.stderr  # no plant in that process


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all", reason="SUITE full: BISECT_CORPUS=all runs it")
def test_a_clean_compiled_adamw_step_is_clean_and_stepped_once(tmp_path: Path) -> None:
    run = _cli(ADAMW_CLEAN, tmp_path / "out")
    plain = subprocess.run([sys.executable, str(ADAMW_CLEAN), "--steps", "2"], capture_output=True, text=True,
                           timeout=600)
    assert run.returncode == 0, run.stderr
    assert run.stdout == plain.stdout  # the same losses and the same final weights: one step each
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == "clean" and report["script"]["calls_checked"] >= 1


def test_the_gemm_template_flip_is_tried_only_under_max_autotune() -> None:
    import torch._inductor.config as inductor_config

    from bisect_engine.strategies.subsystems import CONFIG_FLIPS, CONFIG_NOTES, _is_set

    flip = next(s for s in CONFIG_FLIPS if s.name == "max_autotune_gemm_backends")
    assert flip.patch_dict == {"max_autotune_gemm_backends": "ATEN"} and "GEMM template" in CONFIG_NOTES[flip.name]
    with inductor_config.patch(max_autotune=False, max_autotune_gemm=False):
        assert not _is_set(flip)
    with inductor_config.patch(max_autotune=True):
        assert _is_set(flip)
