"""Symbolic shapes and size sweeps: the pure parts (intervals, grids, guards) and the shape
signature's binding, fake inputs and resizing, on synthetic values (no compile)."""
from __future__ import annotations

import pytest
import torch

from bisect_engine.strategies.sizes import SizeSweep, admissible, grid, headline, intervals, refinements
from bisect_engine.verdict.shapes import (ShapeMismatch, bind_symbols, dynamic_dims, fake_inputs, resized_inputs,
                                          shape_signature, strides_of, symbols_of)

SIGNATURE = (("int", "s0"), ("tensor", ("2", "s0", "32"), ("96*s0", "96", "1")), ("static",))


def test_intervals_merge_runs_of_failing_sizes_and_ignore_invalid_ones() -> None:
    outcomes = [(2, "match"), (3, "mismatch"), (4, "invalid"), (5, "crash"), (6, "match"), (9, "mismatch")]
    assert intervals(outcomes) == ((3, 5), (9, 9))
    assert intervals([(s, "match") for s in range(2, 9)]) == ()
    assert intervals([(s, "mismatch") for s in (7, 2, 3)]) == ((2, 7),)


def test_grid_is_every_size_when_few_else_a_spread_with_the_checked_value() -> None:
    assert grid(13) == tuple(range(2, 33))
    sizes = grid(500, limit=64)
    assert len(sizes) <= 64 and {2, 499, 500, 501, 1000} <= set(sizes) and list(sizes) == sorted(set(sizes))


def test_refinements_fill_the_gaps_where_pass_turns_to_fail() -> None:
    outcomes = [(2, "match"), (10, "match"), (20, "mismatch"), (30, "mismatch"), (40, "match")]
    assert refinements(outcomes) == tuple(range(11, 20)) + tuple(range(31, 40))
    assert len(refinements([(2, "match"), (1000, "mismatch")], limit=8)) == 8


def test_guards_exclude_sizes_the_compiled_graph_would_not_accept() -> None:
    assert admissible(["s0 <= 128"], {"s0": 100}) and not admissible(["s0 <= 128"], {"s0": 129})
    assert admissible(["u0 >= 2"], {"s0": 5})  # a symbol not bound here: no verdict, kept
    assert admissible(["not an expression ((("], {"s0": 5})


def test_headline_is_the_first_symbol_the_finding_depends_on() -> None:
    flat = SizeSweep("s0", "x dim 0", 8, 31, ((2, 32),), 2, 32, passing=0)
    steps = SizeSweep("s1", "x dim 1", 8, 31, ((12, 32),), 2, 32, passing=10)
    assert headline([flat, steps]) is steps and headline([flat]) is flat and headline([]) is None
    assert steps.smallest_failing == 12 and steps.to_json()["failing"] == [[12, 32]]


def test_symbols_are_bound_from_sizes_and_checked_against_every_size() -> None:
    x = torch.randn(2, 53, 96)[..., 32:64]
    assert symbols_of(SIGNATURE) == ["s0"]
    assert bind_symbols(SIGNATURE, [53, x, 1.5]) == {"s0": 53}
    with pytest.raises(ShapeMismatch):
        bind_symbols(SIGNATURE, [52, x, 1.5])  # the SymInt and the dim disagree
    assert bind_symbols((("tensor", ("2*s0",), ("1",)),), [torch.zeros(10)]) == {"s0": 5}  # solved


def test_strides_are_the_graphs_where_the_input_has_them_else_its_dense_layout() -> None:
    x = torch.randn(2, 53, 96)[..., 32:64]
    assert strides_of(SIGNATURE[1], x, {"s0": 53}) == ["96*s0", "96", "1"]
    assert strides_of(SIGNATURE[1], x.clone(), {"s0": 53}) == ["32*s0", "32", "1"]
    with pytest.raises(ShapeMismatch):
        strides_of(SIGNATURE[1], torch.randn(2, 53, 64)[..., ::2], {"s0": 53})


def test_fake_inputs_keep_the_same_dims_symbolic_and_the_others_static() -> None:
    x = torch.randn(2, 53, 32)
    fakes = fake_inputs(SIGNATURE, [53, x, 1.5])
    assert isinstance(fakes[0], torch.SymInt) and fakes[2] == 1.5
    size = fakes[1].shape
    assert size[0] == 2 and size[2] == 32 and isinstance(size[1], torch.SymInt)
    assert size[1].node.expr == fakes[0].node.expr and size[1].node.hint == 53  # one symbol, hinted


