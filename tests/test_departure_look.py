"""Issue 37 item 5 in script mode (pytorch#185517): a training call whose gradients match (compiled
at least as close to fp64 as eager) yet differ from eager's materially is looked at by the engine
once (``Session._departure_look``), which lists the value the compiled forward computes otherwise
with the gradient it flips. Before, such a call was clean with nothing listed and 0 compiles: only a
call that diverged, or one with a cast the program wrote, reached the engine.

Fast: a backend that computes the bf16 hinge in fp32 (as Inductor's CPU code does) stands in for
Inductor, so nothing compiles; the engine's look itself is ``departures.saved_value_consequence``
(``tests/test_departures.py``), the whole path ``tests/real_reports/issue_185517_*.py`` under
``BISECT_CORPUS=all``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from bisect_engine.script.call_check import check_gradients
from bisect_engine.script.levels import Level, ScriptSettings
from bisect_engine.script.session import Session, script_summary
from bisect_engine.verdict.inductor_adapter import compiles_routed_through


def _loss(x: torch.Tensor, y: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return F.margin_ranking_loss(x, y, t, margin=1.7, reduction="mean")


def _in_fp32(function: Any) -> Any:
    """``function`` computed in fp32 and rounded back to bf16 once: eager's bf16 add rounds the
    margin 1.7 to 1.703125 and gets an exact 0 hinge; fp32 keeps -0.003125, fp64's sign."""
    return lambda *args: function(*[a.float() for a in args]).to(torch.bfloat16)


def _inputs() -> list[torch.Tensor]:
    bf16 = torch.bfloat16
    return [torch.full((2,), 1.703125, dtype=bf16), torch.zeros(2, dtype=bf16), torch.ones(2, dtype=bf16)]


def test_a_matching_gradient_that_departs_from_eager_materially_is_marked() -> None:
    graph_module = torch.fx.symbolic_trace(_loss)
    verdict = check_gradients(graph_module, _in_fp32(_loss), _inputs(), [0, 1])
    assert verdict is not None and verdict.outcome.value == "match"  # compiled's gradient is fp64's: 0
    assert len(verdict.departing) == 2 and set(verdict.departing) <= set(verdict.outputs)
    same = check_gradients(graph_module, _loss, _inputs(), [0, 1])  # eager itself: nothing departs
    assert same is not None and same.departing == ()


def test_the_session_sends_such_a_training_call_to_the_departure_look_once(tmp_path: Path) -> None:
    torch._dynamo.reset()
    session = Session(ScriptSettings(out_dir=tmp_path / "out", level=Level.LOCALISE), tmp_path / "script.py", [], "test")
    looked: list[tuple[str, list[int]]] = []
    session._departure_look = lambda record, pristine, positions: looked.append((record.name, positions))  # type: ignore[method-assign]

    def backend(graph_module: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        return lambda *args: (_in_fp32(lambda *a: graph_module(*a)[0])(*args),)

    try:
        with compiles_routed_through(session.wrap_backend):
            compiled = torch.compile(_loss, backend=backend)
            x, y, t = _inputs()
            for _ in range(2):
                compiled(x.clone().requires_grad_(), y.clone().requires_grad_(), t).backward()
        report = session.finish(0)
    finally:
        torch._dynamo.reset()
    assert report["verdict"] == "clean"  # compiled is the one closer to fp64: never a divergence
    assert looked and looked[0] == ("graph_0", [0, 1])  # the differentiated inputs, for the backward's capture


def test_a_listed_departure_that_flips_a_gradient_is_in_the_clean_summary() -> None:
    departure = {"op": "aten.add.Scalar", "node": "add", "source": "script.py:3", "value": "clone", "elements": 2,
                 "difference_max_ulps": 256.0, "compiled_rms_ulps": 0.25, "eager_rms_ulps": 255.75, "setting": None,
                 "backward": {"graph": "backward_0", "output": "mul_1", "gradient_of": "x", "elements": 2, "total": 2,
                              "max_abs_diff": 0.77, "amplifiers": [{"op": "aten.ge.Scalar", "node": "ge", "source": None}]}}
    script = {"graphs_compiled": 1, "graphs_checked": 1, "calls_checked": 1, "calls": 1, "graphs": []}
    report = {"verdict": "clean", "report_path": "out/report.json", "script": script, "differences": [departure]}
    text = script_summary(report)
    assert "differs (closer to fp64): aten.add.Scalar" in text and "gradient mul_1 (of x) differs materially" in text
    assert "aten.add.Scalar" not in script_summary({**report, "differences": [{**departure, "backward": None}]})
