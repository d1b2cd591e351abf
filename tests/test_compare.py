"""Tests for bisect_engine.verdict.compare: the ulp-based accuracy oracle.

Errors are planted in exact multiples of the rounding unit, so every threshold of the documented
rule (``compiled_rms > RATIO * eager_rms + RMS_FLOOR`` / the same for max / new non-finite values)
is probed on both sides with exact arithmetic.
"""
from __future__ import annotations

import math

import pytest
import torch

from bisect_engine.verdict.compare import (
    Outcome,
    TensorVerdict,
    Tolerance,
    compare_tensor,
    compare_values,
    rounding_unit,
    worst,
)

U32 = 2.0**-24  # fp32 unit roundoff


def signed_ones(n: int = 64) -> torch.Tensor:
    """+-1 in fp64: RMS (the oracle's scale) is exactly 1, so one ulp at scale is exactly U32."""
    return torch.where(torch.arange(n) % 3 == 0, -1.0, 1.0).to(torch.float64)


def towards_zero(ref: torch.Tensor, ulps: int) -> torch.Tensor:
    """fp32 values ``ulps`` units of 2**-24 closer to zero than +-1: exactly representable."""
    return (ref - ref.sign() * ulps * U32).to(torch.float32)


def bump_bits(tensor: torch.Tensor, steps: int = 1) -> torch.Tensor:
    """Move every element ``steps`` representable values away from zero (same dtype)."""
    int_dtype = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}[tensor.dtype]
    return (tensor.view(int_dtype) + steps).view(tensor.dtype)


def judge(eager_ulps: int, compiled_ulps: int, tolerance: Tolerance = Tolerance()):
    ref = signed_ones()
    return compare_tensor(towards_zero(ref, eager_ulps), ref, towards_zero(ref, compiled_ulps), tolerance)


# --- the rule's thresholds ------------------------------------------------------------------------


def test_planted_errors_are_measured_in_ulps_at_scale() -> None:
    verdict = judge(eager_ulps=3, compiled_ulps=5)
    assert verdict.eager_rms_ulps == pytest.approx(3.0)
    assert verdict.compiled_rms_ulps == pytest.approx(5.0)
    assert verdict.eager_max_ulps == pytest.approx(3.0)
    assert verdict.compiled_max_ulps == pytest.approx(5.0)


@pytest.mark.parametrize("compiled_ulps, expected", [(0, Outcome.MATCH), (8, Outcome.MATCH), (9, Outcome.MISMATCH), (20, Outcome.MISMATCH)])
def test_rms_floor_of_8_ulps_when_eager_is_exact(compiled_ulps: int, expected: Outcome) -> None:
    verdict = judge(eager_ulps=0, compiled_ulps=compiled_ulps)
    assert verdict.outcome is expected
    assert verdict.reason == ("" if expected is Outcome.MATCH else "rms")


@pytest.mark.parametrize("compiled_ulps, expected", [(28, Outcome.MATCH), (29, Outcome.MISMATCH)])
def test_ratio_2_plus_floor_when_eager_has_error(compiled_ulps: int, expected: Outcome) -> None:
    # eager 10 ulps off: the bound is 2 * 10 + 8 = 28 ulps.
    verdict = judge(eager_ulps=10, compiled_ulps=compiled_ulps)
    assert verdict.outcome is expected


def test_custom_tolerance_moves_the_threshold() -> None:
    assert judge(0, 9).outcome is Outcome.MISMATCH
    assert judge(0, 9, Tolerance(rms_floor_ulps=9.0)).outcome is Outcome.MATCH
    assert judge(10, 25, Tolerance(ratio=1.0)).outcome is Outcome.MISMATCH  # 25 > 1 * 10 + 8


