"""The accuracy oracle: pure functions that judge a compiled value against eager and fp64.

The rule, in one sentence: *compiled is wrong when its error against the fp64 reference clearly
exceeds eager's own error against fp64*, with errors measured in units of the output dtype's
rounding unit at the tensor's scale ("ulps"). Working in ulps makes one rule serve fp32, bf16 and
fp16 alike, where ``torch._dynamo.utils.same`` hand-tunes a factor per dtype and size:

    err(x) = |x - ref64| / (u(dtype) * scale),   scale = max(RMS(ref64), RMS(compiled)) (finite)
    mismatch  iff  rms_err(compiled) > RATIO * rms_err(eager) + RMS_FLOOR
              or   max_err(compiled) > RATIO * max_err(eager) + MAX_FLOOR
              or   compiled is NaN/Inf where eager and fp64 are finite

RATIO = 2 admits a second, equally valid rounding order (fusion, vectorisation, a different
reduction tree); the floors admit a few ulps of libm-versus-Sleef differences when eager happens
to be exact. A compiled value that is *more* accurate than eager never fails (pytorch#185596).
Integer and boolean values must match exactly. Nothing here runs a graph or touches global state.

Where fp64 cannot arbitrate, eager and compiled are compared with each other (see
:func:`material_difference`): a difference is *material* when no rounding noise explains it,

    material  iff  integer/boolean values differ anywhere
              or   finiteness differs anywhere (a value finite on one side, NaN/Inf on the other)
              or   max |compiled - eager| > max(MATERIAL_ULPS * u(dtype), MATERIAL_FRACTION) * scale

with ``scale`` = max(RMS(eager), RMS(compiled)) over the finite entries. 64 ulps at the tensor's
scale is far above what a different rounding order leaves on an output; 1/16 of the scale keeps
fp32's bound dtype-independent (an amplified difference is O(1), a rounding one is not). The fp64
reference is *unreliable* for a value when eager itself differs materially from it (an
ill-conditioned computation, or integers derived from floats: fp64 truncates other elements to
other integers), :func:`reference_unreliable`. Then only eager against compiled can say anything.

A compiled value *departs* from eager while being *closer to fp64* (:func:`closer_to_fp64`) when
eager vs compiled exceed the tolerance's floors (rms or max ulps) and compiled's error against fp64
is below eager's: Inductor computed more exactly than eager's per-op rounding (not a bug by the
fp64 rule, but a difference the user sees).
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

import torch


class Outcome(enum.Enum):
    MATCH = "match"
    MISMATCH = "mismatch"
    INVALID = "invalid"  # the candidate cannot be judged (e.g. a subgraph that cannot be built)
    CRASH = "crash"  # compiling or running the candidate raised


@dataclass(frozen=True)
class Tolerance:
    ratio: float = 2.0
    rms_floor_ulps: float = 8.0
    max_floor_ulps: float = 64.0


@dataclass(frozen=True)
class TensorVerdict:
    """How one compiled value compares; errors are in ulps of its dtype at its scale."""

    outcome: Outcome
    compiled_rms_ulps: float = 0.0
    eager_rms_ulps: float = 0.0
    compiled_max_ulps: float = 0.0
    eager_max_ulps: float = 0.0
    new_nonfinite: int = 0  # entries compiled makes NaN/Inf (or another non-finite) where eager agrees with fp64
    reason: str = ""
    lost_nonfinite: int = 0  # entries compiled makes finite where eager and fp64 agree on NaN/Inf

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "compiled_rms_ulps": _finite_or_str(self.compiled_rms_ulps),
            "eager_rms_ulps": _finite_or_str(self.eager_rms_ulps),
            "compiled_max_ulps": _finite_or_str(self.compiled_max_ulps),
            "eager_max_ulps": _finite_or_str(self.eager_max_ulps),
            "new_nonfinite": self.new_nonfinite,
            "reason": self.reason,
            **({"lost_nonfinite": self.lost_nonfinite} if self.lost_nonfinite else {}),
        }


def _finite_or_str(value: float) -> float | str:
    return round(value, 3) if math.isfinite(value) else str(value)


def saturation(dtype: torch.dtype) -> float:
    """Magnitudes from here up are fills (``finfo.min`` masks), not data: no scale, judged apart."""
    return torch.finfo(dtype).max / 2


def rounding_unit(dtype: torch.dtype) -> float:
    """Unit roundoff u = eps / 2 of a floating dtype."""
    return torch.finfo(dtype).eps / 2


def compare_tensor(
    eager: Any, fp64: Any, compiled: Any, tolerance: Tolerance = Tolerance(), unit: float | None = None,
    scale_floor: float = 0.0,
) -> TensorVerdict:
    """Judge one compiled value against eager (same dtype) and the fp64 reference; ``unit``: the
    unit roundoff to measure in where the user allowed less than the dtype's (TF32 matmuls)."""
    if not isinstance(eager, torch.Tensor):
        same = eager == compiled
        return TensorVerdict(Outcome.MATCH if same else Outcome.MISMATCH, reason="" if same else "value")
    if not isinstance(compiled, torch.Tensor):
        return TensorVerdict(Outcome.MISMATCH, reason=f"compiled returned {type(compiled).__name__}")
    if compiled.shape != eager.shape:
        return TensorVerdict(Outcome.MISMATCH, reason=f"shape {tuple(compiled.shape)} != {tuple(eager.shape)}")
    if compiled.dtype != eager.dtype:
        return TensorVerdict(Outcome.MISMATCH, reason=f"dtype {compiled.dtype} != {eager.dtype}")
    if not (eager.is_floating_point() or eager.is_complex()):
        equal = torch.equal(eager.cpu(), compiled.cpu()) or exact_closer_to_fp64(eager, fp64, compiled)
        return TensorVerdict(Outcome.MATCH if equal else Outcome.MISMATCH, reason="" if equal else "exact")
    reference = fp64 if isinstance(fp64, torch.Tensor) else eager
    eager_is_reference = reference is eager  # eager's own error is then zero, by construction
    # compiled returned eager's bits (its very memory, or a view of a parameter the forward saves
    # for its backward, computed from a copy of it): compiled's errors are eager's, computed once
    compiled_is_eager = same_memory(eager, compiled) or same_bits(eager, compiled)
    if eager.is_complex():  # judge real and imaginary parts as a pair of real tensors
        eager, compiled = torch.view_as_real(eager), torch.view_as_real(compiled)
        reference = torch.view_as_real(reference.to(torch.complex128))
    return _compare_floating(eager, reference, compiled, tolerance, unit, scale_floor, eager_is_reference,
                             compiled_is_eager)


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def same_bits(first: torch.Tensor, second: torch.Tensor) -> bool:
    """Every entry of two strided tensors of one shape and dtype equal bit for bit (a NaN to the
    same NaN, -0.0 only to -0.0): compared as integers of the element's width, in one pass."""
    if first.shape != second.shape or first.dtype != second.dtype or first.device != second.device:
        return False
    first_bits, second_bits = integer_bits(first), integer_bits(second)
    if first_bits is None or second_bits is None:
        return False
    return torch.equal(first_bits, second_bits)


