"""https://github.com/pytorch/pytorch/issues/197091 — [inductor] `torch.ldexp` output dtype
differs from eager in both directions (int/bool x half -> float32; half x float32 -> half)
(filed 2026-09-15, torch 2.14.0 and nightly, CPU and CUDA).

Thread: open, labelled module: correctness (silent), release triage. Eager follows type promotion
of both operands; Inductor's native ``ldexp`` lowering keeps the mantissa's dtype when it is
floating and float32 otherwise; ``aot_eager`` agrees with eager.

Check on torch 2.13.0+cpu: bool x fp16 -> eager float16, compiled float32; int64 x bf16 -> eager
bfloat16, compiled float32; fp16 x fp32 -> eager float32, compiled float16. Class: a real compiler
bug (a dtype that differs is exact: no tolerance applies).
Edits: the stored thread text ends inside ``cases``; the loop over the cases (eager vs compiled,
print the dtypes) is written from the summary.
"""
REAL_REPORT = {
    "issue": 197091, "class": "real_bug",
    "verdict": "divergent",
    "op": "aten.ldexp.Tensor",
    "cli_args": [],
    "known_miss": None,
}
import torch

cases = {
    "bool  x fp16": (torch.ones(3, 4, dtype=torch.bool), torch.randn(3, 4).half()),
    "int64 x bf16": (torch.randint(1, 4, (3, 4)), torch.randn(3, 4).bfloat16()),
    "fp16  x fp32": (torch.randn(3, 4).half(), torch.randn(3, 4)),
}
for name, (a, b) in cases.items():
    eager = torch.ldexp(a, b)
    compiled = torch.compile(torch.ldexp)(a, b)
    print(name, "eager:", eager.dtype, "compiled:", compiled.dtype)
