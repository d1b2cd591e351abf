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
from bisect_engine.verdict.shapes import data_dependent


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
    (role, _attribute, inputs), (mask_role, _, mask_inputs) = subgraph_calls(flex, values)  # no block mask: a no-op mask_mod
    assert role == "score_mod" and inputs[0].shape == (1, 2, 128, 128)
    assert mask_role == "mask_mod" and [t.shape for t in mask_inputs] == [t.shape for t in inputs[1:5]]
    assert [tuple(t.shape) for t in inputs[1:5]] == [(1, 1, 1, 1), (1, 2, 1, 1), (1, 1, 128, 1), (1, 1, 1, 128)]
    torch.testing.assert_close(inputs[0], q @ k.transpose(-2, -1) * 8 ** -0.5)


def _captured(module: torch.nn.Module, *inputs: torch.Tensor) -> tuple[GraphView, dict[str, Any]]:
    with torch.no_grad():
        graphs, _ = capture(module, inputs)
    return GraphView(graphs[0].graph_module), interpret(graphs[0].graph_module, graphs[0].inputs)


def _ops(view: GraphView, attribute: str, inputs: list[Any]) -> set[str]:
    traced = traced_subgraph(view.graph_module, attribute, inputs, "inner", 0)
    return {str(n.target) for n in traced.graph_module.graph.nodes if n.op == "call_function"}


def test_flex_attention_mask_mod_is_called_on_the_broadcast_indices_and_its_buffers() -> None:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    def window(b, h, q_idx, kv_idx):
        return torch.abs(q_idx - kv_idx) <= 16

    class Attention(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block_mask = create_block_mask(window, None, None, 128, 128, device="cpu")

        def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return flex_attention(q, k, v, block_mask=self.block_mask)

    q, k, v = (torch.randn(1, 2, 128, 8) for _ in range(3))
    view, values = _captured(Attention(), q, k, v)
    flex = next(node for node in view.compute_nodes if hop_name(node) == "flex_attention")
    calls = subgraph_calls(flex, values)
    assert [role for role, _, _ in calls] == ["score_mod", "mask_mod"]
    _, attribute, inputs = calls[1]
    assert "aten.abs.default" in _ops(view, attribute, inputs)
    (mask,) = run_graph(traced_subgraph(view.graph_module, attribute, inputs, "inner", 0).graph_module, inputs)
    assert mask.shape == (1, 1, 128, 128) and int(mask.sum()) == sum(min(i + 16, 127) - max(i - 16, 0) + 1 for i in range(128))


def test_a_while_loop_body_is_traced_on_its_first_iterations_values() -> None:
    from torch._higher_order_ops import while_loop

    class Loop(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, torch.sin(h) * 2),
                              (torch.zeros((), dtype=torch.int64), x))[1]

    x = torch.randn(4, 8)
    view, values = _captured(Loop(), x)
    loop = next(node for node in view.compute_nodes if hop_name(node) == "while_loop")
    (body_role, body, inputs), (cond_role, _, _) = subgraph_calls(loop, values)
    assert (body_role, cond_role) == ("body_fn", "cond_fn") and int(inputs[0]) == 0
    torch.testing.assert_close(inputs[1], x, rtol=0, atol=0)
    assert "aten.sin.default" in _ops(view, body, inputs)
    assert data_dependent(view.graph_module)  # compiled on fake inputs with a ShapeEnv, as Dynamo does


