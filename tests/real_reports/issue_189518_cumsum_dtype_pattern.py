"""https://github.com/pytorch/pytorch/issues/189518 — Inductor's pointless_cumsum_replacement
drops cumsum's explicit dtype argument (filed 2026-07-10).

Thread: closed, labelled module: correctness (silent). The post-grad pattern
``pointless_cumsum_replacement`` rewrites ``cumsum(full(...))`` into an ``arange`` expression built
with the full tensor's dtype, ignoring ``dtype=``; ``pattern_matcher = False`` makes compiled match
eager. Real-world impact: DETR-family sine position embeddings crash under compile in fp16/bf16.

Check on torch 2.13.0+cpu: eager dtype torch.bfloat16, compiled torch.int64 (values 1..4 agree).
Class: a real compiler bug (a post-grad pattern; the dtype that differs is exact).
Edits: the stored thread text prints the dtypes in comments; kept as written.
"""
REAL_REPORT = {
    "issue": 189518, "class": "real_bug",
    "verdict": "divergent",
    "op": "aten.cumsum.default",
    "cli_args": [],
    "known_miss": None,
}
import torch

def f():
    ones = torch.ones((2, 4, 4), dtype=torch.bool)
    return ones.cumsum(1, dtype=torch.bfloat16)

eager = f()
compiled = torch.compile(f)()
print(eager.dtype)     # torch.bfloat16
print(compiled.dtype)  # torch.int64  <- wrong
