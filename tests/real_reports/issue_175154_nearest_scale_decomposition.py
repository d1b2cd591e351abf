"""https://github.com/pytorch/pytorch/issues/175154 — [inductor/aot_eager] interpolate under
torch.compile produces incorrect result when mode is ``nearest`` (filed 2026-02-17 against
2.11.0.dev CPU; open, labels high priority, module: decompositions, PT2-Bug-Bash).

Thread: ``interpolate([[1, 2]], scale_factor=1.3, mode='nearest')`` gives [1, 2] in eager and
[1, 1] under ``aot_eager`` and ``inductor`` (not under ``eager``): the decomposition computes the
source index as ``floor(i / 1.3)``-style float math where the eager kernel uses the identity for a
dimension whose size does not change (2 * 1.3 -> 2).

Check on torch 2.13.0+cpu: eager [[1., 2.]], aot_eager [[1., 1.]] (float64 input: eager is the
reference); the script's ``assert_close`` fails. The user's backend is ``aot_eager``: the fault
is in the decomposition Inductor shares. Class: a real compiler bug. No edits.
"""
REAL_REPORT = {
    "issue": 175154, "class": "real_bug",
    "verdict": "divergent",
    "op": "aten.upsample_nearest2d.vec",
    "cli_args": [],
    "known_miss": None,
}
import torch

def fn(x):
    x = torch.nn.functional.interpolate(x, scale_factor=1.3, mode='nearest')
    return x
x1 = torch.tensor([[[[1.0, 2.0]]]], dtype=torch.float64)
x2 = torch.tensor([[[[1.0, 2.0]]]], dtype=torch.float64)

cfunc = torch.compile(fn, backend='aot_eager')
out1 = fn(x1)
print(out1)
'''
tensor([[[[1., 2.]]]], dtype=torch.float64)
'''
out2 = cfunc(x2)
print(out2)
'''
tensor([[[[1., 1.]]]], dtype=torch.float64)
'''

torch.testing.assert_close(out1, out2, equal_nan=True)