def test_a_scan_combine_fn_is_traced_on_its_first_step() -> None:
    from torch._higher_order_ops.scan import scan

    class Scan(torch.nn.Module):
        def forward(self, init: torch.Tensor, xs: torch.Tensor) -> torch.Tensor:
            def step(h: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
                h = torch.sin(h + x)
                return h, h * 2
            return scan(step, init, xs)[1]

    init, xs = torch.randn(4, 8), torch.randn(5, 4, 8)
    view, values = _captured(Scan(), init, xs)
    node = next(node for node in view.compute_nodes if hop_name(node) == "scan")
    ((role, attribute, inputs),) = subgraph_calls(node, values)
    assert role == "combine_fn" and [tuple(t.shape) for t in inputs] == [(4, 8), (4, 8)]
    torch.testing.assert_close(inputs[1], xs[0], rtol=0, atol=0)
    assert "aten.sin.default" in _ops(view, attribute, inputs)
    assert data_dependent(view.graph_module)


def test_a_hop_the_descent_cannot_replay_is_named_not_checked_inside() -> None:
    from bisect_engine.strategies.inside import _not_descended

    root = torch.nn.Module()
    root.body_graph_0 = fx.symbolic_trace(lambda x: torch.sin(x))
    graph = fx.Graph()
    x = graph.placeholder("x")
    body = graph.get_attr("body_graph_0")
    mapped = graph.call_function(torch.ops.higher_order.map_impl, (body, [x], []))
    graph.output(mapped)
    fx.GraphModule(root, graph)
    assert hop_name(mapped) == "map_impl" and subgraph_calls(mapped, {}) == []
    inside = _not_descended(mapped, mapped.name, "map_impl", "forward_0")
    assert inside is not None and inside.op is None and inside.attribute == "body_graph_0"
    assert inside.note.startswith("not checked inside: the tool does not descend into map_impl")


class _Growth(torch.nn.Module):
    """A while_loop whose carry doubles: its tanh reads values above 2 only from iteration 3 on."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch._higher_order_ops import while_loop

        return while_loop(lambda i, h: i < 5, lambda i, h: (i + 1, 2 * h + 0.01 * torch.tanh(h)),
                          (torch.zeros((), dtype=torch.int64), x))[1]


class _WrongAbove:
    """A stand-in search (no compile): judges tanh wrong alone where its input exceeds 2, as a
    lowering bug only large values reach would; every other op right."""

    def __init__(self, above: float = 2.0) -> None:
        self.above = above
        self.contexts: dict[str, Any] = {}
        self.judged: list[str] = []

    def judge(self, candidate: Any) -> Any:
        from types import SimpleNamespace

        from bisect_engine.verdict.compare import Outcome
        from bisect_engine.verdict.oracle import SubgraphVerdict

        self.judged.append(candidate.graph)
        context = self.contexts[candidate.graph]
        wrong = {name for name in candidate.nodes if context.view.nodes[name].target is torch.ops.aten.tanh.default
                 and float(context.eager_values[context.view.nodes[name].args[0].name].abs().max()) > self.above}
        outputs = {name: SimpleNamespace(outcome=Outcome.MISMATCH if name in wrong else Outcome.MATCH)
                   for name in candidate.nodes}
        return SubgraphVerdict(Outcome.MISMATCH if wrong else Outcome.MATCH, outputs)


def test_a_loops_later_iterations_are_replayed_eagerly_with_their_carry() -> None:
    from bisect_engine.strategies.inside import later_calls

    x = torch.full((2, 3), 0.5)
    view, values = _captured(_Growth(), x)
    loop = next(node for node in view.compute_nodes if hop_name(node) == "while_loop")
    calls = later_calls(view.graph_module, loop, values)
    assert [int(call[0]) for call in calls] == [1, 2, 3, 4]  # the cond_fn stops it at 5
    expected = x
    for call in calls:
        expected = 2 * expected + 0.01 * torch.tanh(expected)
        torch.testing.assert_close(call[1], expected)
    assert len(later_calls(view.graph_module, loop, values, limit=2)) == 2


def test_a_scans_later_steps_are_replayed_with_each_xs_at_its_step() -> None:
    from torch._higher_order_ops.scan import scan

    from bisect_engine.strategies.inside import later_calls

    class Scan(torch.nn.Module):
        def forward(self, init: torch.Tensor, xs: torch.Tensor) -> torch.Tensor:
            return scan(lambda h, x: (h + x, h * 2), init, xs)[1]

    init, xs = torch.zeros(2, 3), torch.arange(12.0).reshape(4, 1, 3).expand(4, 2, 3).contiguous()
    view, values = _captured(Scan(), init, xs)
    node = next(node for node in view.compute_nodes if hop_name(node) == "scan")
    calls = later_calls(view.graph_module, node, values)
    assert len(calls) == 3
    for step, (carry, x_t) in enumerate(calls, start=1):
        torch.testing.assert_close(carry, xs[:step].sum(0), rtol=0, atol=0)
        torch.testing.assert_close(x_t, xs[step], rtol=0, atol=0)


def test_an_op_wrong_only_on_a_later_iteration_is_named_with_that_iteration_and_its_carry() -> None:
    from bisect_engine.localise.hop import later_iteration_window
    from bisect_engine.localise.records import GraphFinding
    from bisect_engine.output.inside import inside_lines
    from bisect_engine.verdict.compare import Outcome
    from bisect_engine.verdict.oracle import SubgraphVerdict
    from bisect_engine.strategies.inside import descend
    from bisect_engine.verdict.graphs import CapturedGraph
    from bisect_engine.verdict.oracle import GraphContext

    x = torch.full((2, 3), 0.75)  # the carry: 0.75, 1.5, 3.0 -> tanh above 2 from iteration 2 on
    with torch.no_grad():
        graphs, _ = capture(_Growth(), (x,))
    context = GraphContext.from_captured(graphs[0])
    search = _WrongAbove()
    search.contexts[context.name] = context
    loop = next(node for node in context.view.compute_nodes if hop_name(node) == "while_loop")
    inside = descend(context, loop.name, search, lambda inner: search.contexts.__setitem__(inner.name, inner))
    assert inside is not None and inside.op == "aten.tanh.default" and inside.iteration == 2
    assert inside.to_json()["iteration"] == 2 and inside.graph.endswith(".iteration2")
    assert "on iteration 2" in inside_lines({"inside": inside.to_json()})[0]
    torch.testing.assert_close(inside.at.captured.inputs[1], 4 * x + 0.01 * (2 * torch.tanh(x) + torch.tanh(2 * x + 0.01 * torch.tanh(x))))
    # the repro: that iteration's body, from the carry it enters with to the op
    finding = later_iteration_window(GraphFinding(context, SubgraphVerdict(Outcome.MISMATCH), inside=inside))
    assert finding is not None and finding.context is inside.at and finding.window[0] == inside.node
    assert finding.context.captured.inputs[1] is inside.at.captured.inputs[1]

    never = _WrongAbove(above=float("inf"))  # no iteration wrong: the HOP stays named, the iterations said
    never.contexts[context.name] = context
    clean = descend(context, loop.name, never, lambda inner: never.contexts.__setitem__(inner.name, inner))
    assert clean is not None and clean.op is None and "checked on 5 iteration(s)" in clean.note


def test_a_budget_cut_while_replaying_later_iterations_keeps_the_first_iterations_finding() -> None:
    from bisect_engine.search import BudgetExhausted
    from bisect_engine.strategies.inside import descend
    from bisect_engine.verdict.oracle import GraphContext

    class Cut(_WrongAbove):
        def judge(self, candidate: Any) -> Any:
            if len(self.judged) == 3:  # the first iteration's body_fn and cond_fn, one later body: out
                raise BudgetExhausted("max compiles reached", "max_compiles")
            return super().judge(candidate)

    with torch.no_grad():
        graphs, _ = capture(_Growth(), (torch.full((2, 3), 0.75),))
    context = GraphContext.from_captured(graphs[0])
    search = Cut(above=float("inf"))
    search.contexts[context.name] = context
    loop = next(node for node in context.view.compute_nodes if hop_name(node) == "while_loop")
    inside = descend(context, loop.name, search, lambda inner: search.contexts.__setitem__(inner.name, inner))
    assert inside is not None and inside.op is None and inside.iteration == 0
    assert "checked on 2 iteration(s)" in inside.note and len(search.judged) == 3


def test_flex_attention_with_grad_on_cpu_raises_in_eager_too_and_the_message_says_nothing_was_compared() -> None:
    """torch 2.13 has no flex attention backward on CPU, and its own argument check raises before
    any compile: the model cannot run with grad at all. Named as the model's error (exit 2), with
    eager raising the same, never a compiler verdict."""
    from torch.nn.attention.flex_attention import flex_attention

    from bisect_engine.errors import ModelError

    class Attend(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q = self.proj(x).view(1, 1, 16, 8)
            return flex_attention(q, q, q)

    with pytest.raises(ModelError) as raised:
        capture(Attend(), (torch.randn(16, 8),), loss_fn=lambda out: out.sum())
    assert "FlexAttention does not support backward on CPU" in str(raised.value)
    assert "it raises the same when run eagerly, without torch.compile: nothing was compiled or compared" in str(raised.value)


def test_a_capture_that_fails_where_eager_runs_says_the_failure_is_not_the_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure of the capture itself (here: its backend, as the import race in this tool once
    did) is not named the model's own error."""
    from bisect_engine.errors import ModelError
    from bisect_engine.load import capture as capture_module

    def broken(self: object, graph_module: object, example_inputs: object) -> None:
        raise ModuleNotFoundError("No module named 'half_imported'")

    monkeypatch.setattr(capture_module.CaptureBackend, "__call__", broken)
    with pytest.raises(ModelError) as raised:
        capture(torch.nn.Linear(4, 4), (torch.randn(2, 4),))
    assert "half_imported" in str(raised.value)
    assert "it runs without error eagerly, without torch.compile" in str(raised.value)
    assert "raises the same when run eagerly" not in str(raised.value)


def test_a_while_loop_under_autograd_compiles_nothing_in_2_13_and_the_users_compile_is_checked_to_say_so() -> None:
    """torch 2.13 cannot trace while_loop's backward (Dynamo graph-breaks with gb0219 for every
    backend, AOT's and Inductor's), so the frames run eagerly. Our capture then captures nothing;
    that is said as "compiled nothing" only after the user's own compile is run and compiles nothing
    too (were it to compile, our capture would be the harness: exit 3)."""
    from pathlib import Path

    from torch._higher_order_ops import while_loop

    from bisect_engine.load.model_file import ModelSpec
    from bisect_engine.localise.nothing_compiled import why_nothing_compiled

    class Refine(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.step = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, torch.sin(self.step(h))),
                              (torch.zeros((), dtype=torch.int64), x))[1]

    torch._dynamo.reset()
    model, inputs = Refine(), (torch.randn(2, 4),)
    graphs, _ = capture(model, inputs, loss_fn=lambda out: out.sum())
    assert graphs == []  # every frame graph-broke in our capture backend too
    spec = ModelSpec(Path("m.py"), model, inputs, lambda out: out.sum(), None)
    message = why_nothing_compiled(spec, 0)
    assert "every graph Dynamo traced made the backend fail (it failed with" in message, message
    assert "the user's own torch.compile does the same (checked: it compiled nothing)" in message