def integer_bits(tensor: torch.Tensor) -> torch.Tensor | None:
    """A plain tensor's bits as integers of its element's width: a view, no copy (a complex one as
    its real pairs); None where it is not plain, is bool, or has no integer of its width."""
    if not _plain(tensor):
        return None
    if tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    as_integer = _BITS.get(tensor.element_size())
    if as_integer is None or tensor.dtype == torch.bool:
        return None
    return tensor.detach().view(as_integer)


def same_layout_and_bits(first: Any, second: Any) -> bool:
    """Two tensors of one dtype, sizes and strides with the same bits (:func:`same_bits`): either
    stands for the other wherever a value is read (a stride a compiled kernel got wrong is no
    match); False for anything but two tensors."""
    return (isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor)
            and first.stride() == second.stride() and same_bits(first, second))


def _plain(tensor: torch.Tensor) -> bool:
    """A plain strided tensor with values in memory (no subclass, not meta, no conjugate or
    negative bit): its bits are what its storage holds."""
    return (type(tensor) is torch.Tensor and tensor.layout == torch.strided and tensor.device.type != "meta"
            and not tensor.is_conj() and not tensor.is_neg())


def same_memory(first: torch.Tensor, second: torch.Tensor) -> bool:
    """Two plain strided tensors reading the same memory the same way (address, sizes, strides,
    dtype, device; no conjugate or negative bit): the same bits, whatever wrote them."""
    if first is second:
        return True
    return _plain(first) and _plain(second) and first.device == second.device and first.dtype == second.dtype and first.data_ptr() != 0 \
        and first.data_ptr() == second.data_ptr() and first.shape == second.shape and first.stride() == second.stride()


def exact_closer_to_fp64(eager: torch.Tensor, fp64: Any, compiled: torch.Tensor) -> bool:
    """An integer or boolean value (a mask ``ge(x, 0)`` a forward saves) that compiled computes
    differently from eager only where it agrees with the fp64 reference: compiled kept the float it
    came from closer to fp64 (a fused bf16 chain in fp32), eager's rounding set it otherwise. Closer
    to fp64, never wrong (a difference the departure search lists). ``fp64`` given as eager: False."""
    if not isinstance(fp64, torch.Tensor) or fp64.shape != eager.shape or fp64 is eager:
        return False
    reference, eager, compiled = fp64.detach().cpu().to(eager.dtype), eager.detach().cpu(), compiled.detach().cpu()
    differs = eager != compiled
    return bool(differs.any()) and bool((compiled[differs] == reference[differs]).all())


