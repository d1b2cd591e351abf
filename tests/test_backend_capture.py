"""A user's own backend that calls Inductor inside (vLLM-style: split the graph, hand each piece to
``compile_fx`` or ``standalone_compile``): the graphs it hands Inductor are captured inside it, with
their real inputs, and never compiled; a backend that rewrites the graph itself is localised as its
own rewrite. No Inductor compile here: the entry points record instead."""
from __future__ import annotations

import operator
from typing import Any

import pytest
import torch
from torch.fx.passes.split_module import split_module

from bisect_engine.load.capture import capture_graph_module_through_backend, capture_through_backend
from bisect_engine.load.model_file import unwrap_compiled, user_backend
from bisect_engine.strategies.pregrad import localise_backend_rewrite


def f(x: torch.Tensor) -> torch.Tensor:
    for _ in range(3):
        x = x + 1
    return torch.relu(x) * 2


class Splitting:
    """Two pieces (the first two nodes, then the rest), each handed to Inductor's entry point."""

    def __init__(self, entry: str):
        self.entry = entry

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        counter = iter(range(10**6))
        split = split_module(gm, None, lambda node: 0 if next(counter) < 2 else 1, keep_original_order=True)
        for name, submodule in split.named_children():
            if name.startswith("submod_"):
                if self.entry == "compile_fx":
                    from torch._inductor.compile_fx import compile_fx

                    submodule.forward = compile_fx(submodule, example_inputs)
                else:
                    submodule.forward = torch._inductor.standalone_compile(
                        submodule, example_inputs, dynamic_shapes="from_example_inputs", options={})
        return split


class PlusTwoThenInductor:
    """The backend's own pass (the first ``x + 1`` becomes ``x + 2``), then compile_fx."""

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        from torch._inductor.compile_fx import compile_fx

        first = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target is operator.add)
        first.args = (first.args[0], 2)
        gm.recompile()
        return compile_fx(gm, example_inputs)


def _entry_points() -> tuple[Any, Any]:
    from torch._inductor import compile_fx as module

    return module._maybe_wrap_and_compile_fx_main, module._compile_fx_inner


@pytest.mark.parametrize("entry", ["compile_fx", "standalone_compile"])
def test_the_pieces_a_splitting_backend_hands_inductor_are_captured_with_their_real_inputs(entry: str) -> None:
    before = _entry_points()
    x = torch.linspace(-4, 1, 8)
    captured, output, run = capture_through_backend(f, (x,), None, Splitting(entry), "<Splitting object at 0x1>")
    assert _entry_points() == before  # restored
    assert torch.equal(output, f(x)) and run.backend == "Splitting"  # the pieces ran eagerly, in the backend's split
    assert [g.name for g in captured] == ["forward_0", "forward_1"] and len(run.inductor_graphs) == 2
    ops = [[str(n.target) for n in g.graph_module.graph.nodes if n.op == "call_function"] for g in captured]
    assert ops[1][-2:] == ["aten.relu.default", "aten.mul.Tensor"]
    assert torch.equal(captured[1].inputs[0], x + 2)  # the second piece's real input, not the example input
    assert torch.equal(captured[1].torch_level[1][0], x + 2)
    assert localise_backend_rewrite(run, captured) is None  # the backend computes what Dynamo's graph does


def test_a_backend_that_rewrites_the_graph_before_inductor_is_named_with_the_node_it_rewrote() -> None:
    x = torch.randn(8)
    captured, output, run = capture_through_backend(f, (x,), None, PlusTwoThenInductor(), "PlusTwoThenInductor")
    assert torch.allclose(output, torch.relu(x + 4) * 2)  # the backend computes x + 2 + 1 + 1
    rewrite = localise_backend_rewrite(run, captured)
    assert rewrite is not None and rewrite.by == "backend PlusTwoThenInductor" and rewrite.graph == "forward_0"
    (node,) = rewrite.nodes
    assert node.before.endswith("(l_x_, 1)") and node.after.endswith("(l_x_, 2)")
    assert node.aten_ops == ("aten.add.Tensor",) and node.source.startswith("test_backend_capture.py:")
    assert rewrite.cut is None  # no repro: the rewrite is the user's backend, not Inductor's


def test_a_backend_that_never_calls_inductor_hands_nothing_and_script_mode_graphs_go_through_it() -> None:
    x = torch.randn(8)
    captured, _, run = capture_through_backend(f, (x,), None, lambda gm, _: gm.forward, "eager_forward")
    assert captured == [] and run.inductor_graphs == []
    gm = torch.fx.symbolic_trace(f)
    captured, run = capture_graph_module_through_backend(gm, [x], Splitting("compile_fx"), "Splitting")
    assert [g.name for g in captured] == ["forward_0", "forward_1"] and len(run.dynamo) == 1


