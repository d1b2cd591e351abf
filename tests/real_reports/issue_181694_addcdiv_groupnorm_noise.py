"""https://github.com/pytorch/pytorch/issues/181694 — ``torch.addcdiv`` produces wrong output under
``torch.compile(backend='inductor')`` (filed 2026-04-28; closed).

Thread: HU-qingqing: "The issue actually comes from tiny differences in the output of GroupNorm,
which then get amplified by the subsequent clamp and division" (GroupNorm of a constant row has
zero variance; its output is rounding residue, and ``t / clamp(t, 1e-6)`` multiplies it by 1e6);
the reduction order of the vectorised mean/variance differs from ATen's. Closed, not a bug.

Check on torch 2.13.0+cpu: max |eager - compiled| = 31.5; eager's GroupNorm output is 3.6e-6
where fp64 gives 2.1e-14, so eager's own error after the division is of the same size as the
difference: noise amplified by an ill-conditioned program. Class: noise, expected ``clean``.
No edits (the reporter's trailing comments dropped).
"""
REAL_REPORT = {
    "issue": 181694, "class": "noise",
    "verdict": "clean",
    "op": None,
    "cli_args": [],
    "known_miss": None,
}
import torch
import torch.nn as nn

bn1 = nn.BatchNorm1d(7).eval()
gn  = nn.GroupNorm(1, 7).eval()
bn2 = nn.BatchNorm1d(7).eval()

def model():
    x = torch.ones([7, 7])
    t = bn1(x)
    t = gn(t)
    # normalised residual: t + t / clamp(t, min=1e-6)
    t = torch.addcdiv(t, t, torch.clamp(t, min=1e-6))   # ← wrong in compiled
    t = bn2(t)
    return t

eager_out    = model()
compiled_out = torch.compile(model, backend='inductor')()

print("max diff:", (eager_out - compiled_out).abs().max().item())
