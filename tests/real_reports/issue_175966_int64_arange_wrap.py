"""https://github.com/pytorch/pytorch/issues/175966 — Silently incorrect results for torch.arange +
Inductor (filed 2026-02-27; open, labels pt2: ubn, PT2-Bug-Bash).

Thread: ``arange(0, 11, int64) * tensor([1e9], int64)`` compiled computes the product in 32-bit
index arithmetic and wraps past 2**31; ``aot_eager_decomp_partition`` matches eager, so the fault
is Inductor's (its generated code folds the arange into an int32 index expression).

Check on torch 2.13.0+cpu: eager and aot_eager give 0, 1e9, ..., 1e10; inductor gives
[0, 1e9, 2e9, -1294967296, -294967296, 705032704, 1705032704, -1589934592, 8e9, 9e9, 1e10]: the
CPU kernel wraps too (the last elements, in the vector tail, do not). Exact integers: the int64
product is the reference. Class: a real compiler bug.
Edit: ``device='cuda'`` -> ``device='cpu'`` for ``x`` (the bug is in shared index arithmetic).
The op: the kernel computes ``VectorizedN<int64_t,2>::arange(1000000000L*x0, 1000000000)``, the
arange's lowering (``prims.iota``) with the constant's multiply folded into its step; the multiply
alone compiles right, and with ``prims.iota`` falling back to aten the program agrees, so the tool's
window ``arange`` + ``mul`` named by the arange, with the iota lowering as the subsystem, is the
thread's diagnosis.
"""
REAL_REPORT = {
    "issue": 175966, "class": "real_bug",
    "verdict": "divergent",
    "op": "aten.arange.start",
    "cli_args": [],
    "known_miss": None,
}
import torch

def kek(x):
    return torch.arange(
        0, 11, device=x.device, dtype=torch.int64
    ) * torch.tensor([int(1e9)], dtype=torch.int64, device=x.device)

x = torch.zeros(1, device='cpu')

print(kek(x))
print(torch.compile(kek, backend="aot_eager_decomp_partition")(x))
print(torch.compile(kek, backend="inductor")(x))