def test_the_users_backend_object_is_found_and_inductor_is_not_a_users_backend() -> None:
    backend = Splitting("compile_fx")
    compiled = torch.compile(f, backend=backend)
    found = user_backend(unwrap_compiled(compiled)[1])
    assert found is not None and getattr(found, "compiler_fn", found) is backend
    assert user_backend(unwrap_compiled(torch.compile(f))[1]) is None


def test_a_model_whose_backend_never_calls_inductor_is_captured_the_plain_way_and_says_so(tmp_path) -> None:
    """Level 2 for such a backend: the Dynamo graphs captured as for any model, the report naming
    the backend and why its graphs were not captured inside it."""
    from bisect_engine.load.model_file import ModelSpec
    from bisect_engine.localise.pipeline import _capture

    compiled = torch.compile(f, backend=lambda gm, _: gm.forward)
    spec = ModelSpec(tmp_path / "m.py", f, (torch.randn(8),), None, None, compiled=compiled, backend="<lambda>")
    captured, backend_run = _capture(spec, 0)
    assert [g.name for g in captured] == ["forward_0"]
    assert backend_run is not None and backend_run.note == "it hands Inductor no graph"


def test_inductors_own_compile_is_recaptured_with_what_its_partition_recomputes_in_the_backward(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """pytorch#186799: Inductor's partition saves ``amin`` and recomputes ``atan2`` in the backward
    (our plain capture saves ``atan2``): the recapture through ``compile_fx_inner`` records the
    graphs the program compiled, with their real inputs, run eagerly; the forward is compiled too
    (here a stand-in for Inductor's codegen), so the backward gets the layouts it would save."""
    from functorch.compile import make_boxed_func
    from torch._inductor import compile_fx as inductor

    from bisect_engine.load.capture import capture_graph_module_through_inductor

    compiled: list[str] = []

    def codegen(gm: torch.fx.GraphModule, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
        compiled.append("backward" if kwargs.get("is_backward") else "forward")
        return make_boxed_func(gm.forward)

    monkeypatch.setattr(inductor, "_compile_fx_inner", codegen)

    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.atan2(x, y).amin(dim=-1)

    gm = torch.fx.symbolic_trace(fn)
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    graphs = capture_graph_module_through_inductor(gm, [x, y], [0], lambda outputs: outputs[0].sum())
    forward, backward = graphs
    assert (forward.kind, backward.kind) == ("forward", "backward")
    ops = {kind: [str(n.target) for n in g.graph_module.graph.nodes if n.op == "call_function"]
           for kind, g in (("forward", forward), ("backward", backward))}
    assert "aten.atan2.default" in ops["backward"] and "aten.eq.Tensor" in ops["backward"]  # recomputed there
    saved = [n.name for n in backward.graph_module.graph.nodes if n.op == "placeholder"]
    assert "amin" in saved and "atan2" not in saved
    assert forward.model_outputs == 1 and torch.equal(forward.inputs[0], x) and not x.requires_grad
    assert compiled == ["forward"]  # the backward is recorded, run eagerly, never compiled
    assert inductor._compile_fx_inner is codegen  # the entry point put back


def test_the_recaptured_backward_gets_eagers_saved_values_in_the_layouts_the_compiled_forward_gives_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """pytorch#185509: Inductor's forward saves the conv weight channels-last, and the backward is
    compiled for that layout (wrong there, exact on the contiguous one). The forward compile reports
    its outputs' strides (here a stand-in codegen reporting the weight channels-last); the backward
    is recorded on eager's saved values laid out so."""
    from functorch.compile import make_boxed_func
    from torch._inductor import compile_fx as inductor

    from bisect_engine.load.capture import capture_graph_module_through_inductor

    def codegen(gm: torch.fx.GraphModule, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
        context = torch._guards.TracingContext.try_get()
        if context is not None and context.output_strides is not None:
            outputs = [node.meta.get("val") for node in gm.graph.find_nodes(op="output")[0].args[0]]
            context.output_strides.extend(
                (27, 1, 9, 3) if isinstance(v, torch.Tensor) and v.dim() == 4 and tuple(v.shape) == (4, 3, 3, 3)
                else (tuple(v.stride()) if isinstance(v, torch.Tensor) else None) for v in outputs)
        return make_boxed_func(gm.forward)

    monkeypatch.setattr(inductor, "_compile_fx_inner", codegen)

    def fn(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.conv2d(x, weight, padding=1)

    x, weight = torch.randn(2, 3, 6, 7), torch.randn(4, 3, 3, 3)
    _forward, backward = capture_graph_module_through_inductor(torch.fx.symbolic_trace(fn), [x, weight], [0, 1],
                                                               lambda outputs: outputs[0].sum())
    laid_out = [value for value in backward.inputs if isinstance(value, torch.Tensor) and value.shape == weight.shape]
    assert laid_out and all(v.stride() == (27, 1, 9, 3) and torch.equal(v, weight) for v in laid_out)
