"""https://github.com/pytorch/pytorch/issues/187018 — abs on uint8 silently miscompiled via std::abs
integer promotion (filed 2026-06-11 against 2.13.0.dev20260609+cpu).

Thread: labelled module: correctness (silent), oncall: cpu inductor, closed. The C++ kernel takes
``std::abs`` of the uint8 value, which promotes it to ``int``; the following negation then yields
-200 instead of the uint8 wrap-around 56, so the sum is -800 instead of 224.

Check on torch 2.13.0+cpu: ``f_bug`` compiled prints -800, eager (and the fp64 reference, exact
here) give 224; ``f_ok`` compiled gives 224. Class: a real compiler bug in the uint8 ``abs``.
No edits: the reporter's script as written (it compiles both functions itself).
"""
REAL_REPORT = {
    "issue": 187018, "class": "real_bug",
    "verdict": "divergent",
    "op": "aten.abs.default",
    "cli_args": [],
    "known_miss": None,
}
import sys, platform
import torch
import numpy as np

print(f"python   : {sys.version.split()[0]}")
print(f"platform : {platform.platform()}")
print(f"torch    : {torch.__version__}")
print("-" * 50)

def f_bug(x):
    y = -x.abs()
    return torch.cat([y, y]).sum()

def f_ok(x):
    return torch.cat([-x.abs(), -x.abs()]).sum()

x = torch.tensor([200, 200], dtype=torch.uint8)
print(torch.compile(f_bug)(x).item(),
      torch.compile(f_ok)(x).item())
