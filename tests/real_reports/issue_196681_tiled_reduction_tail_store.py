"""https://github.com/pytorch/pytorch/issues/196681 — [inductor] CPU 2D-tiled reduction stores a
full-width vector in the tail block: heap overflow (SIGABRT) or silent wrong results (filed
2026-09-11; open, labels module: crash, module: correctness (silent), module: vectorization).

Thread: the reporter's diagnosis: for a reduction whose tiled dimension (66) is not a multiple of
the vector width, the tail block reduces with ``sum_masked_reduce(..., tail)`` but writes back with
a full-width vector store, past the end of the output buffer: heap corruption (``SIGABRT``) or, when
it does not crash, values overwritten in the next row.

Check on torch 2.13.0+cpu: the script dies at the compiled call (``free(): invalid pointer``,
SIGABRT, exit 134; under the tool once ``malloc_consolidate(): invalid chunk size``); eager runs
and its result is finite (an fp64 reference has nothing to arbitrate: the compiled side never
returns). Class: crash, in the reduction Inductor makes of the ``bmm`` (the matmul of the padded
tensors). No edits.

The abort is not certain (heap layout: 1 plain run of 2 aborted, the other printed a max abs diff of
20.2); under glibc's heap checker it is, 3 runs of 3. The tool's isolated children and the crash
repro's child run so: a minimal window of 8 nodes (``mul_2`` ... two ``constant_pad_nd`` ...
``bmm``), named by its last node, the ``bmm`` whose reduction the rest fuse into; its repro aborts.
"""
REAL_REPORT = {
    "issue": 196681, "class": "crash",
    "verdict": "crash",
    "op": "aten.bmm.default",
    "cli_args": [],
    "known_miss": None,
}
import torch
import torch.nn.functional as F

def f(x):
    v = (x * 0.5) * (torch.erf(x * 0.7071067811865476) + 1)   # GELU, x is channels_last
    a = v.permute(3, 2, 1, 0)                                  # (66, 66, 8, 1)
    p = F.pad(a, (0, 0, 0, 58), value=0.5)                     # (66, 66, 66, 1)
    q = F.pad(v, (0, 0, 0, 0, 0, 58), value=0.5)               # (1, 66, 66, 66)
    return torch.matmul(q, p)                                  # (66, 66, 66, 1)

torch.manual_seed(0)
x = torch.randn(1, 8, 66, 66).contiguous(memory_format=torch.channels_last)
ref = f(x)
out = torch.compile(f)(x)
print("max abs diff:", (out - ref).abs().max().item())
