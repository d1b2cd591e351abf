"""Issue 37, the corpus's misses in process (no compile): the fp64 reference sees a Python scalar as
eager's op does (pytorch#183083), a narrowing cast read by a promoting op is named as elided
(pytorch#181568), and a window is named by its culprit, not its first node (#189518, #194706)."""
from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from bisect_engine.strategies.departures import elided_cast, narrowing_casts
from bisect_engine.strategies.windows import attributed_node, named_by_error, window_culprit
from bisect_engine.verdict.compare import Outcome
from bisect_engine.verdict.fx_eval import run_graph, scalar_arguments
from bisect_engine.verdict.graphs import CapturedGraph
from bisect_engine.verdict.compare import TensorVerdict
from bisect_engine.verdict.oracle import GraphContext, SubgraphVerdict
from bisect_engine.verdict.upcast import Upcast

X16 = torch.tensor([-4.0, -1.5, -0.0, 0.0, 0.1, 1.0, 3.140625, 8.0], dtype=torch.float16)  # pytorch#183083


def _remainder(x: torch.Tensor) -> torch.Tensor:
    return torch.remainder(x, 3.14)


def test_the_fp64_reference_rounds_a_scalar_where_eager_does() -> None:
    graph_module = make_fx(_remainder)(X16)
    (node,) = [n for n in graph_module.graph.nodes if n.op == "call_function"]
    assert scalar_arguments(node.target, node.args, node.kwargs) == [(1, 3.14)]
    (fp64,) = run_graph(graph_module, [X16], upcast=True)
    eager = torch.remainder(X16, 3.14)
    assert fp64.dtype == torch.float64 and eager[6] == 0
    assert torch.equal(fp64.to(torch.float16), eager)  # 3.140625 % 3.140625: 0, as eager (not 6.2e-4)
    unrounded = torch.remainder(X16.double(), 3.14)
    assert not torch.equal(unrounded.to(torch.float16), eager)  # the naive reference sides with compiled
    with Upcast():  # the model-level reference the same way
        assert torch.equal(torch.remainder(X16, 3.14).to(torch.float16), eager)


