"""Tests for bisect_engine.verdict.graphs: GraphView, build_subgraph and the per-node helpers.

Graphs come from ``make_fx`` (aten overloads with ``meta["val"]``), so nothing is compiled.
"""
from __future__ import annotations

import operator

import pytest
import torch
import torch.fx as fx
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from bisect_engine.verdict.graphs import (
    GraphView,
    build_subgraph,
    is_compute,
    is_mutating,
    is_random,
    is_tensor_value,
    is_uninitialised,
    module_path,
    op_name,
    reference_inputs,
    source_location,
    value_nodes,
)
from bisect_engine.verdict.fx_eval import interpret, run_graph

aten = torch.ops.aten


def relu_norm_add(x, w, b, y):
    return F.layer_norm(torch.relu(x), (4,), w, b) + y


def diamond(x):
    a = torch.relu(x)
    c = a + torch.neg(a)
    return c * 2


def dropout_then_relu(x):
    out, mask = aten.native_dropout(x, 0.5, True)
    return torch.relu(out) * mask


def traced(fn, *inputs):
    graph_module = make_fx(fn)(*inputs)
    return graph_module, GraphView(graph_module), inputs


@pytest.fixture
def norm_graph():
    generator = torch.Generator().manual_seed(0)
    inputs = tuple(torch.randn(*shape, generator=generator) for shape in [(3, 4), (4,), (4,), (3, 4)])
    return traced(relu_norm_add, *inputs)


def names(nodes) -> list[str]:
    return [node.name for node in nodes]


def placeholder_names(subgraph) -> list[str]:
    return [n.name for n in subgraph.graph_module.graph.nodes if n.op == "placeholder"]


# --- GraphView ------------------------------------------------------------------------------------


def test_compute_nodes_exclude_getitem_and_placeholders(norm_graph) -> None:
    graph_module, view, _ = norm_graph
    assert names(view.compute_nodes) == ["relu", "native_layer_norm", "add"]
    assert any(n.target is operator.getitem for n in graph_module.graph.nodes)
    assert view.position == {"relu": 0, "native_layer_norm": 1, "add": 2}
    assert [op_name(n) for n in view.compute_nodes] == ["aten.relu.default", "aten.native_layer_norm.default", "aten.add.Tensor"]


def test_dependencies_see_through_getitem(norm_graph) -> None:
    _, view, _ = norm_graph
    assert set(view.dependencies.edges) == {("relu", "native_layer_norm"), ("native_layer_norm", "add")}


def test_value_nodes_are_the_getitems_of_a_multi_output_op(norm_graph) -> None:
    _, view, _ = norm_graph
    assert names(value_nodes(view.nodes["native_layer_norm"])) == ["getitem", "getitem_1", "getitem_2"]
    assert names(value_nodes(view.nodes["relu"])) == ["relu"]
    assert is_tensor_value(view.nodes["getitem"])
    assert not is_tensor_value(view.nodes["native_layer_norm"])  # its value is a tuple


def test_middle_node_reads_placeholders_named_after_its_producers(norm_graph) -> None:
    _, view, _ = norm_graph
    sub = build_subgraph(view, ["native_layer_norm"])
    assert sub.node_names == ("native_layer_norm",)
    assert sub.input_names == ("relu", "w_1", "b_1")
    assert placeholder_names(sub) == ["relu", "w_1", "b_1"]
    assert sub.output_names == ("getitem",)  # mean and rstd are used by no one outside
    everything = build_subgraph(view, ["native_layer_norm"], outputs="all")
    assert everything.output_names == ("getitem", "getitem_1", "getitem_2")


def test_placeholders_carry_the_producers_metadata(norm_graph) -> None:
    _, view, _ = norm_graph
    sub = build_subgraph(view, ["native_layer_norm", "add"])
    placeholders = [n for n in sub.graph_module.graph.nodes if n.op == "placeholder"]
    for placeholder, name in zip(placeholders, sub.input_names):
        assert placeholder.meta["val"].shape == view.nodes[name].meta["val"].shape


