"""What found false alarms on CUDA, restated on the CPU: a precision the user allowed reaches the
ops downstream of it, attention kernels return RNG state that is no result, and recorded values
keep the layout kernels check."""
from __future__ import annotations

import operator
from typing import Any, Iterator

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx

from bisect_engine.verdict.compare import Outcome
from bisect_engine.verdict.fx_eval import clone_value, interpret, to_fp64
from bisect_engine.verdict.graphs import CapturedGraph, is_bookkeeping
from bisect_engine.verdict.oracle import GraphContext
from bisect_engine.verdict.precision import TF32

aten = torch.ops.aten


@pytest.fixture
def matmul_precision() -> Iterator[Any]:
    before = torch.get_float32_matmul_precision()
    yield torch.set_float32_matmul_precision
    torch.set_float32_matmul_precision(before)


def _dense_then_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.layer_norm(torch.relu(x @ w) - 0.5, (64,))


def _context(function: Any, inputs: list[Any]) -> GraphContext:
    graph_module = make_fx(function)(*inputs)
    return GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, graph_module, inputs, True))


def _with_matmul_error(context: GraphContext, relative: float) -> dict[str, Any]:
    """Every value of the graph, with the matmul's output off by ``relative`` per element."""
    mm = next(n.name for n in context.view.compute_nodes if n.target is aten.mm.default)
    wrong = context.eager_values[mm] * (1 + relative * (2 * torch.rand_like(context.eager_values[mm]) - 1))
    return interpret(context.captured.graph_module, context.captured.inputs, overrides={mm: wrong})


def test_a_layer_norm_after_an_allowed_tf32_matmul_is_judged_in_tf32_units(matmul_precision: Any) -> None:
    """Inductor may run the matmul in TF32 where eager did not (another layout, another algorithm):
    the norm after it then differs by TF32 roundings, thousands of float32 ulps. The user allowed
    them; a real error in the matmul still diverges."""
    torch.manual_seed(0)
    inputs = [torch.randn(32, 64), torch.randn(64, 64)]
    matmul_precision("highest")
    strict = _context(_dense_then_norm, inputs)
    tf32_like = _with_matmul_error(strict, 2 * TF32)
    output = strict.view.output_names()[0]
    assert strict.judge_whole_values(tf32_like).outcome is Outcome.MISMATCH  # float32 units: it reads as a bug
    matmul_precision("high")
    allowed = _context(_dense_then_norm, inputs)
    assert allowed.judge_whole_values(tf32_like).outcome is Outcome.MATCH, allowed.judge_whole_values(tf32_like).outputs[output]
    assert allowed.judge_whole_values(_with_matmul_error(allowed, 1e-2)).outcome is Outcome.MISMATCH


def _seeded(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.ops.bisect_test.attention_like(x)


@pytest.fixture(scope="module")
def attention_like() -> Iterator[None]:
    """An op whose schema returns RNG state beside its result, as memory-efficient attention's."""
    library = torch.library.Library("bisect_test", "DEF")
    library.define("attention_like(Tensor x) -> (Tensor output, Tensor philox_seed)")
    library.impl("attention_like", lambda x: (x * 2, torch.empty((), dtype=torch.int64).random_()), "CompositeExplicitAutograd")
    yield
    library._destroy()


def test_rng_state_an_attention_kernel_returns_is_not_judged_as_a_result(attention_like: None) -> None:
    x = torch.randn(8, 8)
    context = _context(_seeded, [x])
    getitems = [n for n in context.captured.graph_module.graph.nodes if n.target is operator.getitem]
    assert [is_bookkeeping(n) for n in getitems] == [False, True]
    values = dict(context.eager_values)
    values[getitems[1].name] = values[getitems[1].name] + 1  # another uninitialised scalar
    assert context.judge_whole_values(values).outcome is Outcome.MATCH
    values[getitems[0].name] = values[getitems[0].name] + 1  # the result itself: judged
    assert context.judge_whole_values(values).outcome is Outcome.MISMATCH


def test_recorded_values_keep_the_layout_the_op_saw() -> None:
    """A padded, expanded attention bias (row stride 12, not 10): memory-efficient attention on CUDA
    refuses a bias whose row stride is not a multiple of 4, so the copy fed again must keep it."""
    bias = torch.randn(2, 1, 5, 12)[..., :10].expand(2, 4, 5, 10)
    for copy in (clone_value(bias), to_fp64(bias)):
        assert copy.stride() == bias.stride() and torch.equal(copy.double(), bias.double())
        assert copy.untyped_storage().data_ptr() != bias.untyped_storage().data_ptr()
    context = _context(lambda b: torch.nn.functional.pad(b, (0, 2))[..., :10].expand(2, 4, 5, 10) * 1,
                       [torch.randn(2, 1, 5, 10)])
    expand = next(n.name for n in context.view.compute_nodes if n.target is aten.expand.default)
    assert context.eager_values[expand].stride() == (60, 0, 12, 1)
