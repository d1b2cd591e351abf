"""Issue 37 item 1, the backward together (pytorch#197888): the compiled forward saves a value for
the backward laid out otherwise than eager (``adaptive_max_pool3d``'s indices channels_last, eager's
contiguous; the same values), and a backward op reads the layout, not the values. Each graph matches
compiled alone (the backward is judged on eager's saved values), so nothing names an op; one eager
replay of the backward on the compiled forward's saved tensor (its strides kept) does, with no
compile. Script mode counts a forward's model outputs from its backward graph (no tracing context
holds AOT's metadata there): before, neither this nor the saved-mask replay ran in script mode.
The whole path: ``tests/real_reports/issue_197888_*.py`` under ``BISECT_CORPUS=all``.
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from bisect_engine.load.capture import capture_graph_module_with_backward
from bisect_engine.output.wording import not_reproducible_cause
from bisect_engine.strategies.departures import saved_layout_consequence, saved_layouts_differ
from bisect_engine.verdict.oracle import GraphContext


def _pool(t: torch.Tensor) -> torch.Tensor:
    return F.adaptive_max_pool3d(t, (2, 3, 5))


@functools.lru_cache(maxsize=None)
def _contexts() -> tuple[GraphContext, GraphContext]:
    """The reporter's function as script mode captures it: its Dynamo graph re-run outside Dynamo."""
    graphs: list[torch.fx.GraphModule] = []

    def keep(graph_module: torch.fx.GraphModule, _inputs: list[torch.Tensor]) -> object:
        graphs.append(graph_module)
        return graph_module.forward

    x = torch.randperm(1 * 4 * 4 * 6 * 10).float().reshape(1, 4, 4, 6, 10).to(memory_format=torch.channels_last_3d)
    torch._dynamo.reset()
    torch.compile(_pool, backend=keep)(x.clone().requires_grad_())
    torch._dynamo.reset()
    forward, backward = capture_graph_module_with_backward(graphs[0], [x], [0], lambda outputs: outputs[0].sum())
    return GraphContext.from_captured(forward), GraphContext.from_captured(backward)


def test_script_mode_knows_which_forward_outputs_are_saved_for_the_backward() -> None:
    forward, backward = _contexts()
    saved = forward.view.output_names()[forward.captured.model_outputs:]
    placeholders = [n.name for n in backward.view.graph_module.graph.nodes if n.op == "placeholder"]
    assert forward.captured.model_outputs == 1  # before: None outside Dynamo, so nothing was carried
    assert saved == [name for name in placeholders if not name.startswith("tangents_")]


def test_a_saved_value_laid_out_otherwise_names_the_backward_op_that_misreads_it() -> None:
    forward, backward = _contexts()
    indices = forward.view.output_names()[-1]
    eager = forward.eager_values[indices]
    compiled = eager.contiguous(memory_format=torch.channels_last_3d)  # Inductor's layout; same values
    assert eager.is_contiguous() and torch.equal(eager, compiled)
    values = {name: forward.eager_values[name] for name in forward.view.output_names()}
    assert not saved_layouts_differ(forward, values)
    assert saved_layouts_differ(forward, {**values, indices: compiled})
    found = saved_layout_consequence(forward, {**values, indices: compiled}, backward)
    assert found is not None
    assert (found.value, found.node) == (indices, "adaptive_max_pool3d")
    assert found.reader == "adaptive_max_pool3d_backward" and found.consequence.difference.material
    assert found.compiled_strides == tuple(compiled.stride()) and found.eager_strides == tuple(eager.stride())
    # eager's own layout: nothing to say
    assert saved_layout_consequence(forward, values, backward) is None


def test_the_not_reproducible_cause_names_the_layout_and_the_op() -> None:
    misread = {"op": "aten.adaptive_max_pool3d.default", "value": "getitem_1", "eager_strides": [120, 30, 15, 5, 1],
               "compiled_strides": [120, 1, 60, 20, 4], "reader": {"op": "aten.adaptive_max_pool3d_backward.default"}}
    report = {"verdict": "not_reproducible", "graphs": [{"name": "forward_0", "kind": "forward", "whole": "match"},
                                                        {"name": "backward_0", "kind": "backward", "whole": "match"}],
              "script": {"first_divergence_call": {"graph": "graph_1", "graph_call": 1, "output": "gradient of input 0",
                                                   "reason": "rms"}}}
    assert not_reproducible_cause(report)["cause"] == "backward_together"
    cause = not_reproducible_cause({**report, "saved_layout": [misread]})
    assert cause["cause"] == "saved_layout" and "misread by aten.adaptive_max_pool3d_backward.default" in cause["evidence"]


