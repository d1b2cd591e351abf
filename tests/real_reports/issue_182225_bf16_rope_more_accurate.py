"""https://github.com/pytorch/pytorch/issues/182225 — torch.compile mismatch for bfloat16
RoPE-style computation involving rotate_half and broadcasted sin/cos (filed 2026-05-02, CPU
nightly).

Thread: closed, labelled module: bfloat16, module: cpu. The same pattern was answered upstream in
#159239 (eellison: "Compared to the fp32 results, compiled gives both a smaller RMSE and smaller
maximum error"; ``emulate_precision_casts`` only for eager-like numerics) and #183122: eager
rounds every bf16 intermediate (q*cos, rotate_half(q)*sin) while Inductor fuses the expression
and rounds once.

Check on torch 2.13.0+cpu: fp32 matches exactly; bf16 q: max |eager - compiled| 0.0156; against
an fp64 run of the same bf16 inputs eager's error is max 0.0150 / RMS 0.0030, compiled's
0.0101 / 0.0020 (k: 0.0204 / 0.0037 vs 0.0154 / 0.0027). Class: compiled more accurate, not a bug.
Edits: the stored thread text ends inside the comparison loop (``zip(["q", "k"],``); the loop
body (max difference and ``torch.allclose`` per output, print) and the calls of ``run`` for fp32
and bf16 are written from the description.
"""
REAL_REPORT = {
    "issue": 182225, "class": "more_accurate",
    "verdict": "clean",
    "op": None,
    "cli_args": [],
    "known_miss": None,
}
import torch

print("torch:", torch.__version__)

def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

def rope(q, k, cos, sin):
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    q_out = (q * cos) + (rotate_half(q) * sin)
    k_out = (k * cos) + (rotate_half(k) * sin)
    return q_out, k_out

def run(dtype):
    torch._dynamo.reset()
    torch.manual_seed(123)

    q = torch.randn(1, 2, 7, 16, dtype=dtype)
    k = torch.randn(1, 1, 7, 16, dtype=dtype)
    cos = torch.randn(1, 7, 16, dtype=dtype)
    sin = torch.randn(1, 7, 16, dtype=dtype)

    eager = rope(q, k, cos, sin)
    compiled = torch.compile(
        rope,
        backend="inductor",
        fullgraph=True,
        dynamic=True,
    )(q, k, cos, sin)

    print(f"\n=== {dtype} ===")

    failures = []
    for name, e, c in zip(["q", "k"], eager, compiled):
        diff = (e.float() - c.float()).abs().max().item()
        ok = torch.allclose(e.float(), c.float())
        print(name, "max_diff =", diff, "allclose =", ok)
        if not ok:
            failures.append(name)
    return failures

run(torch.float32)
run(torch.bfloat16)
