"""A graph too large to judge at once is cut at module boundaries (issue 34, ``verdict/segments.py``).

In-process and eager only (no compile): the cut (where it falls, what each segment needs) and the
segments' values (each run on its inputs gives eager's values of the whole graph, bit for bit). The
engine's use of it, a planted bug named in a segment with its repro, is ``repro_cases/segments_relu_bug.py``.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx

from bisect_engine.load.capture import capture
from bisect_engine.verdict.fx_eval import interpret, run_graph
from bisect_engine.verdict.graphs import CapturedGraph, GraphView
from bisect_engine.verdict.offload import storage_bytes, tensors_in
from bisect_engine.verdict.segments import plan_segments, runs_of_units, segment_graphs, segmentable, unit_of


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Stack(nn.Module):
    def __init__(self, width: int = 32, depth: int = 4):
        super().__init__()
        self.embed = nn.Linear(width, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _graphs():
    torch.manual_seed(0)
    graphs, _ = capture(Stack(), [torch.randn(16, 32)], loss_fn=lambda output: output.square().mean())
    return {graph.kind: graph for graph in graphs}


def _sizes(graph):
    names = [node.name for node in graph.graph_module.graph.nodes if node.op == "placeholder"]
    return {name: storage_bytes(tensors_in([value])) for name, value in zip(names, graph.inputs)}


def _block_bytes(width: int = 32) -> int:
    return sum(p.numel() * 4 for p in Block(width).parameters())


def _cut(graph, room):
    return plan_segments(GraphView(graph.graph_module), _sizes(graph), lambda read: 4 * read, room,
                         graph.kind == "backward")


def _cuts_between(graph, plan, fine):
    view, backward = GraphView(graph.graph_module), graph.kind == "backward"
    unit = lambda name: unit_of(view.nodes[name], backward, fine)  # noqa: E731
    # every compute node once, in graph order; each cut where the module changes
    assert [name for segment in plan for name in segment] == [node.name for node in view.compute_nodes]
    for before, after in zip(plan, plan[1:]):
        assert unit(after[0]) is None or unit(before[-1]) != unit(after[0]), (graph.name, before[-1], after[0])


def test_the_cut_falls_between_modules_and_each_segment_fits():
    for kind, graph in _graphs().items():
        view = GraphView(graph.graph_module)
        units = [unit for unit, _ in runs_of_units(view, kind == "backward")]
        assert {"blocks.0", "blocks.3", "head"} <= set(units), (kind, units)
        # room for four times what a block reads (its parameters, a backward's saved activations),
        # not two blocks': whole module-list items, about one a segment
        plan = _cut(graph, 8 * _block_bytes())
        assert plan is not None and len(plan) >= 4, (kind, plan)
        _cuts_between(graph, plan, fine=False)
        for segment in segment_graphs(graph, plan):
            assert 4 * storage_bytes(tensors_in([segment.inputs])) <= 8 * _block_bytes(), segment.segment


def test_an_item_too_large_alone_is_cut_at_its_submodules():
    for kind, graph in _graphs().items():
        whole_items = _cut(graph, 8 * _block_bytes())
        # the least room (in steps of a tenth of a block's parameters) that admits a cut
        step = _block_bytes() // 10
        room, plan = next((room, plan) for room in range(step, 80 * step, step) if (plan := _cut(graph, room)))
        assert whole_items is not None and len(plan) > len(whole_items), (kind, plan)
        _cuts_between(graph, plan, fine=True)
        for segment in segment_graphs(graph, plan):
            assert 4 * storage_bytes(tensors_in([segment.inputs])) <= room, segment.segment


def test_no_cut_where_one_module_alone_does_not_fit_or_all_fits_at_once():
    graph = _graphs()["forward"]
    view = GraphView(graph.graph_module)
    assert plan_segments(view, _sizes(graph), lambda read: read, _block_bytes() // 2, False) is None
    assert plan_segments(view, _sizes(graph), lambda read: read, 10 * 2**20, False) is None


def test_the_segments_give_eager_values_of_the_whole_graph_bit_for_bit():
    for kind, graph in _graphs().items():
        view = GraphView(graph.graph_module)
        plan = plan_segments(view, _sizes(graph), lambda read: 4 * read, 8 * _block_bytes(), kind == "backward")
        assert plan is not None and len(plan) >= 4
        whole = interpret(graph.graph_module, graph.inputs)
        segments = segment_graphs(graph, plan)
        assert [s.name for s in segments] == [f"{graph.name}_segment{k}" for k in range(1, len(plan) + 1)]
        for segment in segments:
            assert segment.segment is not None and segment.segment.of == graph.name
            placeholders = [n.name for n in segment.graph_module.graph.nodes if n.op == "placeholder"]
            for name, value in zip(placeholders, segment.inputs):  # eager's boundary values, the graph's own inputs
                assert torch.equal(value, whole[name]), (segment.name, name)
            outputs = next(n for n in segment.graph_module.graph.nodes if n.op == "output").args[0]
            for node, value in zip(outputs, run_graph(segment.graph_module, segment.inputs)):
                assert torch.equal(value, whole[node.name]), (segment.name, node.name)
            # parameters are held by reference, with the version counters capture recorded
            assert all(any(t is v for v in segment.inputs) for t, _ in segment.shared)
        model_outputs = next(n for n in graph.graph_module.graph.nodes if n.op == "output").args[0]
        produced = {n.name for s in segments for n in next(x for x in s.graph_module.graph.nodes if x.op == "output").args[0]}
        assert {n.name for n in model_outputs if n is not None and n.op != "placeholder"} <= produced


def test_graphs_that_cannot_be_cut_say_why():
    graph = _graphs()["forward"]
    assert segmentable(graph) is None

    def writes(x: torch.Tensor, buffer: torch.Tensor) -> torch.Tensor:
        buffer.add_(1)
        return x * buffer

    inputs = [torch.randn(4), torch.zeros(4)]
    written = CapturedGraph("forward_0", "forward", 0, make_fx(writes)(*inputs), inputs)  # an aten add_
    assert segmentable(written) == "it writes its inputs in place"

    def draws(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.dropout(x, 0.5, training=True)

    drawn, _ = capture(draws, [torch.randn(4)])
    assert segmentable(drawn[0]) == "it draws random numbers"

    symbolic, _ = capture(Stack(), [torch.randn(16, 32)], dynamic=True)
    assert segmentable(symbolic[0]) == "it has symbolic sizes"


def test_identical_segments_compile_once_and_each_gets_its_own_values():
    from bisect_engine.verdict.compiler import Compiler, reuse_key, run_compiled

    graph = _graphs()["forward"]
    plan = _cut(graph, 8 * _block_bytes())
    segments = segment_graphs(graph, plan)
    # blocks 1 and 2 alone: the same ops on the same shapes, under other node names
    middle = [s for s in segments if s.segment.first == s.segment.last in ("blocks.1", "blocks.2")]
    assert len(middle) == 2, [s.segment for s in segments]
    one, other = middle
    assert {n.name for n in one.graph_module.graph.nodes} != {n.name for n in other.graph_module.graph.nodes}
    compiler = Compiler()
    outputs = []
    for segment in (one, other):
        compiled = compiler.compile(segment.graph_module, segment.inputs, label=segment.name)
        outputs.append((run_compiled(compiled, segment.inputs), run_graph(segment.graph_module, segment.inputs)))
    assert (compiler.compiles, compiler.reused) == (1, 1)
    for compiled_values, eager_values in outputs:  # the second runs the first's code on its own inputs
        assert len(compiled_values) == len(eager_values)
        for compiled_value, eager_value in zip(compiled_values, eager_values):
            torch.testing.assert_close(compiled_value, eager_value, rtol=1e-4, atol=1e-5)
    assert not torch.equal(outputs[0][0][-1], outputs[1][0][-1])  # two blocks' values, not one answer twice

    def key(segment, inputs=None, **changed):
        settings = {"shapes": "as_captured", "config_patches": None, "decompositions": None, "fallbacks": (),
                    "aten_graph": True, **changed}
        return reuse_key(segment.graph_module, segment.inputs if inputs is None else inputs, **settings)

    assert key(one) == key(other)
    # what the code depends on: another candidate's switch, other sizes, inputs that share a storage
    assert key(one) != key(other, config_patches={"cpp.simdlen": 0})
    assert key(one) != key(other, fallbacks=(torch.ops.aten.gelu.default,))
    assert key(one) != key(other, shapes="static")
    wider = [torch.cat([v, v]) if v.dim() == 2 and v.shape[0] == 16 else v for v in other.inputs]
    assert key(one) != key(other, wider)
    aliased = list(other.inputs)
    aliased[1] = aliased[0]
    assert key(one) != key(other, aliased)
    precision, before = torch.get_float32_matmul_precision(), key(one)
    try:  # a program that flips a switch between two compiles gets its own
        torch.set_float32_matmul_precision("high" if precision != "high" else "highest")
        assert before != key(other)
    finally:
        torch.set_float32_matmul_precision(precision)
    # a graph that reads an attribute (a constant whose values the key cannot see): never reused
    constant = make_fx(lambda x: x * torch.tensor([1.0, 2.0, 3.0, 4.0]))(torch.randn(4))
    assert any(n.op == "get_attr" for n in constant.graph.nodes)
    assert reuse_key(constant, [torch.randn(4)], "static", None, None, (), True) is None


def test_a_stack_is_cut_into_alike_chunks_that_compile_as_one():
    # eight identical blocks where two fit a segment and three do not: the blocks go two by two, so
    # every such chunk is the same graph under other names (one compile for all; packing as many as
    # fit from the embedding on would make each segment unlike the others)
    from bisect_engine.verdict.compiler import reuse_key

    torch.manual_seed(0)
    graphs, _ = capture(Stack(depth=8), [torch.randn(16, 32)], loss_fn=lambda output: output.square().mean())
    for graph in graphs:
        room = (12 if graph.kind == "forward" else 16) * _block_bytes()
        plan = _cut(graph, room)
        _cuts_between(graph, plan, fine=False)
        segments = segment_graphs(graph, plan)
        chunks = [s for s in segments if s.segment.first.startswith("blocks.") and s.segment.last.startswith("blocks.")]
        assert len(chunks) == 4, (graph.kind, [s.segment for s in segments])
        assert all(abs(int(s.segment.first[7:]) - int(s.segment.last[7:])) == 1 for s in chunks)
        keys = {reuse_key(s.graph_module, s.inputs, "as_captured", None, None, (), True) for s in chunks}
        assert len(keys) == 1 and None not in keys, graph.kind
        for segment in segments:
            assert 4 * storage_bytes(tensors_in([segment.inputs])) <= room, segment.segment


def test_an_inner_graph_compiled_before_with_its_inputs_in_another_order_runs_that_code_in_its_order():
    """The model-level check's inference graph, after AOT Autograd, is our whole-graph compile's graph
    with its inputs in another order (the data before or after the parameters): one inner compile, the
    second graph's inputs handed to the first's code in its order (outputs right for both); another
    switch or other sizes compile again."""
    from bisect_engine.verdict.compiler import Compiler, run_compiled

    def step(x, weight, bias):
        return torch.tanh(torch.nn.functional.linear(x, weight, bias)) * 2

    x, weight, bias = torch.randn(8, 16), torch.randn(4, 16), torch.randn(4)
    data_first = make_fx(step)(x, weight, bias)
    data_last = make_fx(lambda w, b, x: step(x, w, b))(weight, bias, x)
    compiler = Compiler()
    first = compiler.compile(data_first, [x, weight, bias])
    second = compiler.compile(data_last, [weight, bias, x])
    assert (compiler.compiles, compiler.reused) == (1, 1)
    expected = step(x, weight, bias)
    torch.testing.assert_close(run_compiled(first, [x, weight, bias])[0], expected)
    torch.testing.assert_close(run_compiled(second, [weight, bias, x])[0], expected)
    other_x = torch.randn(8, 16)  # the order holds for any values, not only those compiled with
    torch.testing.assert_close(run_compiled(second, [weight, bias, other_x])[0], step(other_x, weight, bias))
    compiler.compile(data_last, [weight, bias, x], config_patches={"cpp.simdlen": 1})
    compiler.compile(make_fx(step)(torch.randn(4, 16), weight, bias), [torch.randn(4, 16), weight, bias])
    assert (compiler.compiles, compiler.reused) == (3, 1)


def test_a_clean_inference_run_compiles_each_graph_once_and_a_planted_bug_still_reaches_the_model_check(
        tmp_path, monkeypatch):
    """The model-level check's compile of an inference model is the whole-graph compile's code: a clean
    run compiles its graph once (``model_check`` none, one reused), its check still a match; with
    Inductor's relu planted wrong, the check still sees the model's outputs differ."""
    import torch._inductor.config as inductor_config

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    reports = {}
    with inductor_config.patch({"cpp.inject_relu_bug_TESTING_ONLY": None}):  # put back after the planted run
        _two_runs(tmp_path, reports)
    assert inductor_config.cpp.inject_relu_bug_TESTING_ONLY is None
    code, clean = reports["clean"]
    assert (code, clean["verdict"], clean["model_level"]) == (0, "clean", "match"), clean
    assert clean["stats"]["compiles_by_stage"] == {"localise": 1} and clean["stats"]["compiles_reused"] == 1, clean["stats"]
    code, planted = reports["planted"]
    assert (code, planted["verdict"], planted["culprit"]["op"]) == (1, "divergent", "aten.relu.default"), planted
    assert planted["model_level"] == "mismatch", planted["model_level"]


def _two_runs(tmp_path, reports):
    import json

    from click.testing import CliRunner

    from bisect_engine.cli import main

    for name, plant in (("clean", ""), ("planted", "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'\n")):
        path = tmp_path / f"{name}.py"
        path.write_text("import torch\nimport torch._inductor.config\n" + plant +
                        "def get_model():\n    torch.manual_seed(0)\n"
                        "    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))\n"
                        "def get_inputs():\n    return (torch.randn(8, 16, generator=torch.Generator().manual_seed(1)),)\n")
        out = tmp_path / f"out-{name}"
        result = CliRunner().invoke(main, ["run", str(path), "--out", str(out), "-q", "--verify-runs", "0",
                                           "--stage", "localise"])
        reports[name] = (result.exit_code, json.loads((out / "report.json").read_text()))
