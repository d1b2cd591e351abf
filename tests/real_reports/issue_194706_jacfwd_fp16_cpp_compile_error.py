"""https://github.com/pytorch/pytorch/issues/194706 — Inductor CPU backend emits error when
calculating gradients (filed 2026-08-25).

Thread: open, labelled oncall: cpu inductor. ``torch.compile(torch.func.jacfwd(f))`` on a float16
3x3 input fails in the C++ compile of the generated kernel; no maintainer reply yet.

Check on torch 2.13.0+cpu: eager jacfwd returns a 3x3 Jacobian; compiled raises
``InductorError: CppCompileError`` (``conflicting declaration 'auto at_Half_tmp_acc1_vec'``: two
fp16 reductions of one fused kernel declare the same vectorised accumulator). Class: a crash of
the compiler (C++ codegen) on fp16 reductions. Tool: ``crash`` on a 7-node window of the forward
graph (flip_1, three muls, a view, and two identical fp16 ``sum.dim_IntList`` of one input: one
fused kernel declares one accumulator twice); its repro fails with the same CppCompileError. The
two sums alone (without the pointwise nodes) compile; the op expected here is the fp16 sum whose
accumulator is declared twice.
No edits: the reporter's script as written.
"""
REAL_REPORT = {
    "issue": 194706, "class": "crash",
    "verdict": "crash",
    "op": "aten.sum.dim_IntList",
    "cli_args": [],
    "known_miss": None,
}
import torch

def f(x):
    return torch.sum(torch.mm(torch.mm(torch.prod(x) + x,
                                       torch.sum(x) + x),
                              torch.sum(x) + x))

x = (torch.arange(1, 10, dtype=torch.float16) / 10).reshape(3, 3)
torch.compile(torch.func.jacfwd(f))(x)
