"""https://github.com/pytorch/pytorch/issues/185337 — [inductor] CPU codegen does not preserve
explicit float32 to float16 to float32 cast semantics (filed 2026-05-27).

Thread: closed by PR #185847 (eellison, "[inductor][cpu] Preserve explicit lowp-fp round-trips
under emulate_precision_casts"): under the switch an in-register fp32 -> fp16 -> fp32 round trip
keeps its rounding on CPU, matching CUDA; "Default-config behavior is unchanged", i.e. the elision
is intended by default.

Check on torch 2.13.0+cpu: ``y`` differs from eager by up to 0.0008, ``y.sum(dim=1)`` by 0.0014;
compiled ``y`` equals the fp32 input (the fp16 rounding skipped); with
``TORCHINDUCTOR_EMULATE_PRECISION_CASTS=1`` both outputs match exactly. Class: cast elision.
Edits: the stored thread text ends after ``print("compiled_y``; that print and the two that follow
(compiled_y, the sums, their max difference) are completed from the description.
"""
REAL_REPORT = {
    "issue": 185337, "class": "cast_elision",
    "verdict": "clean",
    "op": None,
    "cli_args": [],
    "known_miss": None,
}
import torch

def fn(x):
    y = x.to(dtype=torch.float16).to(dtype=torch.float32)
    return y, y.sum(dim=1)

x = torch.arange(20, dtype=torch.float32).reshape(5, 4).t() / 7.0

compiled_fn = torch.compile(fn, backend="inductor", dynamic=False)

eager_y, eager_sum = fn(x)
compiled_y, compiled_sum = compiled_fn(x)

print("eager_y:", eager_y)
print("compiled_y:", compiled_y)
print("eager_sum:", eager_sum, "compiled_sum:", compiled_sum)
print("max diff:", (eager_y - compiled_y).abs().max().item(), (eager_sum - compiled_sum).abs().max().item())
