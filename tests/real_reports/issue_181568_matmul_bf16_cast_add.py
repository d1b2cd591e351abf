"""https://github.com/pytorch/pytorch/issues/181568 — torch.compile mismatch for matmul followed by
bfloat16 cast and fp32 add (filed 2026-04-27).

Thread: closed, labelled high priority, repro:agent:h100:repro_success:mitigation: the repro agent
confirmed it and found that ``emulate_precision_casts`` makes compiled match eager. Inductor fuses
``(x @ w).to(bf16) + b`` and keeps the bf16 rounding of the cast out of the fused add (the add
promotes to fp32 anyway), which upstream treats as intended by default.

Check on torch 2.13.0+cpu: ``out`` differs in 510 of 510 elements by up to 0.031, ``mean`` in 19
of 30 (both outputs are fp32: the bf16 result is promoted by the add); with
``TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1`` out matches exactly (mean within 2.4e-07). The compiled
values are the fp64 program's without the bf16 rounding. Class: cast elision (not a bug by
upstream's rule); the tool must not call it a compiler fault.
Edits: none (the reporter's ``torch.testing.assert_close`` raises; kept).
"""
REAL_REPORT = {
    "issue": 181568, "class": "cast_elision",
    "verdict": "clean",
    "op": None,
    "cli_args": [],
    "known_miss": None,
}
import torch

print(torch.__version__)

torch.manual_seed(119)

def f(x, w, b):
    y = (x @ w).to(torch.bfloat16) + b
    return y, y.mean(-1)

x = torch.randn(2, 15, 32)
w = torch.randn(32, 17)
b = torch.randn(17)

ref = f(x, w, b)
got = torch.compile(
    f,
    backend="inductor",
    fullgraph=True,
    dynamic=True,
)(x, w, b)

for name, r, g in zip(["out", "mean"], ref, got):
    diff = (r.float() - g.float()).abs()
    print(
        name,
        "max_abs_diff =", diff.max().item(),
        "mean_abs_diff =", diff.mean().item(),
        "diff_count =", int((diff != 0).sum()),
        "numel =", r.numel(),
    )
    torch.testing.assert_close(r, g)
