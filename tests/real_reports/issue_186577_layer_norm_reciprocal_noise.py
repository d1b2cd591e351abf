"""https://github.com/pytorch/pytorch/issues/186577 — `torch.compile` produces wrong results when
`F.layer_norm` is fused with `reciprocal`/`rsqrt` epilogue (filed 2026-06-08, CUDA).

Thread: closed by PR #186582 (jansel, "Fix persistent Welford layer norm numerics"): Triton's
persistent reduction used a two-pass var/mean instead of Welford; "the resulting small layer norm
differences can be amplified heavily by reciprocal- and rsqrt-like epilogues near zero". After the
fix the PR still measures eager vs inductor max_abs 0.09 (max_rel 2.7e-05) on the direct repro:
amplification, not a wrong kernel. The Triton reduction is CUDA-only; on CPU what remains is that
amplification.

Check on torch 2.13.0+cpu: max |eager - compiled| 0.063; against an fp64 run of the same function
eager's max error is 0.056, compiled's 0.047 (``1/|ln(x)|`` near an output of 0 turns one fp32 ulp
of the layer norm into ~0.05 absolute). Class: noise (ill-conditioned output), not a bug.
Edits: ``device='cuda'`` -> CPU (the Triton path is CUDA-only; the CPU path is the shared
decomposition + C++ reduction).
"""
REAL_REPORT = {
    "issue": 186577, "class": "noise",
    "verdict": "clean",
    "op": None,
    "cli_args": [],
    "known_miss": None,
}
import torch
import torch.nn.functional as F

x = torch.randn(64, 128)

def fn(x):
    return torch.reciprocal(torch.abs(F.layer_norm(x, [128])) + 1e-6)

eager = fn(x)

torch._dynamo.reset()
aot = torch.compile(fn, backend='aot_eager')(x)

torch._dynamo.reset()
compiled = torch.compile(fn, backend='inductor')(x)

print(f"eager vs aot_eager: {(eager - aot).abs().max().item():.4e}")    # 0.0000e+00
print(f"eager vs inductor:  {(eager - compiled).abs().max().item():.4e}")  # ~9e-01
