"""Amplified divergences (issue 11): the pure rules on both sides of each threshold, and the
strategy on a real aten graph with a fake compiler that is off by one ulp in one node."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import pytest
import torch
import torch.fx as fx
from torch.fx.experimental.proxy_tensor import make_fx

from bisect_engine.localise.judge import Judge, RunSearch, new_search
from bisect_engine.localise.options import EngineOptions
from bisect_engine.strategies.amplify import differing_nodes, find_amplification
from bisect_engine.strategies.departures import find_departures
from bisect_engine.strategies.nodes import check_nodes
from bisect_engine.verdict.candidate import ReplayCandidate
from bisect_engine.verdict.compare import (
    BITWISE,
    MATERIAL_FRACTION,
    MATERIAL_ULPS,
    Outcome,
    closer_to_fp64,
    compare_tensor,
    elementwise_change,
    material_difference,
    reference_unreliable,
    rounding_unit,
)
from bisect_engine.verdict.compiler import Compiler
from bisect_engine.verdict.graphs import CapturedGraph
from bisect_engine.verdict.oracle import GraphContext

U32 = rounding_unit(torch.float32)
UBF16 = rounding_unit(torch.bfloat16)


def ones(n: int = 64, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """+-1: the RMS scale is exactly 1."""
    return torch.where(torch.arange(n) % 3 == 0, -1.0, 1.0).to(dtype)


def with_one(base: torch.Tensor, delta: float) -> torch.Tensor:
    changed = base.clone()
    changed[5] = changed[5] + delta
    return changed


# ---- material_difference: fp32 is bounded by MATERIAL_FRACTION of the scale -------------------

def test_fp32_difference_below_the_fraction_is_noise_and_above_it_material() -> None:
    base = ones().to(torch.float64)
    assert MATERIAL_FRACTION > MATERIAL_ULPS * U32  # fp32: the fraction decides
    below = material_difference(base.float(), with_one(base, 0.9 * MATERIAL_FRACTION).float())
    above = material_difference(base.float(), with_one(base, 1.2 * MATERIAL_FRACTION).float())
    assert not below.material and below.elements == 1
    assert above.material and above.reason == "scale"


def test_bf16_difference_is_measured_in_its_own_ulps() -> None:
    base = ones(dtype=torch.float64)
    assert MATERIAL_ULPS * UBF16 > MATERIAL_FRACTION  # bf16: 64 ulps decide
    below = material_difference(base.bfloat16(), with_one(base, 48 * UBF16).bfloat16())
    above = material_difference(base.bfloat16(), with_one(base, 96 * UBF16).bfloat16())
    assert not below.material
    assert above.material


def test_integer_and_boolean_values_differ_materially_by_any_element() -> None:
    cents = torch.arange(10)
    assert not material_difference(cents, cents.clone()).material
    off_by_one = material_difference(cents, cents + (torch.arange(10) == 3))
    assert off_by_one.material and off_by_one.elements == 1 and off_by_one.reason == "exact"
    flags = torch.tensor([True, False, True])
    assert material_difference(flags, ~flags).material


def test_finiteness_changing_anywhere_is_material_and_shared_nan_is_not() -> None:
    base = ones()
    assert material_difference(base, with_one(base, math.inf)).reason == "nonfinite"
    nan = with_one(base, math.nan)
    assert not material_difference(nan, nan.clone()).material


def test_fp64_reference_is_unreliable_only_when_eager_is_far_from_it() -> None:
    reference = ones(dtype=torch.float64)
    assert not reference_unreliable(with_one(reference, 4 * U32).float(), reference)
    assert reference_unreliable(with_one(reference, 0.5).float(), reference)
    # integers derived from floats: fp64 truncates another element to another integer
    assert reference_unreliable(torch.tensor([3, 7, 12]), torch.tensor([3, 6, 12]))
    assert not reference_unreliable(torch.tensor([3, 7, 12]), torch.tensor([3, 7, 12]))


def test_elementwise_change_is_relative_per_element() -> None:
    assert elementwise_change(torch.tensor([1e-8, 1.0]), torch.tensor([0.0, 1.0])) == 1.0
    assert elementwise_change(torch.tensor([2.0]), torch.tensor([2.0])) == 0.0
    assert elementwise_change(torch.tensor([1.0]), torch.tensor([math.inf])) == math.inf


def test_closer_to_fp64_needs_both_a_departure_beyond_the_floors_and_a_smaller_error() -> None:
    reference = ones(dtype=torch.float64) * 1.5
    eager = (reference + 32 * UBF16 * 1.5 * (torch.arange(64) % 2)).bfloat16()  # eager off by 32 ulps on half
    exact = reference.bfloat16()
    departure = closer_to_fp64(eager, reference, exact)
    assert departure is not None and departure.compiled_rms_ulps < departure.eager_rms_ulps
    # the other way round (compiled is the one far from fp64): no departure, a mismatch
    assert closer_to_fp64(exact, reference, eager) is None
    # within the floors: no departure
    assert closer_to_fp64(exact, reference, exact.clone()) is None


def test_bitwise_tolerance_against_eager_accepts_only_equal_values() -> None:
    eager = ones()
    assert compare_tensor(eager, eager, eager.clone(), BITWISE).outcome is Outcome.MATCH
    nudged = eager.clone()
    nudged[0] = torch.nextafter(nudged[0], torch.tensor(2.0))
    assert compare_tensor(eager, eager, nudged, BITWISE).outcome is Outcome.MISMATCH
    assert compare_tensor(eager, eager, nudged).outcome is Outcome.MATCH  # one ulp: within the floors


def test_engine_options_map_the_oracles_to_a_reference_and_tolerance() -> None:
    assert EngineOptions().reference == "fp64"
    assert EngineOptions(oracle="eager").reference == "eager"
    assert EngineOptions(oracle="bitwise").graph_tolerance == BITWISE


# ---- the strategy: a one-ulp difference that a cast to integers amplifies ---------------------

def _cents(price: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    rounded = torch.round(price * 1.0, decimals=2)
    cents = (rounded * 100).long() % 100
    return table[cents] * 2.0


class OneUlpCompiler(Compiler):
    """'Compiles' by running eagerly, with every ``target`` op's output one ulp up (a real
    decomposition that multiplies by an inexact constant)."""

    def __init__(self, target: Any):
        super().__init__()
        self.target = target

    def compile(self, graph_module: fx.GraphModule, example_inputs: Sequence[Any], **_: Any) -> Callable[..., Any]:
        self.budget.check(self.compiles)
        self.compiles += 1
        self.by_stage[self.stage] = self.by_stage.get(self.stage, 0) + 1
        target = self.target

        class Nudging(fx.Interpreter):
            def run_node(self, node: fx.Node) -> Any:
                result = super().run_node(node)
                if node.op == "call_function" and node.target is target:
                    return torch.nextafter(result, torch.full_like(result, math.inf))
                return result

        return lambda *args: Nudging(graph_module).run(*args)


@pytest.fixture(scope="module")
def cents_context() -> GraphContext:
    # prices a hair below a cent boundary: one ulp up crosses it after the cast
    price = (torch.arange(1, 65, dtype=torch.float64) * 0.37 + 0.005).float()
    price = torch.nextafter(price, torch.zeros_like(price))
    inputs = [price, torch.randn(100, 3, generator=torch.Generator().manual_seed(0))]
    graph_module = make_fx(_cents)(*inputs)
    return GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, graph_module, inputs, True))


def _search(context: GraphContext, compiler: Compiler) -> tuple[Judge, RunSearch]:
    judge = Judge(compiler)
    judge.add(context)
    return judge, new_search(judge)


def test_a_one_ulp_node_amplified_by_an_integer_cast_is_named_with_no_extra_compile(cents_context: GraphContext) -> None:
    context = cents_context
    compiler = OneUlpCompiler(torch.ops.aten.round.decimals)
    judge, search = _search(context, compiler)
    check = check_nodes(context, search)
    assert check.culprits == ()  # one ulp: no culprit by the fp64 rule
    outputs = context.view.output_names()
    judge.add_compiled(context.name, check.verdict.compiled_values)
    found = find_amplification(context, search, check.checked, check.verdict.compiled_values, outputs)
    assert found is not None
    assert context.view.nodes[found.culprit].target is torch.ops.aten.round.decimals
    assert found.together == () and found.own_ulps <= 2 and not found.own.material
    first = context.view.nodes[found.amplifiers[0].node]
    assert first.target is torch.ops.aten._to_copy.default and found.amplifiers[0].why == "quantises"
    assert found.output_difference.material
    assert compiler.compiles == 1  # the per-node check only
    replays = [key for key, _ in search.history if isinstance(key, ReplayCandidate)]
    assert found.replays == len(replays) + 1  # the searched replays and the one that walks the path


def test_no_amplification_when_no_injection_reproduces(cents_context: GraphContext) -> None:
    context = cents_context
    compiler = OneUlpCompiler(torch.ops.aten.index.Tensor)  # the gather after the cast: one ulp stays one ulp
    judge, search = _search(context, compiler)
    check = check_nodes(context, search)
    judge.add_compiled(context.name, check.verdict.compiled_values)
    outputs = context.view.output_names()
    assert differing_nodes(context, check.checked, check.verdict.compiled_values)  # the nudge is there
    assert find_amplification(context, search, check.checked, check.verdict.compiled_values, outputs) is None
    assert search.calls == 2  # the per-node check and one replay with every difference injected


def test_departures_list_a_compiled_value_closer_to_fp64() -> None:
    def shift(x: torch.Tensor) -> torch.Tensor:
        return (x + 32.0) - 32.0

    x = torch.randn(64, 16, generator=torch.Generator().manual_seed(0)).bfloat16()
    graph_module = make_fx(shift)(x)
    context = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, graph_module, [x], True))
    output = context.view.output_names()[0]
    fused = {output: (x.double() + 32.0 - 32.0).bfloat16()}  # what a fused fp32 kernel computes
    found = find_departures(context, fused, "graph")
    assert [d.value for d in found] == [output]
    assert found[0].departure.compiled_rms_ulps < found[0].departure.eager_rms_ulps
    assert find_departures(context, {output: context.eager_values[output]}, "graph") == []
