"""Restates upstream test/dynamo/test_compiler_bisector.py::test_emulate_precision_casts (CPU twin),
as a plain function.

bf16 ``amax = |max(x)|; scale = 448 / clamp(amax, 1e-12); scale.to(float32)``. Eager rounds the
bf16 quotient to bf16 before the cast; Inductor keeps it in fp32 (closer to fp64). Upstream's
test compares with torch.equal and expects CompilerBisector to name
``inductor_emulate_precision_casts``. Against fp64 the compiled result is the more accurate one:
not a compiler bug. Expected: clean (ideally naming emulate_precision_casts as the knob that
makes them bit-equal).
"""
import torch

DEVICES = ["cpu", "cuda"]
PLANTED = None  # nothing planted: Inductor's real bf16 behaviour
EXPECTED = {"verdict": "clean", "op": None}


def plant():
    pass


plant()


def calculate_scale(inp):
    amax = torch.abs(torch.max(inp))
    scale = 448.0 / torch.clamp(amax, min=1e-12)
    scale = scale.to(torch.float32)
    return scale


def get_model():
    return calculate_scale


def get_inputs():
    torch.manual_seed(0)
    return (torch.randn(16, 16, 768, dtype=torch.bfloat16),)
