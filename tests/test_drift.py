"""verdict/drift.py, pure: an op's result moved beyond its own noise; and, for a changed compiled
result, whether it now equals eager (within eager's noise) and moved toward eager or away."""
from __future__ import annotations

import torch

from bisect_engine.verdict.drift import drift, eager_gap


def _values() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    fp64 = torch.randn(256, dtype=torch.float64)
    return fp64, fp64.to(torch.bfloat16)


def test_the_same_result_has_not_moved_and_a_scaled_one_has() -> None:
    fp64, eager = _values()
    assert not drift(eager, fp64, eager.clone()).changed
    moved = drift(eager, fp64, (eager.double() * 1.05).to(torch.bfloat16))
    assert moved.changed and moved.direction == "farther"


def test_a_compiled_result_that_came_back_to_eager_moved_toward_it() -> None:
    fp64, eager = _values()
    off = (eager.double() * 1.05).to(torch.bfloat16)
    gap = eager_gap(eager, off, fp64, eager, eager.clone())
    assert gap is not None and gap.matches_eager and gap.toward == "toward"
    assert gap.new_gap_ulps == 0.0 < gap.recorded_gap_ulps


def test_a_compiled_result_that_left_eager_moved_away() -> None:
    fp64, eager = _values()
    off = (eager.double() * 1.05).to(torch.bfloat16)
    gap = eager_gap(eager, eager.clone(), fp64, eager, off)
    assert gap is not None and not gap.matches_eager and gap.toward == "away"
    assert gap.to_json()["toward"] == "away"


def test_no_gap_without_the_four_values() -> None:
    fp64, eager = _values()
    assert eager_gap(eager, None, fp64, eager, eager) is None
