"""Higher-order ops (torch.cond, flex attention, nested_compile_region) in a captured graph: a cut
keeps their subgraphs as attributes (never inputs), the repro renders them as code, and a
subgraph's own inputs are made from the call's values. No Inductor compile: fast."""
from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.fx as fx

from bisect_engine.load.capture import capture
from bisect_engine.output.repro_modules import init_code, subgraph_classes
from bisect_engine.strategies.inside import hop_name, subgraph_calls, traced_subgraph
from bisect_engine.verdict.fx_eval import interpret, run_graph
from bisect_engine.verdict.graphs import GraphView, build_copies, build_subgraph, is_submodule_attr, plan_copies


class Routed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate = torch.nn.Linear(8, 1)
        self.expert = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(self.gate(x).mean() < 10, lambda h: self.expert(torch.sin(h)), lambda h: h * 2, (x,)) + 1


@pytest.fixture(scope="module")
def graph() -> tuple[GraphView, dict[str, Any], list[Any]]:
    torch.manual_seed(0)
    with torch.no_grad():
        graphs, _ = capture(Routed().eval(), (torch.randn(4, 8),))
    (captured,) = graphs
    return GraphView(captured.graph_module), interpret(captured.graph_module, captured.inputs), captured.inputs


def _cond(view: GraphView) -> fx.Node:
    return next(node for node in view.compute_nodes if hop_name(node) == "cond")


def test_a_cut_keeps_the_branches_as_attributes_never_inputs(graph) -> None:
    view, values, _ = graph
    cond = _cond(view)
    cut = build_subgraph(view, [cond.name], isolate=True, outputs="all")
    placeholders = [n for n in cut.graph_module.graph.nodes if n.op == "placeholder"]
    assert all(not isinstance(values[name], torch.nn.Module) for name in cut.input_names)
    assert len(placeholders) == len(cut.input_names)
    attributes = [n for n in cut.graph_module.graph.nodes if n.op == "get_attr"]
    assert {str(n.target) for n in attributes} == {str(a.target) for a in cond.args[1:3]}
    assert all(is_submodule_attr(n) for n in attributes)
    (out,) = run_graph(cut.graph_module, [values[name] for name in cut.input_names])
    torch.testing.assert_close(out, values[cut.output_names[0]], rtol=0, atol=0)


def test_per_node_copies_keep_the_branches_as_attributes(graph) -> None:
    view, values, _ = graph
    names = [n.name for n in view.compute_nodes]
    copies = build_copies(view, plan_copies(view, names, values))
    inputs = copies.inputs(view, values, 0)
    assert len(inputs) == sum(1 for n in copies.graph_module.graph.nodes if n.op == "placeholder")
    assert not any(isinstance(v, torch.nn.Module) for v in inputs)
    outputs = run_graph(copies.graph_module, inputs)
    for name, value in copies.assign(view, 0, outputs).items():
        torch.testing.assert_close(value, values[name], rtol=0, atol=0)


def test_the_repro_renders_the_branches_as_classes_that_run(graph) -> None:
    view, values, _ = graph
    cut = build_subgraph(view, [_cond(view).name])
    text = subgraph_classes(cut.graph_module) + "class Repro(torch.nn.Module):\n" + "\n".join(
        f"    {line}" for line in (init_code(cut.graph_module) + cut.graph_module.code.strip()).splitlines())
    assert "GraphModule" not in text and "torch.load" not in text
    namespace: dict[str, Any] = {"torch": torch}
    exec(compile(text, "<repro>", "exec"), namespace)  # noqa: S102 - our own rendered code
    (out,) = namespace["Repro"]()(*[values[name] for name in cut.input_names])
    torch.testing.assert_close(out, values[cut.output_names[0]], rtol=0, atol=0)
    assert subgraph_classes(cut.graph_module) == text.split("class Repro(")[0]  # pure: same text again


def test_the_taken_branch_is_traced_on_the_operands_values(graph) -> None:
    view, values, _ = graph
    cond = _cond(view)
    ((role, attribute, inputs),) = subgraph_calls(cond, values)
    assert role == "true_branch" and attribute == str(cond.args[1].target)
    traced = traced_subgraph(view.graph_module, attribute, inputs, "inner", 0)
    ops = {str(n.target) for n in traced.graph_module.graph.nodes if n.op == "call_function"}
    assert "aten.sin.default" in ops
    (out,) = run_graph(traced.graph_module, inputs)
    torch.testing.assert_close(out, values[next(iter(cond.users)).name], rtol=0, atol=0)


def test_flex_attention_score_mod_is_called_on_every_score_with_broadcast_indices() -> None:
    from torch.nn.attention.flex_attention import flex_attention

    def softcap(score, b, h, q_idx, kv_idx):
        return torch.tanh(score / 4) * 4

    class Attention(torch.nn.Module):
        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return flex_attention(q, k, v, score_mod=softcap)

    q, k, v = (torch.randn(1, 2, 128, 8) for _ in range(3))
    with torch.no_grad():
        graphs, _ = capture(Attention(), (q, k, v))
    view = GraphView(graphs[0].graph_module)
    values = interpret(graphs[0].graph_module, graphs[0].inputs)
    flex = next(node for node in view.compute_nodes if hop_name(node) == "flex_attention")
    ((role, _attribute, inputs),) = subgraph_calls(flex, values)
    assert role == "score_mod" and inputs[0].shape == (1, 2, 128, 128)
    assert [tuple(t.shape) for t in inputs[1:5]] == [(1, 1, 1, 1), (1, 2, 1, 1), (1, 1, 128, 1), (1, 1, 1, 128)]
    torch.testing.assert_close(inputs[0], q @ k.transpose(-2, -1) * 8 ** -0.5)