def test_window_outputs_only_escaping_values(norm_graph) -> None:
    _, view, _ = norm_graph
    head = build_subgraph(view, ["relu", "native_layer_norm"])
    assert head.input_names == ("x_1", "w_1", "b_1")
    assert head.output_names == ("getitem",)  # relu is consumed inside the window
    whole = build_subgraph(view, ["relu", "native_layer_norm", "add"])
    assert whole.input_names == ("x_1", "w_1", "b_1", "y_1")
    assert whole.output_names == ("add",)


def test_isolate_cuts_internal_edges_and_outputs_every_value(norm_graph) -> None:
    _, view, _ = norm_graph
    sub = build_subgraph(view, ["relu", "native_layer_norm", "add"], isolate=True, outputs="all")
    assert sub.input_names == ("x_1", "relu", "w_1", "b_1", "getitem", "y_1")
    placeholders = placeholder_names(sub)
    assert len(placeholders) == len(sub.input_names)
    # Outside producers keep their names; an internal value fed as a placeholder must not share
    # a name with the node computed in the subgraph.
    assert [placeholders[i] for i in (0, 2, 3, 5)] == ["x_1", "w_1", "b_1", "y_1"]
    computed = {n.name for n in sub.graph_module.graph.nodes if n.op == "call_function"}
    assert not set(placeholders) & computed
    for node in sub.graph_module.graph.nodes:
        if is_compute(node):
            assert all(source.op == "placeholder" for source in node.all_input_nodes), node.format_node()
    assert sub.output_names == ("relu", "getitem", "getitem_1", "getitem_2", "add")


@pytest.mark.parametrize("isolate", [False, True])
def test_placeholders_come_before_every_computed_node(norm_graph, isolate) -> None:
    _, view, _ = norm_graph
    for chosen in (["add"], ["native_layer_norm", "add"], ["relu", "native_layer_norm", "add"], ["relu", "add"]):
        sub = build_subgraph(view, chosen, isolate=isolate, outputs="all" if isolate else "escaping")
        ops = [n.op for n in sub.graph_module.graph.nodes]
        assert ops == sorted(ops, key=lambda op: op != "placeholder"), (chosen, ops)


def test_build_subgraph_does_not_mutate_the_graph(norm_graph) -> None:
    graph_module, view, _ = norm_graph
    before = str(graph_module.graph)
    build_subgraph(view, ["native_layer_norm", "add"])
    build_subgraph(view, ["relu", "add"], isolate=True, outputs="all")
    assert str(graph_module.graph) == before


@pytest.mark.parametrize(
    "chosen, isolate",
    [
        (["relu"], False),
        (["native_layer_norm"], False),
        (["native_layer_norm", "add"], False),
        (["relu", "native_layer_norm", "add"], False),
        (["relu", "add"], False),
        (["relu", "native_layer_norm", "add"], True),
    ],
)
def test_subgraph_reproduces_reference_values_exactly(norm_graph, chosen, isolate) -> None:
    graph_module, view, inputs = norm_graph
    values = interpret(graph_module, inputs)
    sub = build_subgraph(view, chosen, isolate=isolate, outputs="all" if isolate else "escaping")
    assert sub.output_names
    outputs = run_graph(sub.graph_module, reference_inputs(sub, values))
    assert len(outputs) == len(sub.output_names)
    for name, output in zip(sub.output_names, outputs):
        assert torch.equal(output, values[name]), name


def test_isolated_nodes_read_reference_values_not_each_others() -> None:
    graph_module, view, inputs = traced(diamond, torch.randn(5))
    values = interpret(graph_module, inputs)
    sub = build_subgraph(view, ["relu", "neg", "add", "mul"], isolate=True, outputs="all")
    poisoned = dict(values, x_1=torch.full((5,), 100.0))  # only relu reads x_1
    outputs = dict(zip(sub.output_names, run_graph(sub.graph_module, reference_inputs(sub, poisoned))))
    assert torch.equal(outputs["relu"], torch.full((5,), 100.0))
    for name in ("neg", "add", "mul"):
        assert torch.equal(outputs[name], values[name]), name


# --- random, mutating, uninitialised nodes --------------------------------------------------------