@pytest.mark.parametrize("seed", range(5))
def test_compiled_more_accurate_than_eager_never_fails(seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    ref = torch.randn(1000, generator=generator, dtype=torch.float64)
    scale = float(ref.square().mean().sqrt())
    # eager is sloppy (hundreds of ulps), compiled is the correctly rounded fp32 value.
    eager = (ref + torch.randn(1000, generator=generator, dtype=torch.float64) * 300 * U32 * scale).float()
    compiled = ref.float()
    strict = Tolerance(ratio=1.0, rms_floor_ulps=0.0, max_floor_ulps=0.0)
    for tolerance in (Tolerance(), strict):
        verdict = compare_tensor(eager, ref, compiled, tolerance)
        assert verdict.outcome is Outcome.MATCH, verdict
        assert verdict.compiled_rms_ulps < verdict.eager_rms_ulps


def test_compiled_finite_where_eager_overflowed_is_not_a_mismatch() -> None:
    ref = torch.tensor([1.0, 70000.0, -2.0], dtype=torch.float64)  # 70000 overflows fp16
    eager = ref.to(torch.float16)
    assert torch.isinf(eager[1])
    compiled = torch.tensor([1.0, 65504.0, -2.0], dtype=torch.float16)
    verdict = compare_tensor(eager, ref, compiled)
    assert verdict.outcome is Outcome.MATCH
    # Errors are measured on entries finite in all three, so eager's Inf does not make them Inf.
    assert math.isfinite(verdict.eager_rms_ulps) and math.isfinite(verdict.eager_max_ulps)


def test_one_wrong_element_among_10000_is_caught_by_the_max_criterion() -> None:
    generator = torch.Generator().manual_seed(0)
    ref = torch.randn(10_000, generator=generator, dtype=torch.float64)
    eager = ref.float()
    ulp_at_scale = U32 * float(ref.square().mean().sqrt())

    def planted(ulps: float) -> torch.Tensor:
        compiled = eager.clone()
        compiled[4321] = float(ref[4321] + ulps * ulp_at_scale)
        return compiled

    caught = compare_tensor(eager, ref, planted(200))
    assert caught.outcome is Outcome.MISMATCH
    assert caught.reason == "max"  # RMS alone (~2 ulps over 10,000 entries) would miss it
    assert caught.compiled_rms_ulps < 8
    assert caught.compiled_max_ulps == pytest.approx(200, abs=1)
    assert compare_tensor(eager, ref, planted(40)).outcome is Outcome.MATCH  # within the 64-ulp max floor


# --- non-finite values ----------------------------------------------------------------------------


def test_nan_in_compiled_where_eager_and_fp64_are_finite_is_a_mismatch() -> None:
    ref = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    eager = ref.float()
    compiled = eager.clone()
    compiled[1] = math.nan
    compiled[3] = math.inf
    verdict = compare_tensor(eager, ref, compiled)
    assert verdict.outcome is Outcome.MISMATCH
    assert verdict.reason == "nonfinite"
    assert verdict.new_nonfinite == 2


def test_nan_everywhere_in_compiled_is_a_mismatch() -> None:
    ref = torch.ones(3, dtype=torch.float64)
    verdict = compare_tensor(ref.float(), ref, torch.full((3,), math.nan))
    assert verdict.outcome is Outcome.MISMATCH
    assert verdict.reason == "nonfinite"


def test_nan_in_all_three_matches() -> None:
    ref = torch.tensor([math.nan, 1.0, -math.inf], dtype=torch.float64)
    verdict = compare_tensor(ref.float(), ref, ref.float())
    assert verdict.outcome is Outcome.MATCH
    assert verdict.new_nonfinite == 0
    only_nan = torch.full((2,), math.nan, dtype=torch.float64)
    assert compare_tensor(only_nan.float(), only_nan, only_nan.float()).outcome is Outcome.MATCH


def test_nan_where_eager_is_nan_too_is_not_new() -> None:
    ref = torch.tensor([1.0, 2.0], dtype=torch.float64)
    eager = torch.tensor([math.nan, 2.0])
    compiled = torch.tensor([math.nan, 2.0])
    verdict = compare_tensor(eager, ref, compiled)
    assert verdict.outcome is Outcome.MATCH
    assert verdict.new_nonfinite == 0


# --- structure and exact dtypes -------------------------------------------------------------------


def test_shape_mismatch() -> None:
    verdict = compare_tensor(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.float64), torch.zeros(3, 2))
    assert verdict.outcome is Outcome.MISMATCH
    assert "shape" in verdict.reason


def test_dtype_mismatch() -> None:
    verdict = compare_tensor(torch.zeros(4), torch.zeros(4, dtype=torch.float64), torch.zeros(4, dtype=torch.float16))
    assert verdict.outcome is Outcome.MISMATCH
    assert "dtype" in verdict.reason


def test_compiled_not_a_tensor() -> None:
    verdict = compare_tensor(torch.zeros(2), torch.zeros(2, dtype=torch.float64), None)
    assert verdict.outcome is Outcome.MISMATCH
    assert "NoneType" in verdict.reason


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_integers_must_match_exactly(dtype: torch.dtype) -> None:
    eager = torch.arange(100, dtype=dtype)
    assert compare_tensor(eager, eager, eager.clone()).outcome is Outcome.MATCH
    off_by_one = eager.clone()
    off_by_one[57] += 1
    verdict = compare_tensor(eager, eager, off_by_one)
    assert verdict.outcome is Outcome.MISMATCH
    assert verdict.reason == "exact"


def test_booleans_must_match_exactly() -> None:
    eager = torch.tensor([True, False, True])
    assert compare_tensor(eager, None, eager.clone()).outcome is Outcome.MATCH
    assert compare_tensor(eager, None, torch.tensor([True, True, True])).outcome is Outcome.MISMATCH


def test_python_scalars_compare_by_equality() -> None:
    assert compare_tensor(3, 3, 3).outcome is Outcome.MATCH
    verdict = compare_tensor(3, 3, 4)
    assert verdict.outcome is Outcome.MISMATCH
    assert verdict.reason == "value"


def test_missing_fp64_uses_eager_as_the_reference() -> None:
    eager = torch.ones(16)
    assert compare_tensor(eager, None, towards_zero(torch.ones(16, dtype=torch.float64), 8)).outcome is Outcome.MATCH
    assert compare_tensor(eager, None, towards_zero(torch.ones(16, dtype=torch.float64), 9)).outcome is Outcome.MISMATCH


