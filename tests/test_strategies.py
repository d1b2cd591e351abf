"""Strategies on real aten graphs with a fake compiler (no Inductor): Polygraphy-style tests.

The fake compiler runs a subgraph eagerly and corrupts its outputs exactly when a planted fault
is present: one node (a per-node bug), or a chain of nodes that must be compiled *together*
(a fusion bug). Parametrised over where the fault sits, the strategies must name exactly the
planted nodes within the documented compile bounds.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import pytest
import torch
import torch.fx as fx
from torch.fx.experimental.proxy_tensor import make_fx

from bisect_engine.verdict.graphs import CapturedGraph
from bisect_engine.verdict.compare import Outcome
from bisect_engine.verdict.graphs import calls_per_copy, node_signature, plan_copies, value_nodes
from bisect_engine.verdict.oracle import GraphContext
from bisect_engine.verdict.compiler import Compiler
from bisect_engine.localise.judge import Judge, RunSearch, new_search
from fakes import FakeCompiler, kernel
from bisect_engine.strategies.nodes import check_nodes, propagators
from bisect_engine.strategies.windows import find_window


def _model(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    for _ in range(3):
        h = torch.relu(x @ w1)
        h = torch.nn.functional.layer_norm(h, (8,))
        x = torch.tanh(h @ w2) * 0.5 + x
        x = torch.sigmoid(x) - x.mean()
    return x.sum(dim=0)


@pytest.fixture(scope="module")
def context() -> GraphContext:
    torch.manual_seed(0)
    inputs = [torch.randn(4, 8), torch.randn(8, 8), torch.randn(8, 8)]
    graph_module = make_fx(_model)(*inputs)
    return GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, graph_module, inputs, True))


def _node_bug(context: GraphContext, name: str, crash: bool = False) -> FakeCompiler:
    return FakeCompiler((name,), kernel(context.view.nodes[name]), crash)


def _search(context: GraphContext, compiler: Compiler) -> RunSearch:
    judge = Judge(compiler)
    judge.add(context)
    return new_search(judge)


def _chains(context: GraphContext, length: int) -> list[tuple[str, ...]]:
    """Every producer->consumer chain of compute nodes of the given length (float outputs)."""
    view = context.view
    chains = [(n.name,) for n in view.compute_nodes if view.checkable(n)]
    for _ in range(length - 1):
        chains = [c + (s,) for c in chains for s in view.dependencies.successors(c[-1])
                  if view.checkable(view.nodes[s])]
    return [c for c in chains if isinstance(context.eager_values[c[-1]], torch.Tensor)
            and context.eager_values[c[-1]].is_floating_point()]


def test_single_node_fault_is_named_with_one_compile(context: GraphContext) -> None:
    view = context.view
    for chain in _chains(context, 1)[::3]:
        compiler = _node_bug(context, chain[0])
        check = check_nodes(context, _search(context, compiler))
        # every node with the planted node's kernel is wrong (the loop repeats it), none else
        twins = tuple(n.name for n in view.compute_nodes
                      if view.checkable(n) and kernel(n) == kernel(view.nodes[chain[0]]))
        assert chain[0] in twins
        assert check.culprits == twins
        assert compiler.compiles == 1


def test_nodes_with_one_kernel_share_one_compiled_copy(context: GraphContext) -> None:
    """The model's loop body runs 3 times: its nodes compile once and run once per twin, and
    every node still gets the value its own compiled copy computes on its own inputs."""
    compiler = FakeCompiler(("none",))
    check = check_nodes(context, _search(context, compiler))
    plain = context.judge(context.subgraph(list(check.checked), isolate=True), compiler, label="plain")
    assert check.compiled_copies < len(check.checked) and check.calls >= 3
    assert set(check.verdict.compiled_values) == set(plain.compiled_values)
    for name, value in plain.compiled_values.items():
        assert torch.equal(check.verdict.compiled_values[name], value), name


def test_copies_are_split_past_the_call_cap(context: GraphContext) -> None:
    names = [n.name for n in context.view.compute_nodes if context.view.checkable(n)]
    wide = plan_copies(context.view, names, context.eager_values, max_calls=32)
    capped = plan_copies(context.view, names, context.eager_values, max_calls=2)
    assert capped.calls == 2 and wide.calls >= 3
    assert len(capped.members) > len(wide.members)
    assert sorted(n for m in capped.members for n in m) == sorted(names)


def test_signature_tells_apart_aliased_arguments_and_constants() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> Any:
        return x * x, x * y, x * 2.0, x * 3.0, x.t() * y
    inputs = [torch.randn(4, 4), torch.randn(4, 4)]
    graph_module = make_fx(f)(*inputs)
    ctx = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, graph_module, inputs, True))
    muls = [n for n in ctx.view.compute_nodes if "mul" in str(n.target)]
    signatures = [node_signature(n, ctx.eager_values) for n in muls]
    assert len(muls) == 5 and len(set(signatures)) == 5  # aliasing, constant, stride all count
    again = make_fx(f)(*inputs)  # the same graph twice: equal signatures, node for node
    ctx2 = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, again, inputs, True))
    assert signatures == [node_signature(n, ctx2.eager_values) for n in ctx2.view.compute_nodes if "mul" in str(n.target)]


def test_downstream_nodes_of_a_culprit_are_propagators_not_culprits(context: GraphContext) -> None:
    first = context.view.compute_nodes[1].name
    compiler = _node_bug(context, first)
    check = check_nodes(context, _search(context, compiler))
    downstream, _replayed = propagators(context, first, check.verdict)
    assert check.culprits[0] == first
    assert downstream and first not in downstream
    assert all(context.view.position[name] > context.view.position[first] for name in downstream)


@pytest.mark.parametrize("length", [2, 3])
def test_fused_fault_is_found_as_exactly_its_window(context: GraphContext, length: int) -> None:
    chains = _chains(context, length)
    assert len(chains) > 5
    order = context.view.compilable_names()
    bound = 2 * math.log2(len(order)) + 4
    tested = 0
    for chain in chains[:: max(len(chains) // 8, 1)]:
        compiler = FakeCompiler(chain)
        whole = context.judge(context.whole(), compiler, label="whole")
        if whole.outcome is Outcome.MATCH:  # +1 erased downstream (e.g. by a layer norm)
            continue
        tested += 1
        search = _search(context, compiler)
        nodes = check_nodes(context, search)
        assert nodes.culprits == ()
        found = find_window(context, search, Outcome.MISMATCH, known_passing=nodes.checked)
        assert set(found) == set(chain), (chain, found)
        assert compiler.compiles <= bound, (chain, compiler.compiles, bound)
    assert tested >= 3


def test_a_crashing_node_is_found_and_the_others_still_judged(context: GraphContext) -> None:
    """The combined per-node compile raises: the group is halved down to the nodes whose own
    compile raises (all twins of the planted kernel), with their error; every other node keeps
    its verdict, in O(k log n) compiles."""
    view = context.view
    for chain in _chains(context, 1)[::7]:
        compiler = _node_bug(context, chain[0], crash=True)
        check = check_nodes(context, _search(context, compiler))
        twins = tuple(n.name for n in view.compute_nodes
                      if view.checkable(n) and kernel(n) == kernel(view.nodes[chain[0]]))
        assert tuple(name for name, _ in check.crashes) == twins
        assert all(error == "RuntimeError: planted compile error\nsecond line of the message" for _, error in check.crashes)
        assert check.culprits == () and check.group_error == ""
        for name in check.checked:
            if name not in twins:
                assert any(v.name in check.verdict.compiled_values for v in value_nodes(view.nodes[name])), name
        assert compiler.compiles <= 1 + 2 * len(twins) * math.ceil(math.log2(len(check.checked))) + len(twins)


def test_a_crash_among_many_identical_nodes_is_halved_over_their_signatures() -> None:
    """The minifier's 20 sin -> relu -> 20 cos with relu's compile raising: the halving runs over
    the three signatures (one compiled copy each), not the 41 nodes: relu alone, in a handful of
    compiles; every sin and cos keeps its verdict."""
    def f(x: torch.Tensor) -> torch.Tensor:
        for _ in range(20):
            x = torch.sin(x)
        x = torch.relu(x)
        for _ in range(20):
            x = torch.cos(x)
        return x

    inputs = [torch.randn(16)]
    ctx = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, make_fx(f)(*inputs), inputs, True))
    compiler = _node_bug(ctx, "relu", crash=True)
    check = check_nodes(ctx, _search(ctx, compiler))
    assert [name for name, _ in check.crashes] == ["relu"] and check.group_error == ""
    assert len(check.verdict.compiled_values) == len(check.checked) - 1
    assert compiler.compiles <= 5, compiler.compiles  # combined, then at most 2 per level over 3 signatures


def test_a_crash_is_told_apart_by_its_message_not_by_its_paths() -> None:
    from bisect_engine.strategies.nodes import crash_key

    def cpp(path: str, line: int, message: str) -> str:
        return (f"InductorError: CppCompileError: C++ compile error\nCommand:\ng++ {path}.cpp -o {path}.so\nOutput:\n"
                f"{path}.cpp:{line}:34: error: {message}\n   {line} | auto tmp21 = compile error!;")

    same = crash_key(cpp("/tmp/a/c5g", 35, "'compile' was not declared in this scope"))
    assert same == crash_key(cpp("/tmp/b/cpm", 15, "'compile' was not declared in this scope"))
    assert same != crash_key(cpp("/tmp/b/cpm", 15, "expected ';' before '}' token"))
    assert crash_key("RuntimeError: unhandled error") != same


def test_the_copy_plan_compiles_each_distinct_node_of_a_deep_stack_once() -> None:
    # 190 identical layers: one copy per distinct node, run 190 times (not 6 copies of 32 calls)
    assert calls_per_copy([190] * 25) == 190
    # one large group among many single nodes: split, rather than run every copy 1,000 times
    assert calls_per_copy([1000] + [1] * 100) == 64
    assert calls_per_copy([1] * 5) == 1 and calls_per_copy([]) == 1


def test_a_switch_of_aot_autograds_config_is_applied_to_that_config_alone() -> None:
    """``functorch.``-prefixed keys of a switch patch ``torch._functorch.config`` for the compile
    (Inductor's config would refuse them) and are restored after; the workaround names that module."""
    import torch._functorch.config as functorch_config

    from bisect_engine.strategies.subsystems import MODEL_FLIPS, config_workaround
    from bisect_engine.verdict.compiler import Compiler, split_patches

    assert split_patches({"functorch.donated_buffer": False, "cpp.simdlen": 1}) == ({"cpp.simdlen": 1}, {"donated_buffer": False})
    assert config_workaround({"functorch.donated_buffer": False, "fallback_random": True}).splitlines() == [
        "import torch._inductor.config", "import torch._functorch.config",
        "torch._inductor.config.fallback_random = True", "torch._functorch.config.donated_buffer = False"]
    seen: list[bool] = []

    def recording(graph: torch.fx.Graph) -> None:
        seen.append(functorch_config.donated_buffer)

    before = functorch_config.donated_buffer
    graph_module = torch.fx.symbolic_trace(lambda x: torch.relu(x) + 1)
    (patch,) = [dict(switch.patch) for switch in MODEL_FLIPS]
    compiled = Compiler().compile(graph_module, [torch.randn(4)], config_patches={**patch, "post_grad_custom_post_pass": recording})
    assert seen == [False] and functorch_config.donated_buffer == before
    out = compiled(torch.ones(4))
    assert torch.equal(out[0] if isinstance(out, (list, tuple)) else out, torch.full((4,), 2.0))


# ---- issue 37 miss (a): the captured aten graph already decomposed, wrong before Inductor -----------
def _nearest(z: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.nn.functional.interpolate(z, scale_factor=(1.3, 1.5), mode="nearest") + 1.0,)


def _nearest_twice(z: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.nn.functional.interpolate(z, scale_factor=2.0, mode="nearest") + 1.0,)


def _decomposition_search(function: Callable[..., Any], inputs: list[Any]) -> tuple[list[CapturedGraph], RunSearch]:
    """``function`` as a captured graph holds it (its Dynamo graph beside the aten graph traced of
    it as AOT Autograd traces it: the Python dispatcher on), and a run's search whose judge holds
    it; nothing is compiled."""
    from bisect_engine.verdict.decomposed import traced_as_captured

    torch_level = fx.symbolic_trace(function)
    captured = [CapturedGraph("forward_0", "forward", 0, traced_as_captured(torch_level, inputs), list(inputs),
                              called=True, torch_level=(torch_level, list(inputs)))]
    search = new_search(Judge(Compiler()))
    search.evaluator.hold(captured)  # type: ignore[attr-defined]
    return captured, search


def test_an_op_whose_decomposition_at_capture_computes_otherwise_is_named_with_a_repro_without_a_compile() -> None:
    """pytorch#198201 on torch 2.13: nearest interpolation keeps a dimension's size (3 x 1.3 -> 3)
    where eager copies the rows and the trace AOT Autograd captures reads floor(i / 1.3): the
    captured graph is wrong when run eagerly, so every node of it matches its compile. The Dynamo
    graph against the captured one, then the call against its trace, then the op eager runs
    against its decomposition: all judged by the run's search, no compile; the repro reproduces."""
    import base64

    from bisect_engine.output import repro_runtime
    from bisect_engine.output.report import decomposition_repro_spec, pre_grad_culprit
    from bisect_engine.strategies.pregrad import CAPTURE_DECOMPOSITION, localise_capture_decomposition
    from bisect_engine.verdict.candidate import DecompositionCandidate
    from types import SimpleNamespace

    x = torch.arange(12, dtype=torch.float32).reshape(1, 1, 3, 4)
    captured, search = _decomposition_search(_nearest, [x])
    rewrite = localise_capture_decomposition(captured, search)
    assert rewrite is not None and rewrite.by == CAPTURE_DECOMPOSITION and rewrite.decomposed is not None
    whole = search.known(DecompositionCandidate("forward_0"))  # the Dynamo graph against the captured one
    assert whole is not None and whole.outcome is Outcome.MISMATCH
    (node,) = rewrite.nodes
    assert node.node == "interpolate" and rewrite.aten_op == "aten.upsample_nearest2d.vec"
    assert "aten._unsafe_index.Tensor" in rewrite.decomposed.traced_ops
    assert rewrite.max_abs_diff == 4.0  # a row of the 3 x 4 arange read one row off
    assert search.spent == 0  # no compile
    culprit = pre_grad_culprit(SimpleNamespace(pre_grad=rewrite, model_attribution=None))  # type: ignore[arg-type]
    assert culprit is not None and (culprit["kind"], culprit["op"]) == ("capture_decomposition", "aten.upsample_nearest2d.vec")
    spec = decomposition_repro_spec(rewrite.decomposed, culprit, "model.py")
    assert spec.expect == "decomposition"
    from bisect_engine.output.repro import render

    assert "# The non-default Inductor config of the run (this repro compiles nothing" in render(spec).script
    status = repro_runtime.decomposition_main(rewrite.decomposed.cut.graph_module,
                                              base64.b64encode(spec.inputs_blob).decode("ascii"), None,
                                              list(spec.output_names), __file__)
    assert status == repro_runtime.EXIT_REPRODUCED
    # scale 2 traces to the same indices eager reads: the captured graph matches Dynamo's, nothing named
    captured, search = _decomposition_search(_nearest_twice, [x])
    assert localise_capture_decomposition(captured, search) is None
    assert search.calls == 1  # the whole graph judged once; no call looked at alone