def _filled(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    y = x.clone()
    y.fill_(0.3)
    return (torch.full((3,), 3.14, dtype=torch.float16) * x[:3], torch.full_like(x, 0.1), x.new_full((2,), 0.3), y,
            torch.full((2,), 0.1, dtype=torch.float64))


def test_a_factory_fills_the_fp64_reference_with_the_value_its_dtype_stores() -> None:
    """``torch.full(..., 3.14, dtype=fp16)`` holds 3.140625 in eager: the fp64 reference reads the
    stored value, as it reads an fp16 input's (not 3.14, which sides with a kernel keeping it wide);
    an fp64 factory keeps its value as written."""
    eager = _filled(X16)
    fp64 = run_graph(make_fx(_filled)(X16), [X16], upcast=True)
    assert all(torch.equal(f.to(e.dtype), e) for f, e in zip(fp64, eager))
    assert torch.equal(fp64[0], 3.140625 * X16[:3].double()) and fp64[1][0].item() == 0.0999755859375
    assert fp64[-1][0].item() == 0.1
    with Upcast():  # the model-level reference the same way
        assert torch.equal(_filled(X16)[0].double(), 3.140625 * X16[:3].double())


def test_a_scalar_eager_keeps_wide_stays_as_written_and_a_draw_is_not_repeated() -> None:
    values = torch.randn(4096, generator=torch.Generator().manual_seed(0)).to(torch.float16)
    graph_module = make_fx(lambda x: x * 0.1)(values)  # CPU mul keeps 0.1 in fp32: eager is sensitive
    (fp64,) = run_graph(graph_module, [values], upcast=True)
    assert torch.equal(fp64, values.double() * 0.1)
    (again,) = run_graph(graph_module, [values], upcast=True)  # seen to keep it wide: not asked again
    assert torch.equal(again, fp64)
    fp32 = values.float()  # an fp32 op: the scalar stays as written
    (wide,) = run_graph(make_fx(lambda x: torch.remainder(x, 3.14))(fp32), [fp32], upcast=True)
    assert torch.equal(wide, torch.remainder(fp32.double(), 3.14))

    def dropped(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.dropout(x, 0.3) * 2.0

    traced = _traced(dropped, values)  # torch.nn.functional.dropout(x, 0.3): a float the probe must not ask about
    torch.manual_seed(1)
    expected = dropped(values)
    torch.manual_seed(1)
    (drawn,) = run_graph(traced, [values], upcast=True)
    assert torch.equal(drawn.to(torch.float16) == 0, expected == 0)  # the same draws: the probe drew nothing


def test_a_continuous_ops_scalar_stays_as_written_where_eager_rounds_it() -> None:
    """``1.7 - x`` in bf16: eager rounds 1.7 to 1.703125, a shift of bf16's own rounding noise; the
    reference keeps 1.7 (a compiled kernel keeping it is judged closer to fp64, never wrong: the
    corpus's bf16 hinge cases). Only an op whose result jumps with its scalar is rounded as eager."""
    x = (torch.linspace(-4, 4, 8193, dtype=torch.float64) * 1.7).to(torch.bfloat16)
    assert torch.equal(1.7 - x, 1.703125 - x)  # eager rounds the scalar here
    (fp64,) = run_graph(make_fx(lambda t: 1.7 - t)(x), [x], upcast=True)
    assert torch.equal(fp64, 1.7 - x.double())


def _traced(fn, *inputs: torch.Tensor):  # type: ignore[no-untyped-def]
    """A Dynamo-level graph (torch functions, no schema), as script mode checks it."""
    graphs = []

    def backend(graph_module, example_inputs):  # type: ignore[no-untyped-def]
        graphs.append(graph_module)
        return graph_module

    torch._dynamo.reset()
    torch.compile(fn, backend=backend)(*inputs)
    return graphs[0]


# ---- cast elision (issue 37 item 4): a narrowing cast read by an op that promotes it -------------
def _matmul_cast_add(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = (x @ w).to(torch.bfloat16) + b  # pytorch#181568: the add promotes the bf16 value back to fp32
    return y, y.mean(-1)


def test_a_cast_read_wide_by_a_promoting_op_is_named_as_elided() -> None:
    generator = torch.Generator().manual_seed(119)
    inputs = [torch.randn(2, 15, 32, generator=generator), torch.randn(32, 17, generator=generator),
              torch.randn(17, generator=generator)]
    graph_module = make_fx(_matmul_cast_add)(*inputs)
    context = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, graph_module, inputs, True))
    ((cast, reader),) = narrowing_casts(context)
    assert context.view.nodes[cast].target == torch.ops.aten._to_copy.default
    assert context.view.nodes[reader].target == torch.ops.aten.add.Tensor
    x, w, b = inputs
    kept = (x @ w) + b  # what Inductor's fused kernel computes: the bf16 rounding skipped
    outputs = context.view.output_names()
    found = elided_cast(context, {outputs[0]: kept, outputs[1]: kept.mean(-1)})
    assert found is not None and (found.node, found.back, found.dtype) == (cast, reader, "torch.bfloat16")
    assert found.outputs == tuple(outputs) and found.together == ()
    other = {outputs[0]: kept + 0.5, outputs[1]: kept.mean(-1) + 0.5}  # a difference the cast does not explain
    assert elided_cast(context, other) is None


# ---- a window named by its culprit ---------------------------------------------------------------
def _ones_cumsum() -> torch.Tensor:
    return torch.ones((2, 4, 4), dtype=torch.bool).cumsum(1, dtype=torch.bfloat16)  # pytorch#189518


def test_a_window_is_named_by_the_node_whose_own_output_departs() -> None:
    graph_module = make_fx(_ones_cumsum)()
    context = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, graph_module, [], True))
    window = tuple(n.name for n in context.view.compute_nodes)
    assert [str(context.view.nodes[n].target) for n in window] == ["aten.ones.default", "aten.cumsum.default"]
    output = context.view.output_names()[0]
    verdict = SubgraphVerdict(Outcome.MISMATCH, {output: TensorVerdict(Outcome.MISMATCH, reason="dtype")})
    assert window_culprit(context.view, window, verdict) == window[1]  # cumsum, not ones
    assert window_culprit(context.view, window, None) == window[0]  # nothing known: the first node