def _compare_floating(
    eager: torch.Tensor, fp64: torch.Tensor, compiled: torch.Tensor, tolerance: Tolerance, unit_roundoff: float | None = None,
    scale_floor: float = 0.0, eager_is_reference: bool = False, compiled_is_eager: bool = False,
) -> TensorVerdict:
    # Widened into row-major memory: the flat views below are then views, never copies (the same
    # elements in the same order as a non-contiguous value flattened or indexed by a mask).
    ref = _widened(fp64).reshape(eager.shape)
    if eager.numel() and _usable_throughout(ref, eager.dtype):
        # The common case, every entry usable: no masks (what the masks below would find, in a few
        # reductions instead of some thirty passes over the values), and one fp64 buffer beside the
        # reference (a large value's peak: an embedding's gradient).
        errors = _errors_in_one_buffer(eager, ref.reshape(-1), compiled, unit_roundoff, scale_floor, eager_is_reference,
                                       compiled_is_eager)
        if errors is not None:
            compiled_rms, eager_rms, compiled_max, eager_max = errors
            reason = _mismatch_reason(tolerance, compiled_rms_ulps=compiled_rms, eager_rms_ulps=eager_rms,
                                      compiled_max_ulps=compiled_max, eager_max_ulps=eager_max, new_nonfinite=0)
            return TensorVerdict(Outcome.MISMATCH if reason else Outcome.MATCH, compiled_rms, eager_rms,
                                 compiled_max, eager_max, reason=reason)
    eager64, compiled64 = _widened(eager), _widened(compiled)
    masked = _masked(ref, eager64, compiled64, eager.dtype, tolerance)
    if isinstance(masked, TensorVerdict):
        return masked
    usable, new_nonfinite, lost_nonfinite, saturated_wrong = masked
    ref_used, compiled_used, eager_used = _used(usable, ref, compiled64, eager64)
    del usable, ref, compiled64, eager64  # the used values only from here (a large tensor's peak)
    unit = _error_unit(eager.dtype, float(ref_used.square().mean().sqrt()), float(compiled_used.square().mean().sqrt()),
                       scale_floor, unit_roundoff)
    compiled_error = compiled_used.sub(ref_used).abs_().div_(unit)
    del compiled_used
    eager_error = eager_used.sub(ref_used).abs_().div_(unit)
    del eager_used, ref_used
    verdict: dict[str, Any] = dict(
        compiled_rms_ulps=float(compiled_error.square().mean().sqrt()),
        eager_rms_ulps=float(eager_error.square().mean().sqrt()),
        compiled_max_ulps=float(compiled_error.max()),
        eager_max_ulps=float(eager_error.max()),
        new_nonfinite=new_nonfinite,
    )
    reason = (_mismatch_reason(tolerance, **verdict) or ("nonfinite" if lost_nonfinite else "")
              or ("saturated" if saturated_wrong else ""))
    return TensorVerdict(Outcome.MISMATCH if reason else Outcome.MATCH, reason=reason, lost_nonfinite=lost_nonfinite, **verdict)


def _errors_in_one_buffer(eager: torch.Tensor, ref: torch.Tensor, compiled: torch.Tensor,
                          unit_roundoff: float | None, scale_floor: float,
                          eager_is_reference: bool = False,
                          compiled_is_eager: bool = False) -> tuple[float, float, float, float] | None:
    """The ulp errors of an all-usable value (compiled's RMS, eager's RMS, compiled's max, eager's
    max), computed in one fp64 buffer (``ref``: the finite,
    unsaturated reference, flat and row-major); None where eager or compiled has a non-finite
    entry (the masks decide). The same bits as the masked path with every entry usable: each
    elementwise step is the same correctly rounded fp64 operation (widening is exact; ``x*x``,
    ``a-b``, ``|x|``, ``x/u`` have one result), done in place instead of into a new tensor, and
    each reduction (``mean``, ``max``, ``sum``) runs over the same values in the same flat
    row-major layout (tests/test_compare.py checks it bit for bit). ``eager_is_reference``: ``ref``
    is eager widened (no fp64 reference: scope ``eager``), so eager is finite where ``ref`` is, and
    its error ``|ref - ref| / unit`` is 0.0 at every entry, its max and RMS 0.0: neither computed.
    ``compiled_is_eager``: the same bits (:func:`same_memory`, :func:`same_bits`): compiled's
    finiteness, error, max and RMS are eager's (the same operations on the same bits, widened into
    the same row-major buffer), computed once."""
    work = torch.empty(ref.shape, dtype=torch.float64)
    shaped = work.view(eager.shape)

    def widened_into(value: torch.Tensor) -> torch.Tensor:
        shaped.copy_(value.detach())
        return work

    if eager_is_reference and compiled_is_eager:
        return 0.0, 0.0, 0.0, 0.0  # every error |ref - ref| / unit
    if not eager_is_reference and not math.isfinite(float(widened_into(eager).sum())):
        return None
    # ``work`` holds compiled widened from here (eager's widening is compiled's where they are the same)
    if not compiled_is_eager and not math.isfinite(float(widened_into(compiled).sum())):
        return None
    compiled_scale = float(work.square_().mean().sqrt())
    reference_scale = float(torch.square(ref, out=work).mean().sqrt())
    unit = _error_unit(eager.dtype, reference_scale, compiled_scale, scale_floor, unit_roundoff)
    maxima, rms = [], []
    for value in (compiled,) if eager_is_reference or compiled_is_eager else (compiled, eager):
        error = widened_into(value).sub_(ref).abs_().div_(unit)
        maxima.append(float(error.max()))
        rms.append(float(error.square_().mean().sqrt()))
    if eager_is_reference:
        maxima.append(0.0)
        rms.append(0.0)
    elif compiled_is_eager:
        maxima.append(maxima[0])
        rms.append(rms[0])
    return rms[0], rms[1], maxima[0], maxima[1]


