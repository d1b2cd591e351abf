"""https://github.com/pytorch/pytorch/issues/183605 — torch.compile changes fp16 NaN behavior for
var + rsqrt normalization (filed 2026-05-13 against 2.11.0; closed).

Thread: for ``x = full((3, 5), 1e-10, fp16)`` (1e-10 is 0 in fp16) eager returns all NaN and the
compiled function all zeros; no maintainer diagnosis in the stored thread. Mechanism: eager rounds
``var + 1e-9`` to fp16, where 1e-9 underflows to 0, so ``rsqrt(0) = inf`` and ``0 * inf = NaN``;
Inductor keeps the fp16 intermediate in fp32 (1e-9 survives), so ``0 * rsqrt(1e-9) = 0``.

Check on torch 2.13.0+cpu: eager NaN, compiled 0.0 (all elements); the fp64 reference (the program
on ``x.double()``) gives 0.0 everywhere: compiled is the accurate one, eager's NaN comes from its
fp16 rounding of an intermediate. Class: more_accurate, the right verdict is ``clean``. No edits.
"""
REAL_REPORT = {
    "issue": 183605, "class": "more_accurate",
    "verdict": "clean",
    "op": None,
    "cli_args": [],
    "known_miss": None,
}
import torch

def fn(x):
    var = x.var(dim=-1, keepdim=True)
    return x * torch.rsqrt(var + 1e-9)

x = torch.full((3, 5), 1e-10, dtype=torch.float16)

eager = fn(x)

torch._dynamo.reset()
compiled = torch.compile(fn, backend="inductor")(x)

print("eager:", eager[0, 0].item(), "compile:", compiled[0, 0].item())
print(
    "eager_all_nan:",
    torch.isnan(eager).all().item(),
    "compile_all_zero:",
    (compiled == 0).all().item(),
)
