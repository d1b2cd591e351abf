"""NaN/Inf forensics: what went into the op that first turned non-finite, why, and the usual fix.

Pure functions over an op name, its input values and its output value. The cause is read from
the op and the statistics of its inputs (zeros in a denominator, negatives under a log or sqrt,
exp arguments past the dtype's overflow point, inf - inf, 0 * inf), never guessed from the name
alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

_DIVISIONS = ("aten.div", "aten.reciprocal", "aten.remainder", "aten.fmod", "aten.rsqrt", "aten.floor_divide")
_LOGS = ("aten.log", "aten.log2", "aten.log10", "aten.xlogy", "aten.special_xlog1py")
_SQRTS = ("aten.sqrt", "aten.rsqrt", "aten.pow")
_EXPS = ("aten.exp", "aten.exp2", "aten.expm1", "aten.pow", "aten.sinh", "aten.cosh")


@dataclass(frozen=True)
class InputStats:
    name: str
    dtype: str
    shape: tuple[int, ...]
    min: float
    max: float
    zeros: int
    negatives: int
    nan: int
    inf: int
    headroom: float  # max |x| as a fraction of the dtype's largest finite value

    def to_json(self) -> dict[str, Any]:
        return {k: (round(v, 6) if isinstance(v, float) and math.isfinite(v) else
                    (str(v) if isinstance(v, float) else (list(v) if isinstance(v, tuple) else v)))
                for k, v in self.__dict__.items()}


def input_stats(name: str, value: torch.Tensor) -> InputStats:
    as64 = value.detach().to(torch.float64)
    finite = as64[torch.isfinite(as64)]
    largest = torch.finfo(value.dtype).max if value.is_floating_point() else float(torch.iinfo(value.dtype).max)
    return InputStats(
        name=name,
        dtype=str(value.dtype).replace("torch.", ""),
        shape=tuple(value.shape),
        min=float(finite.min()) if finite.numel() else float("nan"),
        max=float(finite.max()) if finite.numel() else float("nan"),
        zeros=int((as64 == 0).sum()),
        negatives=int((as64 < 0).sum()),
        nan=int(torch.isnan(as64).sum()),
        inf=int(torch.isinf(as64).sum()),
        headroom=float(finite.abs().max()) / largest if finite.numel() else float("nan"),
    )


def _family(op: str, prefixes: tuple[str, ...]) -> bool:
    return any(op == p or op.startswith(p + ".") or op.startswith(p + "_") for p in prefixes)


# Domain errors: (op family, the input range outside the domain, cause, fix). Read from the first
# input's statistics.
_DOMAINS = (
    (("aten.log1p",), lambda s: s.min <= -1, "log1p of a value <= -1",
     "clamp the argument above -1 (x.clamp_min(-1 + eps)), or fix what makes it that small"),
    (("aten.acosh",), lambda s: s.min < 1, "acosh of a value < 1", "clamp the argument to >= 1"),
    (("aten.atanh",), lambda s: s.min <= -1 or s.max >= 1, "atanh of a value outside (-1, 1)",
     "clamp the argument into (-1 + eps, 1 - eps)"),
    (("aten.asin", "aten.acos"), lambda s: s.min < -1 or s.max > 1, "asin/acos of a value outside [-1, 1]",
     "clamp the argument into [-1, 1]"),
)


def _domain_error(op: str, first: InputStats | None) -> tuple[str, str] | None:
    if first is None or not math.isfinite(first.min):
        return None
    for families, outside, cause, fix in _DOMAINS:
        if _family(op, families) and outside(first):
            return cause, fix
    return None


def diagnose(op: str, inputs: list[InputStats], output_dtype: torch.dtype | None) -> tuple[str, str]:
    """(plain-language cause, usual fix) for an op whose output turned non-finite."""
    first = inputs[0] if inputs else None
    if any(s.nan for s in inputs):
        return "an input already holds NaN", "find where that input's NaN comes from (it is upstream of this op)"
    domain = _domain_error(op, first)
    if domain is not None:
        return domain
    if _family(op, ("aten.pow",)) and first and first.negatives:
        return "a negative number to a fractional power", "clamp the base to be positive, or use an integer exponent"
    if _family(op, _LOGS) and first and first.zeros:
        return "log of zero", "add an epsilon (log(x + eps)), clamp (x.clamp_min(eps)), or use log_softmax / logsumexp"
    if _family(op, _LOGS) and first and first.negatives:
        return "log of a negative number", "clamp the argument to be positive, or fix what makes it negative"
    if _family(op, _SQRTS) and first and first.negatives:
        return "square root of a negative number", "clamp the argument (x.clamp_min(0)) or add an epsilon"
    if _family(op, _DIVISIONS) and any(s.zeros for s in inputs[1:] or inputs):
        return "division by zero", "add an epsilon to the denominator or mask the zero entries"
    if _family(op, ("aten.add", "aten.sub", "aten.sum", "aten.mean")) and any(s.inf for s in inputs):
        return "inf - inf (infinities of opposite sign added)", "keep values finite before the sum: clamp, or a wider dtype"
    if _family(op, ("aten.mul", "aten.mm", "aten.bmm", "aten.addmm", "aten.matmul")) and any(s.inf for s in inputs) and any(s.zeros for s in inputs):
        return "0 x inf", "keep values finite: clamp before the product, or a wider dtype"
    if _family(op, _EXPS) and output_dtype is not None and output_dtype.is_floating_point:
        limit = math.log(torch.finfo(output_dtype).max)
        if first and first.max > limit:
            return f"exp overflow (argument up to {first.max:.4g} > log(max {output_dtype}) = {limit:.4g})", \
                "subtract the maximum first (logsumexp / softmax), clamp the argument, or a wider dtype"
    if inputs and max((s.headroom for s in inputs if math.isfinite(s.headroom)), default=0.0) > 1e-3:
        return "dtype overflow (inputs within 1000x of the dtype's largest value)", "rescale, or compute in a wider dtype (float32)"
    return "unknown (the inputs look ordinary: suspect the op's implementation)", \
        "compare against eager with this repro; if only compiled makes it, report it with the repro"


def describe_origin(op: str, input_names: list[str], input_values: list[Any], output: Any) -> dict[str, Any]:
    """Input statistics, cause and fix for the op that first turned non-finite."""
    stats = [input_stats(name, value) for name, value in zip(input_names, input_values)
             if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.dtype != torch.bool)]
    first_output = output[0] if isinstance(output, (list, tuple)) and output else output
    dtype = first_output.dtype if isinstance(first_output, torch.Tensor) else None
    cause, fix = diagnose(op, stats, dtype)
    return {"inputs": [s.to_json() for s in stats], "cause": cause, "fix": fix}