def test_our_capture_failing_where_the_users_compile_compiles_is_the_harness_never_compiled_nothing() -> None:
    """The other branch: the backend failures Dynamo recorded were our capture's (planted here in
    its counters), while the user's own compile of the model compiles: an internal error (exit 3)
    that names the harness, never "compiled nothing" (exit 2)."""
    from pathlib import Path

    from torch._dynamo.utils import counters

    from bisect_engine.load.model_file import ModelSpec
    from bisect_engine.localise.nothing_compiled import CaptureFailed, why_nothing_compiled

    torch._dynamo.reset()
    reason = "Backend compiler exception\n  Explanation: Backend compiler `ours` failed with boom. Adding a graph break."
    kept = counters.pop("unimplemented", None)  # this process's earlier graph breaks set aside
    counters["unimplemented"][reason] += 1
    try:
        spec = ModelSpec(Path("m.py"), torch.nn.Linear(4, 4).eval(), (torch.randn(2, 4),), None, None)
        with pytest.raises(CaptureFailed, match=r"harness: our capture backend failed on every graph \(it failed with boom\)"):
            why_nothing_compiled(spec, 0)
    finally:
        counters.pop("unimplemented", None)
        if kept is not None:
            counters["unimplemented"] = kept
        torch._dynamo.reset()