def _error_unit(dtype: torch.dtype, reference_scale: float, compiled_scale: float, scale_floor: float,
                unit_roundoff: float | None) -> float:
    """One ulp of ``dtype`` at the value's scale: the tensor's scale, compiled's own scale too (so an
    all-zero reference, relu of negatives, still gives a finite, meaningful error), and
    ``scale_floor``, the scale of what the op combined (a sum or mean that cancels to ~0 is judged at
    the scale of its terms, where its rounding is)."""
    scale = max(reference_scale, compiled_scale, scale_floor)
    return max(rounding_unit(dtype), unit_roundoff or 0.0) * max(scale, torch.finfo(dtype).tiny)


def _widened(value: torch.Tensor) -> torch.Tensor:
    """``value`` in fp64 on the host, row-major (itself where it already is)."""
    return value.detach().cpu().to(torch.float64, memory_format=torch.contiguous_format)


def _all_finite(*values: torch.Tensor) -> bool:
    """Every entry of every value finite. A sum is NaN or infinite wherever an entry is; a sum
    that overflows a finite fp64 range only sends the caller to the masks, which decide exactly."""
    return all(value.numel() and math.isfinite(float(value.sum())) for value in values)


def _usable_throughout(value: torch.Tensor, dtype: torch.dtype) -> bool:
    """Every entry of ``value`` finite and none at a fill's magnitude (``saturation(dtype)``), read
    from its extremes alone (one reduction: ``aminmax`` is NaN where an entry is, infinite where one is)."""
    limit = saturation(dtype)
    low, high = (float(v) for v in torch.aminmax(value))
    return -limit < low <= high < limit


def _any_saturated(ref: torch.Tensor, dtype: torch.dtype) -> bool:
    """Some finite entry of ``ref`` at a fill's magnitude (``|ref| >= saturation(dtype)``)."""
    low, high = torch.aminmax(ref)
    limit = saturation(dtype)
    return float(high) >= limit or float(low) <= -limit


def _masked(ref: torch.Tensor, eager64: torch.Tensor, compiled64: torch.Tensor, dtype: torch.dtype,
            tolerance: Tolerance) -> TensorVerdict | tuple[torch.Tensor, int, int, int]:
    """Where some entry is NaN/Inf or a saturated fill: the verdict when no entry is usable, else
    the usable entries' mask and the counts of new and lost non-finite values and wrong fills."""
    ref_finite = torch.isfinite(ref)
    eager_finite = torch.isfinite(eager64)
    compiled_finite = torch.isfinite(compiled64)
    # Compiled turns non-finite where eager and fp64 are finite, or is a different non-finite
    # (NaN, +Inf, -Inf) where eager agrees with fp64's non-finite value.
    ref_class, eager_class, compiled_class = _finite_class(ref), _finite_class(eager64), _finite_class(compiled64)
    # A compiled value made finite where both eager and fp64 are non-finite is a difference too, but
    # no NaN/Inf the compiler made: counted apart (``lost_nonfinite``), so NaN forensics ignore it.
    changed = ~ref_finite & (eager_class == ref_class) & (compiled_class != ref_class)
    new_nonfinite = int((~compiled_finite & eager_finite & ref_finite).sum() + (changed & ~compiled_finite).sum())
    lost_nonfinite = int((changed & compiled_finite).sum())
    usable = ref_finite & eager_finite & compiled_finite
    del ref_class, eager_class, compiled_class, changed, ref_finite, eager_finite, compiled_finite
    if usable.sum() == 0:
        differs = new_nonfinite or lost_nonfinite
        return TensorVerdict(Outcome.MISMATCH if differs else Outcome.MATCH, new_nonfinite=new_nonfinite,
                             reason="nonfinite" if differs else "", lost_nonfinite=lost_nonfinite)
    # Saturated fills (an attention mask of finfo.min, as HF eager attention writes it) are finite
    # but not data: left in the scale, one such entry makes it 1e38 and every real error vanishes.
    # They are judged apart, each relative to its own magnitude.
    saturated = usable & (ref.abs() >= saturation(dtype))
    saturated_wrong = 0
    if bool(saturated.any()):
        ref_s = ref[saturated]
        allowed = (tolerance.ratio * (eager64[saturated] - ref_s).abs()
                   + tolerance.max_floor_ulps * rounding_unit(dtype) * ref_s.abs())
        saturated_wrong = int(((compiled64[saturated] - ref_s).abs() > allowed).sum())
        usable = usable & ~saturated
    if usable.sum() == 0:
        differs = new_nonfinite or lost_nonfinite or saturated_wrong
        reason = "nonfinite" if new_nonfinite or lost_nonfinite else "saturated" if saturated_wrong else ""
        return TensorVerdict(Outcome.MISMATCH if differs else Outcome.MATCH, new_nonfinite=new_nonfinite,
                             reason=reason, lost_nonfinite=lost_nonfinite)
    return usable, new_nonfinite, lost_nonfinite, saturated_wrong


