"""https://github.com/pytorch/pytorch/issues/185472 — [Inductor] `F.hardtanh` compiled backward
silently drops gradient at bf16 boundary values (filed 2026-05-28, CUDA).

Thread: closed, labelled module: bfloat16, module: decompositions, module: edge cases. For
x = 0.69921875 (bf16(0.7)) and max_val=0.7 the compiled backward zeroed the gradient on CUDA.

Check on torch 2.13.0+cpu: eager grad [1.], compiled grad [1.] (the fp64 gradient is 1: 0.69921875
< 0.7). Class: clean control (the CUDA report's boundary does not flip on CPU); the tool must say
clean.
Edits: ``device='cuda'`` -> CPU (both tensors).
"""
REAL_REPORT = {
    "issue": 185472, "class": "clean_control",
    "verdict": "clean",
    "op": None,
    "cli_args": [],
    "known_miss": None,
}
import torch
import torch.nn.functional as F

# bf16(0.7) = 0.69921875 (bf16 rounds 0.7 down)
x = torch.tensor([0.69921875], dtype=torch.bfloat16, requires_grad=True)

# Eager: gradient passes through (value is within bounds)
F.hardtanh(x, min_val=-0.7, max_val=0.7).backward()
print(f"eager grad:    {x.grad}")  # tensor([1.], ...) ← correct

# Compiled: gradient is zeroed
x2 = torch.tensor([0.69921875], dtype=torch.bfloat16, requires_grad=True)
torch._dynamo.reset()
torch.compile(lambda y: F.hardtanh(y, min_val=-0.7, max_val=0.7))(x2).backward()
print(f"compiled grad: {x2.grad}")  # tensor([0.], ...) ← WRONG
