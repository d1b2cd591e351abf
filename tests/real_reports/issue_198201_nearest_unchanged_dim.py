"""https://github.com/pytorch/pytorch/issues/198201 — ``torch.compile`` (inductor) —
``interpolate(mode='nearest')`` resamples a spatial dimension whose size is unchanged, disagreeing
with eager (filed 2026-09-22; open, labels module: correctness (silent), module: interpolation).

Thread: the reporter's diagnosis: with ``scale_factor=(1.3, 1.5)`` the height stays 3 (floor(3 *
1.3) = 3); eager treats an unchanged dimension as the identity (source row = destination row),
the compiled lowering still applies the scale 1/1.3 and picks rows [0, 0, 1].

Check on torch 2.13.0+cpu: eager rows [0, 1, 2], compiled rows [0, 0, 1]: same shape, different
values (the fp64 program picks eager's rows: index math is exact). Class: a real compiler bug in
the nearest-upsample index math.
No edits (the reporter's comment on the last line is cut where the thread's excerpt ends).
"""
REAL_REPORT = {
    "issue": 198201, "class": "real_bug",
    "verdict": "divergent",
    "op": "aten.upsample_nearest2d.vec",
    "cli_args": [],
    "known_miss": None,
}
import torch
import torch.nn.functional as F

# H: 3 -> floor(3*1.3)=3 (UNCHANGED) with a non-unit scale;  W: 4 -> floor(4*1.5)=6 (changed)
x = torch.arange(12, dtype=torch.float32).reshape(1, 1, 3, 4)   # CPU, float32

def fn(z):
    return F.interpolate(z, scale_factor=(1.3, 1.5), mode='nearest')

e = fn(x)
c = torch.compile(fn, backend="inductor")(x)

# height source-row mapping (first column of each output row):
print([int(e[0, 0, i, 0]) // 4 for i in range(3)])   # eager:    [0, 1, 2]  (unchanged dim -> identity)
print([int(c[0, 0, i, 0]) // 4 for i in range(3)])   # compiled: [0, 0,
