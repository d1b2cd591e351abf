"""https://github.com/pytorch/pytorch/issues/182131 — torch.compile/Inductor produces different
result for float16 cast before elementwise add (filed 2026-05-01).

Thread: closed by PR #182882 (BoyuanFeng, "Fix emulation precision casts for cpp codegen"): the CPU
C++ reverse-cast cache now respects ``emulate_precision_casts``, and the reporter's repro matches
eager when run with ``TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1``; default behaviour (fp16 casts
fused away in compute precision) is unchanged, i.e. intended.

Check on torch 2.13.0+cpu: eager sum 20.5996, compiled 20.6000, elementwise max diff 0.0010 (one
fp16 ulp at ~2); with the switch both agree exactly. Compiled is the fp64 value of the sum without
the fp16 rounding. Class: cast elision.
Edits: none (the reporter's ``assert_close(..., rtol=0, atol=0)`` raises; kept).
"""
REAL_REPORT = {
    "issue": 182131, "class": "cast_elision",
    "verdict": "clean",
    "op": None,
    "cli_args": [],
    "known_miss": None,
}
import torch

print(torch.__version__)

x = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) / 10
c = (torch.arange(24) % 5 == 0).reshape(2, 3, 4)

def f(x, c):
    z = torch.where(c, torch.full_like(x, 0.5), torch.full_like(x, -0.5))
    y = z.to(torch.float16) + x.to(torch.float16)
    return y, y.float().sum()

eager = f(x, c)
compiled = torch.compile(f, backend="inductor", fullgraph=True)(x, c)

print("eager sum:   ", eager[1])
print("compiled sum:", compiled[1])
print("max diff:    ", (eager[0].float() - compiled[0].float()).abs().max())

torch.testing.assert_close(compiled[0], eager[0], rtol=0, atol=0)
torch.testing.assert_close(compiled[1], eager[1], rtol=0, atol=0)
