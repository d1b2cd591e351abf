"""https://github.com/pytorch/pytorch/issues/183083 — ``torch.remainder`` returns incorrect results
with float16 tensor and Python scalar on Inductor CPU (filed 2026-05-10 against 2.10.0+cpu;
closed).

Thread: CPU eager rounds the Python float divisor to the tensor's dtype (3.14 -> fp16 3.140625)
before ``remainder``; Inductor kept 3.14 at full precision, so 3.140625 % 3.14 = 6.2e-4 where eager
gives 0. Fixed by pytorch/pytorch#186942 ("[inductor] Round fmod/remainder scalars for bf16/fp16
CPU", jansel: "compiled CPU kernels kept constants like 1.7 at full precision and diverged from
eager at rounding boundaries").

Check on torch 2.13.0+cpu: still reproduces: eager [2.2812, 1.6406, -0., 0., 0.1000, 1., 0.,
1.7188], compiled [2.2793, 1.6396, 0., 0., 0.09998, 1., 6.2466e-04, 1.7197]. An fp64 reference
run with the scalar as written (3.14) sides with compiled; with the scalar in the tensor's dtype,
as eager's semantics define it, it sides with eager. Maintainers fixed the compiler: a real bug
(``remainder.Scalar``), though one an fp64 reference taken naively calls "more accurate". No edits.
"""
REAL_REPORT = {
    "issue": 183083, "class": "real_bug",
    "verdict": "divergent",
    "op": "aten.remainder.Scalar",
    "cli_args": [],
    "known_miss": None,
}
import torch

def f(x):
    return torch.remainder(x, 3.14)

x = torch.tensor(
    [-4.0, -1.5, -0.0, 0.0, 0.1, 1.0, 3.140625, 8.0],
    dtype=torch.float16,
)

eager = f(x)
compiled = torch.compile(f, backend="inductor")(x)

print("eager =", eager)
print("compiled =", compiled)