def _run_with_misread(compiled_layout: bool = True) -> tuple[object, object]:
    """The run as the engine leaves it: both graphs clean compiled alone, the forward's saved
    indices laid out channels_last by compiled (the misread found by one eager replay, no compile)."""
    from pathlib import Path

    from bisect_engine.load.model_file import ModelSpec
    from bisect_engine.localise.records import GraphFinding, RunFinding
    from bisect_engine.verdict.compare import Outcome
    from bisect_engine.verdict.compiler import Compiler
    from bisect_engine.verdict.oracle import SubgraphVerdict

    forward, backward = _contexts()
    indices = forward.view.output_names()[-1]
    values = {name: forward.eager_values[name] for name in forward.view.output_names()}
    values[indices] = values[indices].contiguous(memory_format=torch.channels_last_3d)
    misread = saved_layout_consequence(forward, values, backward)
    assert misread is not None
    whole = SubgraphVerdict(Outcome.MATCH)
    graphs = (GraphFinding(forward, whole, layout_misread=misread), GraphFinding(backward, whole))
    spec = ModelSpec(Path("issue_197888.py"), None, (), None, None)  # type: ignore[arg-type]
    result = RunFinding(spec, graphs, Compiler(), 0.0, captured=[forward.captured, backward.captured])
    return result, misread


def test_a_misread_layout_is_a_finding_named_by_the_backward_op_with_a_repro_of_both_layouts(tmp_path) -> None:
    """Issue 37 (pytorch#197888): the misread is the run's finding (``divergent``), its culprit the
    backward op that reads the layout (kind ``saved_layout``); the repro runs that op eagerly on the
    same values in both layouts and reproduces (exit 1); with eager's own layout it does not (exit 0)."""
    import dataclasses
    import runpy

    from bisect_engine.localise.release import releasable
    from bisect_engine.output.report import build_report, finding_repro_spec
    from bisect_engine.output.repro import render
    from bisect_engine.output.bug_report import render_bug_report
    from bisect_engine.output.html import render_html
    from bisect_engine.output.summary import summary

    result, misread = _run_with_misread()
    assert not releasable(result.graphs[1], result.graphs, carried=True)  # the repro reads its values
    report = build_report(result)
    culprit = report["culprit"]
    assert report["verdict"] == "divergent" and report["not_reproducible_cause"] is None
    assert (culprit["op"], culprit["kind"], culprit["graph"]) == (
        "aten.adaptive_max_pool3d_backward.default", "saved_layout", "backward_0")
    assert culprit["saved_layout"]["saved_by"]["op"] == "aten.adaptive_max_pool3d.default"
    # the forward op it differentiates, not the getitem of its result the forward saved
    assert culprit["forward_op"]["op"] == "aten.adaptive_max_pool3d.default"
    assert culprit["output_difference"]["material"]
    assert "  saved:   " in summary(report) and "saved layout:" not in summary(report)  # one story, told once
    issue = render_bug_report(report, "", None) or ""
    changed = culprit["output_difference"]
    assert "misreads a value the compiled forward saves" in issue and f"{changed['elements']} of {changed['total']}" in issue
    assert "aten.adaptive_max_pool3d_backward.default" in render_html(report)
    spec = finding_repro_spec(result)
    assert spec is not None and spec.expect == "saved_layout"
    assert dict(spec.layouts) == {misread.value: misread.compiled_strides}
    for layouts, expected in ((spec.layouts, 1), (((misread.value, misread.eager_strides),), 0)):
        path = tmp_path / f"repro_{expected}.py"
        path.write_text(render(dataclasses.replace(spec, layouts=layouts)).script)
        namespace = runpy.run_path(str(path), run_name="not_main")
        status = namespace["layout_main"](namespace["Repro"](), namespace["INPUTS_B64"], None, namespace["INPUT_NAMES"],
                                          namespace["OUTPUT_NAMES"], namespace["LAYOUTS"], str(path))
        assert status == expected