CPP_ERROR = ("CppCompileError: C++ compile error\nCommand:\ng++ /tmp/x.main.cpp -O3\nOutput:\n/tmp/x.main.cpp: In function "
             "'void kernel(const c10::Half*, c10::Half*)':\n/tmp/x.main.cpp:136:26: error: conflicting declaration "
             "'auto at_Half_tmp_acc0_vec'")  # pytorch#194706's, as the tool recorded it


def _jacfwd_window(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    flipped = torch.flip(x, [0]) * x
    return flipped.sum([1]), (flipped * 2).sum([1])


def test_a_crash_window_is_named_by_the_op_its_compile_error_names() -> None:
    x = torch.randn(3, 3).to(torch.float16)
    graph_module = make_fx(_jacfwd_window)(x)
    context = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, graph_module, [x], True))
    window = tuple(n.name for n in context.view.compute_nodes)
    ops = [str(context.view.nodes[n].target) for n in window]
    assert ops[0] == "aten.flip.default" and "aten.sum.dim_IntList" in ops
    crash = SubgraphVerdict(Outcome.CRASH, error=CPP_ERROR)
    named = window_culprit(context.view, window, crash)
    assert str(context.view.nodes[named].target) == "aten.sum.dim_IntList"  # the accumulator's reduction
    lowering = "LoweringException: AssertionError:\n  target: aten.mul.Tensor\n  args[0]: TensorBox(...)"
    assert str(context.view.nodes[named_by_error(context.view, window, lowering)].target) == "aten.mul.Tensor"
    assert named_by_error(context.view, window, "KeyError: 'buf1'") is None  # names nothing: the first node
    assert window_culprit(context.view, window, SubgraphVerdict(Outcome.CRASH, error="KeyError: 'buf1'")) == window[0]


def _abs_read_by_sum(x: torch.Tensor) -> torch.Tensor:
    magnitude = torch.abs(x)
    return torch.cat([magnitude, torch.neg(magnitude)]).sum()


def _arange_times(x: torch.Tensor) -> torch.Tensor:
    return torch.arange(x.shape[0], dtype=torch.int64) * 10**9


def test_a_window_is_named_by_the_op_whose_fallback_the_subsystem_names() -> None:
    """pytorch#187018 / #175966: the window's only failing output is its last node's; the subsystem
    bisection's lowering fallback names the op whose code differs (directly, or the op its
    Inductor decomposition reaches): the window is named by that node. A pass names no op."""
    x = torch.tensor([1, 200, 3], dtype=torch.uint8)
    context = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, make_fx(_abs_read_by_sum)(x), [x], True))
    window = tuple(n.name for n in context.view.compute_nodes)
    named = attributed_node(context.view, window, "lowering", "aten.abs.default")
    assert str(context.view.nodes[named].target) == "aten.abs.default"
    assert attributed_node(context.view, window, "pass", "pattern_matcher") is None
    assert attributed_node(context.view, window, "lowering", "aten.exp.default") is None  # not in the window
    y = torch.ones(8)
    context = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, make_fx(_arange_times)(y), [y], True))
    window = tuple(n.name for n in context.view.compute_nodes)
    named = attributed_node(context.view, window, "lowering", "prims.iota.default")
    assert named is not None and "arange" in str(context.view.nodes[named].target)  # decomposed as iota
    # A native crash's text names no op: the window's last node, the kernel the others fuse into
    # (pytorch#196681: the GELU and pads fused into the bmm's tiled reduction), never its first.
    native = SubgraphVerdict(Outcome.CRASH, error="NativeCrash: the compiled code killed its process (SIGABRT, exit -6)")
    assert window_culprit(context.view, window, native) == window[-1]
