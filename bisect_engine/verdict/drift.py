"""Pure: did one op's result move between two environments, beyond the op's own noise?

The rule is the accuracy rule of :mod:`~bisect_engine.verdict.compare` turned on a recorded value:
the op's *noise* is its recorded result's own error against fp64 (in ulps of the dtype at the
tensor's scale); the new result has *changed* when its distance to the recorded one clearly
exceeds that noise,

    changed  iff  dist_rms > RATIO * noise_rms + RMS_FLOOR  or  dist_max > RATIO * noise_max + MAX_FLOOR
             or   finiteness differs anywhere,  or shape / dtype / integer values differ

and it is a *regression* when the new result is farther from fp64 than the recorded one, an
*improvement* when closer. Nothing here runs a graph.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .compare import Outcome, Tolerance, compare_tensor


@dataclass(frozen=True)
class Drift:
    """How a value moved: distances in ulps (to the recorded value) and errors against fp64."""

    changed: bool
    reason: str = ""
    distance_rms_ulps: float = 0.0
    distance_max_ulps: float = 0.0
    noise_rms_ulps: float = 0.0  # the recorded value's own error against fp64
    noise_max_ulps: float = 0.0
    recorded_error_ulps: float = 0.0  # rms, against fp64
    new_error_ulps: float = 0.0

    @property
    def direction(self) -> str:
        """"farther" (a regression) or "closer" (an improvement) to fp64; "" when unchanged or
        where fp64 cannot tell (non-finite, integer values)."""
        if not self.changed or self.reason in ("shape", "dtype", "exact", "value"):
            return "farther" if self.changed else ""
        return "farther" if self.new_error_ulps >= self.recorded_error_ulps else "closer"

    def limits(self, tolerance: Tolerance = Tolerance()) -> tuple[float, float]:
        """The largest rms and max distances (ulps) that are still the op's noise."""
        return (tolerance.ratio * self.noise_rms_ulps + tolerance.rms_floor_ulps,
                tolerance.ratio * self.noise_max_ulps + tolerance.max_floor_ulps)

    def to_json(self) -> dict[str, Any]:
        numbers = {k: round(v, 3) if v == v and abs(v) != float("inf") else str(v)
                   for k, v in self.__dict__.items() if isinstance(v, float)}
        return {"changed": self.changed, "reason": self.reason, "direction": self.direction, **numbers}


def drift(recorded: Any, fp64: Any, new: Any, tolerance: Tolerance = Tolerance()) -> Drift:
    """Judge ``new`` against the ``recorded`` result of the same op on the same inputs."""
    if not isinstance(recorded, torch.Tensor) or not isinstance(new, torch.Tensor):
        same = type(recorded) is type(new) and recorded == new
        return Drift(not same, "" if same else "value")
    if recorded.shape != new.shape:
        return Drift(True, "shape")
    if recorded.dtype != new.dtype:
        return Drift(True, "dtype")
    if not (recorded.is_floating_point() or recorded.is_complex()):
        equal = torch.equal(recorded.cpu(), new.cpu())
        return Drift(not equal, "" if equal else "exact")
    reference = fp64 if isinstance(fp64, torch.Tensor) and fp64.shape == recorded.shape else recorded
    distance = compare_tensor(recorded, recorded, new, tolerance)
    against_fp64 = compare_tensor(recorded, reference, new, tolerance)
    noise_rms, noise_max = against_fp64.eager_rms_ulps, against_fp64.eager_max_ulps
    nonfinite = bool(distance.new_nonfinite or distance.lost_nonfinite)
    above = (distance.compiled_rms_ulps > tolerance.ratio * noise_rms + tolerance.rms_floor_ulps
             or distance.compiled_max_ulps > tolerance.ratio * noise_max + tolerance.max_floor_ulps)
    changed = nonfinite or above or distance.outcome is Outcome.MISMATCH and distance.reason == "saturated"
    return Drift(changed, "nonfinite" if nonfinite else "ulps" if changed else "",
                 distance.compiled_rms_ulps, distance.compiled_max_ulps, noise_rms, noise_max,
                 against_fp64.eager_rms_ulps, against_fp64.compiled_rms_ulps)


@dataclass(frozen=True)
class EagerGap:
    """Where a changed op's compiled result stands against eager, in each environment: whether the
    new compiled value equals the new eager one within eager's own noise, and whether the compiled
    result moved toward eager or away from it (rms distances compiled - eager, in ulps)."""

    matches_eager: bool
    recorded_gap_ulps: float
    new_gap_ulps: float

    @property
    def toward(self) -> str:
        """"toward" eager, "away" from it, or "" when the gap did not change."""
        if self.new_gap_ulps < self.recorded_gap_ulps:
            return "toward"
        return "away" if self.new_gap_ulps > self.recorded_gap_ulps else ""

    def to_json(self) -> dict[str, Any]:
        numbers = {k: round(v, 3) if v == v and abs(v) != float("inf") else str(v)
                   for k, v in (("recorded_gap_ulps", self.recorded_gap_ulps), ("new_gap_ulps", self.new_gap_ulps))}
        return {"matches_eager": self.matches_eager, "toward": self.toward, **numbers}


def eager_gap(recorded_eager: Any, recorded_compiled: Any, fp64: Any, new_eager: Any, new_compiled: Any,
              tolerance: Tolerance = Tolerance()) -> EagerGap | None:
    """The compiled-vs-eager gap before and after (None when a value is missing): the new compiled
    value *matches* eager when it is within eager's noise of it (the rule of :func:`drift`)."""
    if not all(isinstance(v, torch.Tensor) for v in (recorded_eager, recorded_compiled, new_eager, new_compiled)):
        return None
    before = drift(recorded_eager, fp64, recorded_compiled, tolerance)
    after = drift(new_eager, fp64, new_compiled, tolerance)
    return EagerGap(not after.changed, _gap(before), _gap(after))


def _gap(value: Drift) -> float:
    if value.reason in ("shape", "dtype", "exact", "value", "nonfinite"):
        return float("inf")
    return value.distance_rms_ulps