def test_random_nodes_are_fed_as_inputs_never_compiled() -> None:
    graph_module, view, inputs = traced(dropout_then_relu, torch.randn(4, 4))
    assert is_random(view.nodes["native_dropout"])
    assert not is_random(view.nodes["relu"])
    assert view.compilable_names() == ["relu", "mul"]
    for chosen in (view.compilable_names(), ["relu"], ["mul"]):
        sub = build_subgraph(view, chosen)
        assert "native_dropout" not in sub.node_names
        assert not any(is_random(n) for n in sub.graph_module.graph.nodes if n.op == "call_function")
    whole = build_subgraph(view, view.compilable_names())
    assert whole.input_names == ("getitem", "getitem_1")  # the dropout's output and mask, as data
    values = interpret(graph_module, inputs)
    (output,) = run_graph(whole.graph_module, reference_inputs(whole, values))
    assert torch.equal(output, values["mul"])  # the recorded random values replay deterministically


def test_checkable_rejects_random_mutating_and_uninitialised_nodes() -> None:
    _, view, _ = traced(lambda x: F.dropout(x, 0.5, training=True) * 2, torch.randn(3, 4))
    by_name = {n.name: n for n in view.compute_nodes}
    assert set(by_name) == {"empty_like", "bernoulli_", "div_", "mul", "mul_1"}
    assert is_uninitialised(by_name["empty_like"])
    assert is_random(by_name["bernoulli_"]) and is_mutating(by_name["bernoulli_"])
    assert is_mutating(by_name["div_"]) and not is_random(by_name["div_"])
    assert not is_mutating(by_name["mul"]) and not is_uninitialised(by_name["mul"])
    checkable = {name for name, node in by_name.items() if view.checkable(node)}
    assert checkable == {"mul", "mul_1"}


# --- source_location / module_path ----------------------------------------------------------------


def bare_node(**meta) -> fx.Node:
    graph = fx.Graph()
    node = graph.call_function(torch.relu, (graph.placeholder("x"),))
    node.meta.update(meta)
    return node


def test_source_location_takes_the_innermost_frame() -> None:
    trace = (
        '  File "/home/u/proj/train.py", line 88, in step\n    out = model(x)\n'
        '  File "/a/b/model.py", line 23, in forward\n    x = self.act(x)\n'
    )
    assert source_location(bare_node(stack_trace=trace)) == ("model.py:23", "/a/b/model.py:23")
    single = '  File "/a/b/model.py", line 7, in forward\n    return x\n'
    assert source_location(bare_node(stack_trace=single)) == ("model.py:7", "/a/b/model.py:7")


def test_source_location_without_a_trace() -> None:
    assert source_location(bare_node()) == (None, None)
    assert source_location(bare_node(stack_trace=None)) == (None, None)
    assert source_location(bare_node(stack_trace="no frames here")) == (None, None)


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("L['self'].blocks[1].act", "blocks.1.act"),
        ("L['self'].blocks.1.act", "blocks.1.act"),
        ("L['self']._modules['blocks']._modules['1']._modules['act']", "blocks.1.act"),
        ("L['model'].layers['attn'].proj", "layers.attn.proj"),
        ("L['self'].fc", "fc"),
        ("L['self']", None),
    ],
)
def test_module_path_normalises_dynamo_paths(raw: str, expected: str | None) -> None:
    stack = {"L__self__": ("L['self']", torch.nn.Module), "inner": (raw, torch.nn.GELU)}
    assert module_path(bare_node(nn_module_stack=stack)) == expected


def test_module_path_at_top_level_is_none() -> None:
    assert module_path(bare_node()) is None
    assert module_path(bare_node(nn_module_stack={})) is None


class _Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.act = torch.nn.GELU()

    def forward(self, x):
        return self.act(self.lin(x))  # the innermost user frame of gelu


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList([_Block(), _Block()])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def test_locations_of_a_real_dynamo_capture() -> None:
    """Dynamo's actual metadata format (no Inductor: the capture backend runs graphs eagerly)."""
    from bisect_engine.load.capture import capture

    graphs, _ = capture(_Model(), [torch.randn(2, 4)])
    view = GraphView(graphs[0].graph_module)
    gelus = [n for n in view.compute_nodes if n.target is aten.gelu.default]
    assert [module_path(n) for n in gelus] == ["blocks.0.act", "blocks.1.act"]
    short, full = source_location(gelus[1])
    line = _Block.forward.__code__.co_firstlineno + 1
    assert short == f"test_graphs.py:{line}"
    assert full.endswith(f"tests/test_graphs.py:{line}")