def _used(usable: torch.Tensor, *values: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each of ``values`` at the ``usable`` entries, in order: where every entry is usable, the
    values flattened (a view where they are contiguous: no copy of a large tensor), the same
    elements in the same order as indexing by the mask gives."""
    if bool(usable.all()):
        return tuple(value.reshape(-1) for value in values)
    return tuple(value[usable] for value in values)


def _finite_class(values: torch.Tensor) -> torch.Tensor:
    """0 finite, 1 NaN, 2 +Inf, 3 -Inf."""
    classes = torch.zeros(values.shape, dtype=torch.int8)
    classes[torch.isnan(values)] = 1
    classes[values == float("inf")] = 2
    classes[values == float("-inf")] = 3
    return classes


def _mismatch_reason(
    tolerance: Tolerance,
    *,
    compiled_rms_ulps: float,
    eager_rms_ulps: float,
    compiled_max_ulps: float,
    eager_max_ulps: float,
    new_nonfinite: int,
) -> str:
    if new_nonfinite:
        return "nonfinite"
    if compiled_rms_ulps > tolerance.ratio * eager_rms_ulps + tolerance.rms_floor_ulps:
        return "rms"
    if compiled_max_ulps > tolerance.ratio * eager_max_ulps + tolerance.max_floor_ulps:
        return "max"
    return ""


def compare_random_draw(eager: Any, compiled: Any) -> TensorVerdict:
    """A random op's output, when draws are data: only its shape, dtype and finiteness count."""
    if not isinstance(eager, torch.Tensor) or not isinstance(compiled, torch.Tensor):
        return compare_tensor(eager, eager, compiled)
    if compiled.shape != eager.shape or compiled.dtype != eager.dtype:
        return TensorVerdict(Outcome.MISMATCH, reason=f"{compiled.dtype}{tuple(compiled.shape)} != {eager.dtype}{tuple(eager.shape)}")
    if not (eager.is_floating_point() or eager.is_complex()):
        return TensorVerdict(Outcome.MATCH)
    new_nonfinite = int((~torch.isfinite(compiled) & torch.isfinite(eager)).sum())
    if new_nonfinite:
        return TensorVerdict(Outcome.MISMATCH, new_nonfinite=new_nonfinite, reason="nonfinite")
    return TensorVerdict(Outcome.MATCH)


def compare_values(
    eager: list[Any], fp64: list[Any], compiled: list[Any], tolerance: Tolerance = Tolerance(),
    units: list[float | None] | None = None, scale_floors: list[float] | None = None,
) -> list[TensorVerdict]:
    """Judge a list of outputs pairwise; lengths must agree (else one MISMATCH). ``units``: per
    output, the unit roundoff of a precision the user allowed below the dtype's (or None)."""
    if len(compiled) != len(eager):
        return [TensorVerdict(Outcome.MISMATCH, reason=f"{len(compiled)} outputs != {len(eager)}")]
    units = units if units is not None and len(units) == len(eager) else [None] * len(eager)
    floors = scale_floors if scale_floors is not None and len(scale_floors) == len(eager) else [0.0] * len(eager)
    return [compare_tensor(e, r, c, tolerance, u, f) for e, r, c, u, f in zip(eager, fp64, compiled, units, floors)]


def worst(verdicts: list[TensorVerdict]) -> TensorVerdict:
    """The verdict that decides a set: the first mismatch, else the largest error."""
    for verdict in verdicts:
        if verdict.outcome is not Outcome.MATCH:
            return verdict
    if not verdicts:
        return TensorVerdict(Outcome.MATCH)
    return max(verdicts, key=lambda v: v.compiled_rms_ulps)


# ---- Eager against compiled, where fp64 cannot arbitrate --------------------------------------
MATERIAL_ULPS = 64.0
MATERIAL_FRACTION = 2.0 ** -4


@dataclass(frozen=True)
class Difference:
    """Eager against compiled (or any two values of one computation), without a reference.

    ``max_ulps``: the largest difference in ulps of the dtype at the tensor's scale (inf where
    finiteness differs); ``elements``: entries that differ at all, of ``total``."""

    material: bool
    elements: int = 0
    total: int = 0
    max_ulps: float = 0.0
    max_abs: float = 0.0
    reason: str = ""  # "exact" (integer/boolean), "nonfinite", "scale", "shape", "value"

    def to_json(self) -> dict[str, Any]:
        return {"material": self.material, "elements": self.elements, "total": self.total,
                "max_ulps": _finite_or_str(self.max_ulps), "max_abs_diff": _finite_or_str(self.max_abs),
                "reason": self.reason}


def material_threshold(dtype: torch.dtype) -> float:
    """The largest difference, as a fraction of the tensor's scale, that rounding noise explains."""
    return max(MATERIAL_ULPS * rounding_unit(dtype), MATERIAL_FRACTION)


def material_difference(eager: Any, compiled: Any, dtype: torch.dtype | None = None,
                        scale_floor: float = 0.0) -> Difference:
    """Whether ``compiled`` differs from ``eager`` beyond rounding noise (see the module docstring).
    ``dtype``: whose ulps to measure in (default: eager's; an fp64 reference is judged in the
    model's dtype)."""
    if not isinstance(eager, torch.Tensor) or not isinstance(compiled, torch.Tensor):
        same = _same_plain(eager, compiled)
        return Difference(not same, reason="" if same else "value")
    if eager.shape != compiled.shape:
        return Difference(True, reason="shape")
    total = eager.numel()
    if not (eager.is_floating_point() or eager.is_complex()):
        differing = int((eager.detach().cpu() != compiled.detach().cpu().to(eager.dtype)).sum())
        return Difference(differing > 0, differing, total, reason="exact" if differing else "")
    unit = rounding_unit(torch.float32 if eager.is_complex() else (dtype or eager.dtype))
    value_dtype = eager.real.dtype if eager.is_complex() else eager.dtype
    chunked = _in_chunks(eager, compiled, value_dtype)
    if chunked is not None:
        # The common case, every entry finite and none a fill: what the masks below would keep is
        # every entry, in order, without their passes; widened chunk by chunk into one buffer.
        differing, scale_eager, scale_compiled, max_abs = chunked
        return _material(differing, total, unit, max(scale_eager, scale_compiled, scale_floor), max_abs)
    a = _real64(eager)
    b = _real64(compiled)
    if _all_finite(a, b) and not _any_saturated(a, value_dtype):
        # every entry finite and none a fill, where a chunk's test did not see it (see _in_chunks)
        differing = int((a != b).sum())
    else:
        differing = int((a != b).sum() - (torch.isnan(a) & torch.isnan(b)).sum())
        changed = int((_finite_class(a) != _finite_class(b)).sum())
        if changed:
            return Difference(True, differing, total, math.inf, math.inf, "nonfinite")
        usable = torch.isfinite(a)
        if not bool(usable.any()):
            return Difference(False, differing, total)
        # Saturated fills (finfo.min masks) are no scale: they would hide any difference (see _compare_floating).
        ordinary = usable & (a.abs() < saturation(value_dtype))
        saturated_differ = bool(((a != b) & usable & ~ordinary).any())
        if not bool(ordinary.any()):
            return Difference(saturated_differ, differing, total, reason="saturated" if saturated_differ else "")
        a, b = a[ordinary], b[ordinary]
    # ``scale_floor``: a sum or mean that cancels to ~0 is measured at the scale of its terms.
    # One fp64 buffer for the squares and the difference (in place: the same bits as new tensors,
    # each reduction over the same flat values; tests/test_compare.py checks it).
    work = torch.empty_like(a, memory_format=torch.contiguous_format)
    scale = max(float(torch.square(a, out=work).mean().sqrt()), float(torch.square(b, out=work).mean().sqrt()),
                scale_floor)
    max_abs = float(torch.sub(a, b, out=work).abs_().max())
    del work
    return _material(differing, total, unit, scale, max_abs)


def _material(differing: int, total: int, unit: float, scale: float, max_abs: float) -> Difference:
    """:func:`material_difference`'s rule once its reductions are taken."""
    if scale == 0.0:
        return Difference(False, differing, total)
    max_ulps = max_abs / (unit * scale)
    material = max_abs > max(MATERIAL_ULPS * unit, MATERIAL_FRACTION) * scale
    return Difference(material, differing, total, max_ulps, max_abs, "scale" if material else "")


CHUNK = 1 << 20  # elements widened to fp64 at a time (8 MB)


def _flat(value: torch.Tensor) -> torch.Tensor:
    """``value`` flat and row-major in its own dtype (a complex one as its real pairs): what
    :func:`_real64` widens, not widened."""
    value = value.detach().cpu()
    return (torch.view_as_real(value) if value.is_complex() else value).reshape(-1)


def _in_chunks(eager: torch.Tensor, compiled: torch.Tensor,
               value_dtype: torch.dtype) -> tuple[int, float, float, float] | None:
    """:func:`material_difference`'s reductions where every entry of both is finite and none of
    eager's a fill (else None: the masks decide): the entries that differ, each side's RMS and the
    largest difference, with one fp64 buffer the size of the value instead of three (issue 34:
    an embedding's gradient). The same bits as widening each whole: widening is exact, each
    elementwise step (``x*x``, ``a-b``, ``|x|``) is one correctly rounded fp64 operation whatever
    the chunk, the buffer holds the same values in the same flat row-major layout, so each
    ``mean`` and ``max`` runs over the same values; the counts are integers
    (tests/test_compare.py checks it bit for bit)."""
    x, y = _flat(eager), _flat(compiled)
    total = x.numel()
    if total == 0 or y.numel() != total:
        return None
    bounds = [(start, min(start + CHUNK, total)) for start in range(0, total, CHUNK)]
    for start, stop in bounds:
        # in their own dtypes, unwidened (widening is exact: the same extremes), one reduction each:
        # the extremes are NaN where an entry is (aminmax propagates it) and infinite where one is
        if not _usable_throughout(x[start:stop], value_dtype):
            return None
        low, high = (float(v) for v in torch.aminmax(y[start:stop]))
        if not (math.isfinite(low) and math.isfinite(high)):
            return None
    work = torch.empty(total, dtype=torch.float64)
    scales = []
    for source in (x, y):
        for start, stop in bounds:
            torch.square(source[start:stop].to(torch.float64), out=work[start:stop])
        scales.append(float(work.mean().sqrt()))
    differing = 0
    for start, stop in bounds:
        a, b = x[start:stop].to(torch.float64), y[start:stop].to(torch.float64)
        differing += int((a != b).sum())
        torch.sub(a, b, out=work[start:stop])
    return differing, scales[0], scales[1], float(work.abs_().max())


def _same_plain(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable values are different values
        return False


def _real64(value: torch.Tensor) -> torch.Tensor:
    value = value.detach().cpu()
    if value.is_complex():
        value = torch.view_as_real(value.to(torch.complex128))
    return value.to(torch.float64).reshape(-1)


def reference_unreliable(eager: Any, fp64: Any) -> bool:
    """The fp64 reference cannot arbitrate this value: eager itself differs materially from it
    (ill-conditioned; integers derived from floats truncated elsewhere in fp64)."""
    if not isinstance(eager, torch.Tensor) or not isinstance(fp64, torch.Tensor):
        return False
    reference = fp64 if not eager.is_floating_point() else fp64.to(torch.float64)
    return material_difference(eager, reference, dtype=eager.dtype if eager.is_floating_point() else None).material


def elementwise_change(before: Any, after: Any) -> float:
    """The largest elementwise relative difference, |after - before| / max(|before|, |after|)
    (0 where both are 0; inf where finiteness differs; booleans as 0/1)."""
    if not isinstance(before, torch.Tensor) or not isinstance(after, torch.Tensor):
        return 0.0 if _same_plain(before, after) else 1.0
    if before.shape != after.shape:
        return math.inf
    a, b = _real64(before), _real64(after)
    if bool((_finite_class(a) != _finite_class(b)).any()):
        return math.inf
    usable = torch.isfinite(a)
    a, b = a[usable], b[usable]
    if a.numel() == 0:
        return 0.0
    size = torch.maximum(a.abs(), b.abs())
    nonzero = size > 0
    if not bool(nonzero.any()):
        return 0.0
    return float(((a - b).abs()[nonzero] / size[nonzero]).max())


@dataclass(frozen=True)
class Departure:
    """A compiled value that departs from eager beyond the floors while being closer to fp64."""

    difference_rms_ulps: float
    difference_max_ulps: float
    compiled_rms_ulps: float  # against fp64
    eager_rms_ulps: float  # against fp64
    # An integer or boolean value (a saved mask): judged in elements, not ulps; the ulps above are 0.
    exact: bool = False
    compiled_wrong: int = 0  # elements that differ from fp64's
    eager_wrong: int = 0

    def to_json(self) -> dict[str, Any]:
        floats = {k: _finite_or_str(getattr(self, k)) for k in ("difference_rms_ulps", "difference_max_ulps",
                                                                 "compiled_rms_ulps", "eager_rms_ulps")}
        exact = {"exact": True, "compiled_wrong": self.compiled_wrong, "eager_wrong": self.eager_wrong} if self.exact else {}
        return {**floats, **exact}


def closer_to_fp64(eager: Any, fp64: Any, compiled: Any, tolerance: Tolerance = Tolerance(),
                   scale_floor: float = 0.0) -> Departure | None:
    """The departure when compiled differs from eager beyond the tolerance's floors (eager taken
    as the reference) and its error against fp64 is smaller than eager's; else None. ``scale_floor``:
    the scale the value's rounding lives at (a value that cancelled: rounding noise is no departure)."""
    if not all(isinstance(v, torch.Tensor) for v in (eager, fp64, compiled)):
        return None
    if compiled.shape != eager.shape or compiled.dtype != eager.dtype:
        return None
    if not (eager.is_floating_point() or eager.is_complex()):
        return _exact_departure(eager, fp64, compiled)
    if not eager.is_floating_point():
        return None
    against_eager = compare_tensor(eager, eager, compiled, tolerance, scale_floor=scale_floor)
    if against_eager.outcome is Outcome.MATCH or against_eager.new_nonfinite:
        return None
    against_fp64 = compare_tensor(eager, fp64, compiled, tolerance, scale_floor=scale_floor)
    if against_fp64.new_nonfinite or not against_fp64.compiled_rms_ulps < against_fp64.eager_rms_ulps:
        return None
    return Departure(against_eager.compiled_rms_ulps, against_eager.compiled_max_ulps,
                     against_fp64.compiled_rms_ulps, against_fp64.eager_rms_ulps)


def _exact_departure(eager: torch.Tensor, fp64: torch.Tensor, compiled: torch.Tensor) -> Departure | None:
    """An integer or boolean value compiled sets otherwise than eager, agreeing with fp64 there:
    counted in elements (``exact``), not ulps."""
    if not exact_closer_to_fp64(eager, fp64, compiled):
        return None
    reference = fp64.detach().cpu().to(eager.dtype)
    return Departure(0.0, 0.0, 0.0, 0.0, exact=True, compiled_wrong=int((compiled.cpu() != reference).sum()),
                     eager_wrong=int((eager.cpu() != reference).sum()))


BITWISE = Tolerance(ratio=0.0, rms_floor_ulps=0.0, max_floor_ulps=0.0)


# ---- exact rules: what the ulp rule cannot see (issue 37) -------------------------------------------

def zero_sign_flips(eager: Any, compiled: Any) -> int:
    """Entries where eager and compiled are both zero with different signs (-0.0 against +0.0):
    0 ulps apart, yet a program that observes the sign (``signbit``, a division by it, ``atan2``,
    ``copysign``) sees two different values."""
    if not isinstance(eager, torch.Tensor) or not isinstance(compiled, torch.Tensor) \
            or not eager.is_floating_point() or compiled.dtype != eager.dtype or compiled.shape != eager.shape:
        return 0
    eager, compiled = eager.detach().cpu(), compiled.detach().cpu()
    return int(((eager == 0) & (compiled == 0) & (torch.signbit(eager) != torch.signbit(compiled))).sum())


def exact_zero_sign(verdict: TensorVerdict, eager: Any, compiled: Any) -> TensorVerdict:
    """The exact rule on one output's verdict: a match whose zeros compiled returns with the other
    sign is a mismatch, saying how many."""
    flips = zero_sign_flips(eager, compiled) if verdict.outcome is Outcome.MATCH else 0
    if not flips:
        return verdict
    return TensorVerdict(Outcome.MISMATCH, verdict.compiled_rms_ulps, verdict.eager_rms_ulps,
                         verdict.compiled_max_ulps, verdict.eager_max_ulps,
                         reason=f"sign of zero: {flips} element(s) -0.0 where eager has +0.0 or the reverse")


def exact_integer(verdict: TensorVerdict, eager: Any, compiled: Any) -> TensorVerdict:
    """The exact rule on an integer or boolean value computed from integers and constants alone
    (index arithmetic: ``floor(i / scale)``, an ``iota`` times a constant): such a value has one
    right answer, eager's, whatever an fp64 run makes of the floats in between; a match only
    because compiled agrees with fp64 (:func:`exact_closer_to_fp64`) is a mismatch, saying how many."""
    if verdict.outcome is not Outcome.MATCH or not isinstance(eager, torch.Tensor) \
            or not isinstance(compiled, torch.Tensor) or eager.is_floating_point() or eager.is_complex() \
            or compiled.shape != eager.shape or compiled.dtype != eager.dtype:
        return verdict
    differing = int((eager.detach().cpu() != compiled.detach().cpu()).sum())
    if not differing:
        return verdict
    return TensorVerdict(Outcome.MISMATCH, reason=f"exact: {differing} of {eager.numel()} element(s) differ from "
                                                  "eager's (integer arithmetic, judged by equality)")


def exact_float(verdict: TensorVerdict, eager: Any, reference: Any, compiled: Any) -> TensorVerdict:
    """The exact rule on a floating value with one right answer (a remainder by a Python scalar in
    fp16/bf16: the op's result jumps with the scalar, so a scalar kept as written where eager's op
    rounds it is another computation, not rounding noise, pytorch#183083): a match where some
    element of compiled's is neither eager's nor the reference's rounded to the dtype (NaN as NaN)
    is a mismatch, saying how many."""
    if verdict.outcome is not Outcome.MATCH or not all(isinstance(v, torch.Tensor) for v in (eager, compiled)) \
            or not eager.is_floating_point() or compiled.shape != eager.shape or compiled.dtype != eager.dtype:
        return verdict
    eager, compiled = eager.detach().cpu(), compiled.detach().cpu()
    wrong = (compiled != eager) & ~(compiled.isnan() & eager.isnan())
    if isinstance(reference, torch.Tensor) and reference.shape == eager.shape:
        rounded = reference.detach().cpu().to(eager.dtype)
        wrong &= (compiled != rounded) & ~(compiled.isnan() & rounded.isnan())
    differing = int(wrong.sum())
    if not differing:
        return verdict
    return TensorVerdict(Outcome.MISMATCH, verdict.compiled_rms_ulps, verdict.eager_rms_ulps,
                         verdict.compiled_max_ulps, verdict.eager_max_ulps,
                         reason=f"exact: {differing} of {eager.numel()} element(s) differ from eager's and the "
                                "reference's (an op whose result jumps with a scalar eager rounds, judged by equality)")


# ---- Below tolerance: outputs that agree, yet compiled is clearly less accurate than eager -----
# An output within the tolerance (compiled RMS <= RATIO x eager's + the 8-ulp floor) may still
# carry a wrong op whose error the graph shrinks (a layer norm, a residual sum): a wrong gelu in
# BERT leaves its outputs at 7x eager's error. Four times eager's error is twice what a second,
# equally valid rounding order leaves (RATIO = 2); the floor keeps outputs that eager computes
# (nearly) exactly out: 4 ulps RMS is above the libm/Sleef and reduction-order noise.
BELOW_TOLERANCE_RATIO = 4.0
BELOW_TOLERANCE_FLOOR_ULPS = 4.0


def clearly_above_eager(verdict: TensorVerdict) -> bool:
    """A matching value whose compiled error against fp64 is clearly above eager's own: worth
    judging every node alone (a finding said, never a verdict)."""
    return (verdict.outcome is Outcome.MATCH and math.isfinite(verdict.compiled_rms_ulps)
            and verdict.compiled_rms_ulps > BELOW_TOLERANCE_FLOOR_ULPS
            and verdict.compiled_rms_ulps > BELOW_TOLERANCE_RATIO * verdict.eager_rms_ulps)
