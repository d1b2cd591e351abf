"""Issue 37: exact rules where the program is exact. The sign of a zero: -0.0 and +0.0 are 0 ulps
apart, so the ulp rule matches them; under ``--oracle bitwise`` they differ (the judgement's exact
rules run after the ulp rule, at their own call site)."""
from __future__ import annotations

import torch

from bisect_engine.verdict.compare import Outcome, zero_sign_flips
from bisect_engine.verdict.judgement import GRAPH, Oracle, judge_outputs

EAGER = torch.tensor([-0.0, 0.0, -1.0, 2.0])
FLIPPED = torch.tensor([0.0, 0.0, -1.0, 2.0])  # compiled clamp(x, max=0.0) on torch 2.13


def test_zeros_of_the_other_sign_are_counted() -> None:
    assert zero_sign_flips(EAGER, FLIPPED) == 1
    assert zero_sign_flips(EAGER, EAGER.clone()) == 0
    assert zero_sign_flips(EAGER.to(torch.int64), FLIPPED.to(torch.int64)) == 0  # integers have one zero


def test_bitwise_names_a_flipped_zero_sign_and_the_ulp_oracles_do_not() -> None:
    bitwise = judge_outputs(Oracle(kind="bitwise"), GRAPH, [EAGER], None, [FLIPPED])[0]
    assert bitwise.outcome is Outcome.MISMATCH and "sign of zero: 1 element" in bitwise.reason
    assert judge_outputs(Oracle(kind="bitwise"), GRAPH, [EAGER], None, [EAGER.clone()])[0].outcome is Outcome.MATCH
    for kind in ("outputs", "eager"):
        assert judge_outputs(Oracle(kind=kind), GRAPH, [EAGER], [EAGER.double()], [FLIPPED])[0].outcome is Outcome.MATCH