def test_resized_inputs_tile_real_data_along_the_symbolic_dims() -> None:
    x = torch.randn(2, 53, 96)[..., 32:64]
    symint, resized, other = resized_inputs(SIGNATURE, [53, x, 1.5], {"s0": 60})
    assert symint == 60 and other == 1.5 and resized.shape == (2, 60, 32) and resized.stride() == (5760, 96, 1)
    assert torch.equal(resized[:, :53], x) and torch.equal(resized[:, 53:], x[:, :7])
    (small,) = resized_inputs((SIGNATURE[1],), [x], {"s0": 5})
    assert torch.equal(small, x[:, :5])


def test_signature_reads_placeholders_and_is_none_for_a_static_graph() -> None:
    graph_module = torch.fx.symbolic_trace(lambda x: x + 1)
    assert shape_signature(graph_module) is None
    from torch.fx.experimental.proxy_tensor import make_fx

    traced = make_fx(lambda x: x.sin(), tracing_mode="symbolic")(torch.randn(5, 3))
    signature = shape_signature(traced)
    assert signature is not None and signature[0][0] == "tensor" and len(symbols_of(signature)) == 2
    assert dynamic_dims(signature, ["x"])[0]["input"] == "x"


def test_data_dependent_ops_are_told_apart_and_get_static_fakes_with_a_shape_env() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    from bisect_engine.verdict.shapes import data_dependent, data_dependent_ops, static_signature

    x = torch.randn(6, 4)
    for fn, expected in [(lambda t: torch.masked_select(t, t > 0), True), (lambda t: t.nonzero(), True),
                         (lambda t: t[t > 0], True), (lambda t: t.new_ones((t > 0).sum().item()), True),
                         (lambda t: t[t.sum(1).long().clamp(0, 1)], False), (lambda t: t.relu().sum(0), False)]:
        assert data_dependent(make_fx(fn, tracing_mode="symbolic")(x)) is expected
    selected = make_fx(lambda t: torch.masked_select(t, t > 0) + torch.masked_select(t, t < 0).sum(),
                       tracing_mode="symbolic")(x)
    assert data_dependent_ops(selected) == ["aten.masked_select.default"]  # report.json dynamic.data_dependent
    signature = static_signature([x.t(), 3])
    assert signature == (("tensor", ("4", "6"), ("1", "4")), ("static",)) and symbols_of(signature) == []
    (fake, three) = fake_inputs(signature, [x.t(), 3])
    assert fake.shape == (4, 6) and fake.stride() == (1, 4) and three == 3
    assert fake.fake_mode.shape_env is not None  # what traces masked_select to an unbacked size


def test_batches_of_several_sizes_mark_the_dims_dynamo_recompiles_symbolically() -> None:
    """Dynamo's automatic dynamic shapes makes symbolic the dims whose size changed among the
    batches seen so far; that graph then serves every later batch, of any of those sizes."""
    from bisect_engine.localise.scans import marked_dynamic, recompiled_dims

    batches = [(torch.zeros(13, 8), 3), (torch.zeros(20, 8), 3), (torch.zeros(13, 8), 3)]
    assert recompiled_dims(batches, 0) == [(), ()]  # the first batch: a static compile
    assert recompiled_dims(batches, 1) == [(0,), ()]
    assert recompiled_dims(batches, 2) == [(0,), ()]  # same size as batch 0, served by the symbolic graph
    assert recompiled_dims([torch.zeros(2, 4), torch.zeros(2, 5)], 1) == [(1,)]  # a bare tensor per batch
    marked = marked_dynamic((torch.zeros(20, 8), 3), [(0,), ()])
    assert getattr(marked[0], "_dynamo_dynamic_indices", set()) == {0}
    assert marked[1] == 3
    single = marked_dynamic((torch.zeros(1, 8),), [(0,)])  # a size-1 dim stays static, as Dynamo keeps it
    assert not getattr(single[0], "_dynamo_dynamic_indices", set())