# --- low-precision dtypes use their own rounding unit ---------------------------------------------


def test_rounding_unit_is_half_epsilon() -> None:
    assert rounding_unit(torch.float32) == 2.0**-24
    assert rounding_unit(torch.bfloat16) == 2.0**-8
    assert rounding_unit(torch.float16) == 2.0**-11


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_one_ulp_in_low_precision_matches(dtype: torch.dtype) -> None:
    ref = torch.randn(4096, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    eager = ref.to(dtype)
    compiled = bump_bits(eager, 1)
    assert not torch.equal(compiled, eager)
    verdict = compare_tensor(eager, ref, compiled)
    assert verdict.outcome is Outcome.MATCH, verdict
    # Measured in the dtype's own unit, one ulp of the value is a few units, not 2**16 of fp32's.
    assert 0.5 < verdict.compiled_rms_ulps < 4


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fifty_percent_error_in_low_precision_mismatches(dtype: torch.dtype) -> None:
    ref = torch.randn(4096, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    eager = ref.to(dtype)
    verdict = compare_tensor(eager, ref, (ref * 1.5).to(dtype))
    assert verdict.outcome is Outcome.MISMATCH
    assert verdict.reason == "rms"


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_planted_errors_flip_at_the_floor(dtype: torch.dtype) -> None:
    # In [0.5, 1) values are spaced u apart, so k steps below 1.0 is exactly k units at scale 1.
    ref = torch.ones(32, dtype=torch.float64)
    eager = ref.to(dtype)
    below = lambda steps: (eager.view(torch.int16) - steps).view(dtype)  # noqa: E731
    assert compare_tensor(eager, ref, below(8)).compiled_rms_ulps == 8.0
    assert compare_tensor(eager, ref, below(8)).outcome is Outcome.MATCH
    assert compare_tensor(eager, ref, below(9)).outcome is Outcome.MISMATCH


def test_complex_imaginary_part_is_compared() -> None:
    eager = torch.tensor([1 + 1j, 2 + 2j, -3 + 0.5j], dtype=torch.complex64)
    compiled = eager.clone()
    compiled.imag.mul_(-1.0)
    verdict = compare_tensor(eager, eager.to(torch.complex128), compiled)
    assert verdict.outcome is Outcome.MISMATCH


# --- compare_values / worst / to_json -------------------------------------------------------------


def test_compare_values_pairs_outputs_and_checks_count() -> None:
    ref = signed_ones()
    eager = towards_zero(ref, 0)
    verdicts = compare_values([eager, eager], [ref, ref], [eager.clone(), towards_zero(ref, 30)])
    assert [v.outcome for v in verdicts] == [Outcome.MATCH, Outcome.MISMATCH]
    short = compare_values([eager, eager], [ref, ref], [eager])
    assert len(short) == 1
    assert short[0].outcome is Outcome.MISMATCH


def test_worst_picks_the_first_mismatch_else_the_largest_error() -> None:
    small, large = judge(0, 2), judge(0, 6)
    first_bad, second_bad = judge(0, 50), judge(0, 20)
    assert worst([small, large, small]) is large
    assert worst([small, second_bad, first_bad]) is second_bad
    crash = TensorVerdict(Outcome.CRASH, reason="boom")
    assert worst([small, crash]) is crash
    assert worst([]).outcome is Outcome.MATCH


def test_to_json_keeps_non_finite_errors_readable() -> None:
    verdict = TensorVerdict(Outcome.MISMATCH, compiled_rms_ulps=math.inf, eager_rms_ulps=1.23456, reason="rms")
    payload = verdict.to_json()
    assert payload["outcome"] == "mismatch"
    assert payload["compiled_rms_ulps"] == "inf"
    assert payload["eager_rms_ulps"] == 1.235
    assert payload["reason"] == "rms"


def test_a_different_non_finite_where_eager_agrees_with_fp64_is_a_mismatch() -> None:
    eager = torch.tensor([float("inf"), 1.0, 2.0])
    fp64 = eager.to(torch.float64)
    for wrong in (float("-inf"), float("nan")):
        compiled = torch.tensor([wrong, 1.0, 2.0])
        verdict = compare_tensor(eager, fp64, compiled)
        assert verdict.outcome is Outcome.MISMATCH and verdict.reason == "nonfinite"
    assert compare_tensor(eager, fp64, eager.clone()).outcome is Outcome.MATCH


def test_an_output_the_user_let_run_in_tf32_is_judged_in_tf32_units() -> None:
    """A float32 matmul allowed TF32 (allow_tf32, set_float32_matmul_precision("high")) differs from
    fp64 by TF32 roundings, thousands of float32 ulps: measured in float32 ulps that reads as a
    divergence, measured in TF32 units it does not; a real error stays one in either unit."""
    import torch
    from bisect_engine.verdict.compare import Outcome, compare_values
    from bisect_engine.verdict.precision import TF32

    torch.manual_seed(0)
    fp64 = torch.randn(64, 64, dtype=torch.float64)
    eager = fp64.float()
    tf32_rounded = (fp64 * (1 + TF32 * torch.rand(64, 64, dtype=torch.float64))).float()
    as_fp32 = compare_values([eager], [fp64], [tf32_rounded])
    as_tf32 = compare_values([eager], [fp64], [tf32_rounded], units=[TF32])
    assert as_fp32[0].outcome is Outcome.MISMATCH
    assert as_tf32[0].outcome is Outcome.MATCH
    wrong = compare_values([eager], [fp64], [eager * 1.01], units=[TF32])
    assert wrong[0].outcome is Outcome.MISMATCH


def test_allowed_precision_follows_the_users_settings() -> None:
    import torch
    from bisect_engine.verdict.precision import BF16, TF32, allowed_precision

    aten = torch.ops.aten
    value = torch.ones(2, 2)
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert allowed_precision(aten.mm.default, value) is None
        torch.set_float32_matmul_precision("high")
        assert allowed_precision(aten.mm.default, value).unit == TF32
        assert allowed_precision(aten.add.Tensor, value) is None  # only matmuls and convolutions
        assert allowed_precision(aten.mm.default, value.double()) is None  # only float32
        torch.set_float32_matmul_precision("medium")
        assert allowed_precision(aten.addmm.default, value).unit == BF16
    finally:
        torch.set_float32_matmul_precision(before)


def test_compiled_making_finite_what_eager_and_fp64_make_nan_differs_but_makes_no_nan() -> None:
    """log1p(x) for x < -1 is NaN in eager and fp64; a compiled x + 1 is finite there: the values
    differ (a mismatch), but the compiler made no NaN, so NaN forensics must not blame it."""
    import torch
    from bisect_engine.verdict.compare import Outcome, compare_tensor

    x = torch.tensor([-2.0, 0.5])
    verdict = compare_tensor(torch.log1p(x), torch.log1p(x.double()), x + 1)
    assert verdict.outcome is Outcome.MISMATCH
    assert verdict.new_nonfinite == 0 and verdict.lost_nonfinite == 1
    made = compare_tensor(x + 1, (x + 1).double(), torch.log1p(x))
    assert made.new_nonfinite == 1 and made.lost_nonfinite == 0


def test_saturated_fills_are_no_scale_and_are_judged_on_their_own() -> None:
    """An attention mask's finfo.min entries beside O(1) scores: left in the scale they hide a x1.5
    error in every real score; they are judged apart, and a changed fill still counts."""
    import torch
    from bisect_engine.verdict.compare import Outcome, compare_tensor, material_difference

    low = torch.finfo(torch.float32).min
    scores = torch.tensor([0.3, -1.2, 0.7, low, low])
    wrong = torch.where(scores > low, scores * 1.5, scores)
    assert compare_tensor(scores, scores.double(), wrong).outcome is Outcome.MISMATCH
    assert compare_tensor(scores, scores.double(), scores.clone()).outcome is Outcome.MATCH
    changed_fill = scores.clone()
    changed_fill[3] = -1e30
    assert compare_tensor(scores, scores.double(), changed_fill).reason == "saturated"
    assert material_difference(scores, wrong).material


def test_a_reduction_that_cancels_is_judged_at_the_scale_of_its_terms() -> None:
    """The mean of a normalised tensor is ~0: one rounding of its O(1) terms reads as millions of
    ulps of the result. Judged at the terms' scale it matches; a lost term still does not."""
    import torch
    from bisect_engine.verdict.compare import Outcome, compare_tensor, material_difference

    torch.manual_seed(0)
    terms = torch.randn(128, dtype=torch.float64)
    terms = terms - terms.mean()
    fp64 = terms.mean().reshape(1)
    eager = terms.float().mean().reshape(1)
    reordered = (terms.float().flip(0).cumsum(0)[-1] / 128).reshape(1)  # another summation order
    floor = float(terms.square().mean().sqrt())
    assert compare_tensor(eager, fp64, reordered).compiled_rms_ulps > 1e6  # at the result's scale: noise reads huge
    assert compare_tensor(eager, fp64, reordered, scale_floor=floor).outcome is Outcome.MATCH
    lost = (terms.float()[1:].sum() / 128).reshape(1)
    assert compare_tensor(eager, fp64, lost, scale_floor=floor).outcome is Outcome.MISMATCH
    assert not material_difference(eager, reordered, scale_floor=floor).material


def test_a_mask_compiled_sets_as_fp64_does_is_closer_to_fp64_not_wrong() -> None:
    from bisect_engine.verdict.compare import closer_to_fp64, compare_tensor as judge
    eager = torch.tensor([True, True, False, True])
    fp64 = torch.tensor([True, False, False, True])
    assert judge(eager, fp64, fp64.clone()).outcome is Outcome.MATCH  # compiled is fp64's mask
    assert judge(eager, eager, fp64.clone()).outcome is Outcome.MISMATCH  # judged against eager: exact
    wrong = torch.tensor([False, True, False, True])  # differs from eager where fp64 agrees with eager
    assert judge(eager, fp64, wrong).outcome is Outcome.MISMATCH
    departure = closer_to_fp64(eager, fp64, fp64.clone())
    assert departure is not None and departure.exact and (departure.compiled_wrong, departure.eager_wrong) == (0, 1)
    assert closer_to_fp64(eager, fp64, wrong) is None


def test_clearly_above_eager_needs_four_times_eagers_error_and_the_floor() -> None:
    from bisect_engine.verdict.compare import TensorVerdict, clearly_above_eager
    assert clearly_above_eager(TensorVerdict(Outcome.MATCH, compiled_rms_ulps=7.9, eager_rms_ulps=1.75))
    assert not clearly_above_eager(TensorVerdict(Outcome.MATCH, compiled_rms_ulps=6.0, eager_rms_ulps=1.75))  # 3.4x
    assert not clearly_above_eager(TensorVerdict(Outcome.MATCH, compiled_rms_ulps=3.0, eager_rms_ulps=0.1))  # noise
    assert not clearly_above_eager(TensorVerdict(Outcome.MISMATCH, compiled_rms_ulps=90.0, eager_rms_ulps=1.0))


def test_a_precision_the_user_allowed_reaches_the_outputs_computed_through_it() -> None:
    """The unit rule is one rule at every stage: a float32 matmul the user let run in TF32 is
    measured in TF32 units alone, and so is the relu after it when a window or the whole graph
    computes both (eager's error there is TF32's too); the relu judged alone, fed eager's matmul,
    is measured in float32 ulps. The precision is the policy's, pinned (what a repro embeds)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from bisect_engine.verdict.graphs import CapturedGraph
    from bisect_engine.verdict.judgement import Oracle
    from bisect_engine.verdict.oracle import GraphContext
    from bisect_engine.verdict.precision import TF32, Precision

    def model(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.relu(torch.mm(x, w)),)

    inputs = [torch.randn(8, 8), torch.randn(8, 8)]
    oracle = Oracle(precision=Precision(matmul_precision="high"))
    context = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, make_fx(model)(*inputs), inputs, True),
                                         oracle)
    whole, alone = context.whole(), context.subgraph(["relu"], isolate=True)
    [relu] = whole.output_names
    value = [context.eager_values[relu]]
    assert context.output_facts([relu], value, whole.graph_module)[0].unit == TF32
    assert context.output_facts([relu], value, alone.graph_module)[0].unit is None
    mm_alone = context.subgraph(["mm"], isolate=True)
    assert context.output_facts(["mm"], [context.eager_values["mm"]], mm_alone.graph_module)[0].unit == TF32
    assert GraphContext.from_captured(context.captured).output_facts([relu], value, whole.graph_module)[0].unit is None


@pytest.mark.parametrize("seed", range(4))
def test_the_all_finite_path_measures_what_the_masks_measure(seed: int) -> None:
    """Every entry finite and no fill: judged without masks. The same values with a NaN beside them
    in all three (not usable, nothing new) take the masked path and must measure the same errors;
    a transposed (non-contiguous) layout of the same values too."""
    generator = torch.Generator().manual_seed(seed)
    ref = torch.randn(48, 40, dtype=torch.float64, generator=generator)
    eager = (ref * (1 + 1e-7 * torch.randn(ref.shape, dtype=torch.float64, generator=generator))).float()
    compiled = (ref * (1 + 1e-5 * torch.randn(ref.shape, dtype=torch.float64, generator=generator))).float()
    plain = compare_tensor(eager, ref, compiled)
    nan = torch.tensor([float("nan")])
    masked = compare_tensor(torch.cat([eager.reshape(-1), nan.float()]), torch.cat([ref.reshape(-1), nan.double()]),
                            torch.cat([compiled.reshape(-1), nan.float()]))
    transposed = compare_tensor(eager.t().contiguous().t(), ref.t().contiguous().t(), compiled.t().contiguous().t())
    assert plain.outcome is Outcome.MISMATCH and plain.compiled_rms_ulps > 0
    for other in (masked, transposed):
        assert (other.outcome, other.reason, other.new_nonfinite) == (plain.outcome, plain.reason, 0)
        assert (other.compiled_rms_ulps, other.eager_rms_ulps, other.compiled_max_ulps, other.eager_max_ulps) == \
            (plain.compiled_rms_ulps, plain.eager_rms_ulps, plain.compiled_max_ulps, plain.eager_max_ulps)


def test_the_material_rule_without_masks_gives_what_the_masks_give(monkeypatch) -> None:
    """``material_difference``'s common case (every entry finite, no fill) skips the NaN/Inf and
    fill masks: the same Difference, field for field, as the masked path on random values."""
    import dataclasses

    from bisect_engine.verdict import compare
    from bisect_engine.verdict.compare import material_difference

    generator = torch.Generator().manual_seed(11)
    cases = []
    for trial in range(120):
        dtype = [torch.float32, torch.float16, torch.bfloat16, torch.float64][trial % 4]
        shape = [(7,), (13, 5), (4, 6, 3)][trial // 4 % 3]
        eager = (torch.randn(shape, generator=generator) * 10.0 ** (trial % 7 - 3)).to(dtype)
        noise = torch.randn(shape, generator=generator, dtype=torch.float64) * [1e-8, 1e-4, 1e-2, 1.0][trial // 12 % 4]
        compiled = (eager.double() + noise * eager.double().abs().mean()).to(dtype)
        if trial % 3 == 0 and eager.dim() == 2:
            eager, compiled = eager.t(), compiled.t()
        cases.append((eager, compiled, [0.0, 0.5, 100.0][trial % 3]))
    fast = [dataclasses.astuple(material_difference(e, c, scale_floor=f)) for e, c, f in cases]
    monkeypatch.setattr(compare, "_all_finite", lambda *values: False)
    assert fast == [dataclasses.astuple(material_difference(e, c, scale_floor=f)) for e, c, f in cases]


# --- the all-usable path in one fp64 buffer: the same bits as the masked path ----------------------

def _errors_by_new_tensors(eager: torch.Tensor, fp64: torch.Tensor, compiled: torch.Tensor,
                           unit_roundoff: float | None, scale_floor: float) -> dict[str, float]:
    """The formula as it was written before the one-buffer path (main 0b58e45): every step into a
    new fp64 tensor, the three values widened side by side."""
    ref = fp64.detach().to(torch.float64, memory_format=torch.contiguous_format).reshape(eager.shape).reshape(-1)
    eager64 = eager.detach().to(torch.float64, memory_format=torch.contiguous_format).reshape(-1)
    compiled64 = compiled.detach().to(torch.float64, memory_format=torch.contiguous_format).reshape(-1)
    scale = max(float(ref.square().mean().sqrt()), float(compiled64.square().mean().sqrt()), scale_floor)
    unit = max(rounding_unit(eager.dtype), unit_roundoff or 0.0) * max(scale, torch.finfo(eager.dtype).tiny)
    compiled_error = compiled64.sub(ref).abs_().div_(unit)
    eager_error = eager64.sub(ref).abs_().div_(unit)
    return dict(compiled_rms_ulps=float(compiled_error.square().mean().sqrt()),
                eager_rms_ulps=float(eager_error.square().mean().sqrt()),
                compiled_max_ulps=float(compiled_error.max()), eager_max_ulps=float(eager_error.max()))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("seed", range(6))
def test_one_buffer_path_gives_the_bits_of_the_formula_with_new_tensors(dtype: torch.dtype, seed: int) -> None:
    """Random values, shapes (transposed and sliced: not row-major; large enough for a
    multi-threaded reduction), scales, units and scale floors: every field equal bit for bit."""
    generator = torch.Generator().manual_seed(seed)
    rows = [1, 7, 300, 1500, 2048, 33][seed]
    span = 3 if dtype == torch.float16 else 20  # finite in the dtype: the all-usable path
    scale = 10.0 ** float(torch.randint(-span, span, (1,), generator=generator))
    ref = torch.randn(rows, 130, dtype=torch.float64, generator=generator) * scale
    eager = ref.to(dtype)
    compiled = (ref * (1 + 1e-3 * torch.randn(ref.shape, dtype=torch.float64, generator=generator))).to(dtype)
    if seed % 2:  # not row-major: a transposed view, a strided slice of the reference
        ref, eager, compiled = ref.t(), eager.t(), compiled.t()
    if seed % 3 == 2:
        ref, eager, compiled = ref[..., ::2], eager[..., ::2], compiled[..., ::2]
    unit_roundoff = [None, 2.0**-11][seed % 2]
    scale_floor = [0.0, scale * 3.0, scale * 1e-3][seed % 3]
    verdict = compare_tensor(eager, ref, compiled, Tolerance(), unit_roundoff, scale_floor)
    expected = _errors_by_new_tensors(eager, ref, compiled, unit_roundoff, scale_floor)
    got = {name: getattr(verdict, name) for name in expected}
    assert got == expected, (got, expected)
    assert all(math.isfinite(value) for value in got.values())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.complex64])
@pytest.mark.parametrize("seed", range(3))
def test_eager_as_the_reference_gives_the_bits_of_the_formula_with_new_tensors(dtype: torch.dtype, seed: int) -> None:
    """No fp64 reference (scope ``eager``): eager's own error is not computed (zero by construction):
    every field still equal bit for bit to the formula run on eager widened as the reference, and
    to the verdict against an fp64 reference equal to eager widened (a separate tensor)."""
    generator = torch.Generator().manual_seed(seed)
    real = dtype.to_real() if dtype.is_complex else dtype
    values = torch.randn(300 * (seed + 1), 66, dtype=torch.float64, generator=generator)
    eager = values.to(real)
    compiled = (values * (1 + 1e-3 * torch.randn(values.shape, dtype=torch.float64, generator=generator))).to(real)
    if dtype.is_complex:
        eager, compiled = torch.view_as_complex(eager.reshape(-1, 2)), torch.view_as_complex(compiled.reshape(-1, 2))
    if seed == 1:
        eager, compiled = eager.t(), compiled.t()
    scale_floor = [0.0, 3.0, 1e-3][seed]
    verdict = compare_tensor(eager, None, compiled, Tolerance(), None, scale_floor)
    widened = eager.to(torch.complex128 if dtype.is_complex else torch.float64).clone()
    against_copy = compare_tensor(eager, widened, compiled, Tolerance(), None, scale_floor)
    if dtype.is_complex:
        eager, compiled, widened = torch.view_as_real(eager), torch.view_as_real(compiled), torch.view_as_real(widened)
    expected = _errors_by_new_tensors(eager, widened, compiled, None, scale_floor)
    got = {name: getattr(verdict, name) for name in expected}
    assert got == expected == {name: getattr(against_copy, name) for name in expected}, (got, expected)
    assert verdict == against_copy and got["eager_max_ulps"] == 0.0 and got["compiled_max_ulps"] > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.complex64])
@pytest.mark.parametrize("layout", ["row-major", "transposed", "strided"])
def test_compiled_with_eagers_bits_gives_the_verdict_of_the_long_way(dtype: torch.dtype, layout: str,
                                                                     monkeypatch) -> None:
    """Compiled returns eager's bits (its very tensor, a view of it, a copy in another layout: a
    view of a parameter a forward saves for the backward): its errors are eager's, computed once;
    the verdict equal field for field to the one computed the long way (both errors computed),
    against an fp64 reference and against eager. A view of the same memory read another way (a
    transpose, a slice), a signed zero or a conjugate is no such value."""
    from bisect_engine.verdict import compare
    from bisect_engine.verdict.compare import same_bits, same_memory

    generator = torch.Generator().manual_seed(5)
    real = dtype.to_real() if dtype.is_complex else dtype
    fp64 = torch.randn(96, 96, dtype=torch.float64, generator=generator) * 3.0
    eager = (fp64 * (1 + 1e-3 * torch.randn(fp64.shape, dtype=torch.float64, generator=generator))).to(real)
    if dtype.is_complex:
        fp64, eager = torch.view_as_complex(fp64.reshape(96, 48, 2)), torch.view_as_complex(eager.reshape(96, 48, 2))
    if layout == "transposed":
        fp64, eager = fp64.t(), eager.t()
    elif layout == "strided":
        fp64, eager = fp64[::2, 1:], eager[::2, 1:]
    others = (eager, eager.view(eager.shape), eager.clone(), eager.t().contiguous().t())
    for reference in (fp64, None):
        verdicts = [compare_tensor(eager, reference, other, Tolerance(), None, 0.5) for other in others]
        with monkeypatch.context() as patched:
            patched.setattr(compare, "same_memory", lambda first, second: False)
            patched.setattr(compare, "same_bits", lambda first, second: False)
            long_way = compare_tensor(eager, reference, eager.clone(), Tolerance(), None, 0.5)
        assert all(verdict == long_way for verdict in verdicts) and long_way.outcome is Outcome.MATCH
        assert long_way.compiled_rms_ulps == long_way.eager_rms_ulps
        assert (reference is None) == (long_way.eager_max_ulps == 0.0)
    assert same_memory(eager, eager.view(eager.shape)) and not same_memory(eager, eager.clone())
    assert same_bits(eager, eager.clone()) and same_bits(eager, eager.t().contiguous().t())
    square = eager[:48, :48]
    assert not same_memory(square, square.t()) and not same_memory(square, square[1:])
    assert not same_bits(square, square.t()) and not same_bits(torch.tensor([0.0]), torch.tensor([-0.0]))
    assert same_bits(torch.tensor([float("nan")]), torch.tensor([float("nan")]))
    if dtype.is_complex:
        assert not same_memory(eager, eager.conj()) and not same_bits(eager, eager.conj())


def test_one_buffer_path_leaves_a_nonfinite_compiled_value_to_the_masks() -> None:
    """Compiled non-finite where eager and fp64 are finite: still the masked path's verdict."""
    ref = torch.randn(5000, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    compiled = ref.to(torch.float32)
    compiled[17] = float("nan")
    verdict = compare_tensor(ref.to(torch.float32), ref, compiled)
    assert verdict.outcome is Outcome.MISMATCH and verdict.new_nonfinite == 1 and verdict.reason == "nonfinite"


@pytest.mark.parametrize("seed", range(4))
def test_material_difference_in_one_buffer_gives_the_bits_of_new_tensors(seed: int) -> None:
    """The squares and the difference in one buffer: scale, max |diff| and ulps as the formula
    with new tensors computes them (finite values, and with a NaN that sends it to the masks)."""
    from bisect_engine.verdict.compare import MATERIAL_FRACTION, MATERIAL_ULPS, material_difference
    generator = torch.Generator().manual_seed(seed)
    eager = torch.randn([3, 400, 2000, 77][seed], 129, generator=generator) * 10.0 ** (seed - 2)
    compiled = eager * (1 + [1e-7, 1e-2, 1e-5, 0.2][seed] * torch.randn(eager.shape, generator=generator))
    if seed % 2:
        eager, compiled = eager.t(), compiled.t()
    if seed == 3:
        eager[0, 0] = compiled[0, 0] = float("nan")
    got = material_difference(eager, compiled)
    a, b = eager.to(torch.float64).reshape(-1), compiled.to(torch.float64).reshape(-1)
    keep = torch.isfinite(a)
    a, b = a[keep], b[keep]
    scale = max(float(a.square().mean().sqrt()), float(b.square().mean().sqrt()))
    max_abs = float((a - b).abs().max())
    unit = rounding_unit(torch.float32)
    assert (got.max_abs, got.max_ulps) == (max_abs, max_abs / (unit * scale))
    assert got.material == (max_abs > max(MATERIAL_ULPS * unit, MATERIAL_FRACTION) * scale)


@pytest.mark.parametrize("case", range(6))
def test_material_difference_widened_in_chunks_gives_the_bits_of_whole_tensors(case: int, monkeypatch) -> None:
    """Issue 34: the common case widened chunk by chunk into one fp64 buffer (chunks far smaller
    than the value here, and the real size on a value past it): every field of the Difference
    as the formula with whole widened tensors computes it, bit for bit, across dtypes (complex as
    its real pairs), layouts, a chunk's ragged end, an fp64 reference as one side, a scale floor."""
    from bisect_engine.verdict import compare
    from bisect_engine.verdict.compare import MATERIAL_FRACTION, MATERIAL_ULPS, Difference, material_difference

    generator = torch.Generator().manual_seed(case)
    dtype = [torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.float32, torch.float32][case]
    rows = [1031, 257, 64, 300, 400, 1100][case]
    base = torch.randn(rows, 1024 if case == 4 else 129, generator=generator, dtype=torch.float64)
    base = base * (1 + 1j * torch.randn(base.shape, generator=generator)) if dtype.is_complex else base
    eager = (base * 10.0 ** (case - 3)).to(dtype)
    noise = [1e-7, 1e-3, 1e-2, 1e-5, 0.2, 1e-6][case]
    compiled = (eager.to(torch.complex128 if dtype.is_complex else torch.float64)
                * (1 + noise * torch.randn(eager.shape, generator=generator, dtype=torch.float64)))
    compiled = compiled if case == 5 else compiled.to(dtype)  # case 5: an fp64 reference as one side
    if case % 2:
        eager, compiled = eager.t(), compiled.t()
    floor = 3.0 if case == 2 else 0.0
    if case != 4:
        monkeypatch.setattr(compare, "CHUNK", 1000)
    else:
        eager, compiled = eager.repeat(3, 1), compiled.repeat(3, 1)  # past the real CHUNK, ragged
        assert eager.numel() > compare.CHUNK
    got = material_difference(eager, compiled, dtype=torch.float32 if case == 5 else None, scale_floor=floor)

    def wide(value: torch.Tensor) -> torch.Tensor:
        value = torch.view_as_real(value.to(torch.complex128)) if value.is_complex() else value.to(torch.float64)
        return value.reshape(-1)

    a, b = wide(eager), wide(compiled)
    differing = int((a != b).sum())
    scale = max(float(a.square().mean().sqrt()), float(b.square().mean().sqrt()), floor)
    max_abs = float((a - b).abs().max())
    unit = compare.rounding_unit(torch.float32 if dtype.is_complex or case == 5 else dtype)
    material = max_abs > max(MATERIAL_ULPS * unit, MATERIAL_FRACTION) * scale
    assert got == Difference(material, differing, eager.numel(), max_abs / (unit * scale), max_abs,
                             "scale" if material else "")


@pytest.mark.parametrize("where", ["eager nan", "compiled nan", "eager inf", "compiled -inf", "eager fill", "none"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_chunked_material_rule_leaves_every_nonfinite_or_filled_value_to_the_masks(where: str, dtype: torch.dtype,
                                                                                       monkeypatch) -> None:
    """``compare._in_chunks`` takes only values whose entries are all finite, and none of eager's a
    fill (its extremes read in the values' own dtypes): a NaN, an infinity or a ``finfo.min`` fill
    in any chunk, its last included, on either side, sends the value to the masks (None)."""
    from bisect_engine.verdict import compare

    monkeypatch.setattr(compare, "CHUNK", 100)
    eager = torch.randn(1050, generator=torch.Generator().manual_seed(0)).to(dtype)
    compiled = eager.clone()
    side, kind = where.split() if where != "none" else ("", "")
    target = eager if side == "eager" else compiled
    target[1049 if kind != "fill" else 333] = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf"),
                                               "fill": torch.finfo(dtype).min, "": 0.0}[kind]
    chunked = compare._in_chunks(eager, compiled, dtype)
    assert (chunked is None) == (where != "none"), chunked
