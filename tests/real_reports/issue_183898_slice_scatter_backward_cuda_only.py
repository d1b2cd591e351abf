"""https://github.com/pytorch/pytorch/issues/183898 — torch.compile produces wrong gradient for
slice_scatter backward on CUDA (filed 2026-05-15).

Thread: closed, labelled module: correctness (silent), module: cuda, module: inductor. On CUDA the
compiled gradient of ``x`` is 1 everywhere, including the overwritten slice; the report is
CUDA-only (the script exits 2 without CUDA).

Check on torch 2.13.0+cpu: eager and compiled x.grad are both [1, 0, 0, 0, 1, 1] (exact, as is the
fp64 gradient). Class: clean control: a reported gradient bug whose shared code (decomposition,
backward formula) is right on CPU; the tool must say clean.
Edits: ``device="cuda"`` -> CPU; the CUDA-availability exit and ``torch.cuda.synchronize()`` dropped;
the final ``SystemExit(0/1)`` (the reporter's "bug present" signal) replaced by a print.
"""
REAL_REPORT = {
    "issue": 183898, "class": "clean_control",
    "verdict": "clean",
    "op": None,
    "cli_args": [],
    "known_miss": None,
}
import torch

def f(x, y):
    return torch.slice_scatter(x, y, dim=0, start=1, end=4).sum()

x = torch.tensor(
    [2.0, 4.0, 6.0, 8.0, 10.0, 12.0],
    requires_grad=True,
)
y = torch.tensor(
    [30.0, 40.0, 50.0],
    requires_grad=True,
)

f(x, y).backward()
eager_grad = x.grad.detach().cpu()

x2 = x.detach().clone().requires_grad_(True)
y2 = y.detach().clone().requires_grad_(True)

compiled = torch.compile(f, backend="inductor")
compiled(x2, y2).backward()

compiled_grad = x2.grad.detach().cpu()

print("x:", x.detach().cpu())
print("y:", y.detach().cpu())
print("eager_grad:", eager_grad)
print("compiled_grad:", compiled_grad)
print("equal:", torch.equal(eager_grad, compiled_grad))
