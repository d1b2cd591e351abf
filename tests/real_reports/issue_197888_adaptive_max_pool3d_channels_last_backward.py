"""https://github.com/pytorch/pytorch/issues/197888 — `adaptive_max_pool3d_backward` and
`fractional_max_pool{2,3}d_backward` read a non-contiguous `indices` tensor as if it were
contiguous: silently wrong gradients, reached from `torch.compile` with channels_last_3d
(filed 2026-09-21, torch 2.14.0 and nightly).

Thread: open, labelled high priority, module: correctness (silent), module: memory format. The CPU
kernel makes ``grad_output`` contiguous but reads ``indices`` through its raw data pointer; eager
autograd always hands it contiguous indices, Inductor lays the saved indices out in the input's
memory format, so its fallback call to the same kernel scatters the gradient to wrong positions.

Check on torch 2.13.0+cpu: eager vs aot_eager max |diff| 0; eager vs Inductor 3.0 (the pooled
values are a permutation, so the fp64 eager gradient is eager's exactly). Class: a real bug of the
compiled program; the wrong values come from ``aten.adaptive_max_pool3d_backward`` fed the layout
Inductor chose.
Tool: divergent, culprit kind ``saved_layout`` (the backward op, with the saved value's two layouts);
its repro runs that op eagerly on both layouts (issue 37, helper bugs7).
Edits: the stored thread text ends at the input's ``torch.randperm(1 * 4 * 4 * 6``; the input's
shape (1, 4, 4, 6, 10) as channels_last_3d, the ``grad_of`` helper and the print are written from
the summary.
"""
REAL_REPORT = {
    "issue": 197888, "class": "real_bug",
    "verdict": "divergent",
    "op": "aten.adaptive_max_pool3d_backward.default",
    "cli_args": [],
    "known_miss": None,
}
import torch, torch.nn.functional as F

torch.manual_seed(0)
f = lambda t: F.adaptive_max_pool3d(t, (2, 3, 5))
x = torch.randperm(1 * 4 * 4 * 6 * 10).float().reshape(1, 4, 4, 6, 10).to(memory_format=torch.channels_last_3d)

def grad_of(f, x, backend=None):
    x = x.detach().clone().requires_grad_()
    (f if backend is None else torch.compile(f, backend=backend))(x).sum().backward()
    return x.grad

eager, aot, inductor = grad_of(f, x), grad_of(f, x, "aot_eager"), grad_of(f, x, "inductor")
print("eager vs aot_eager:", (eager - aot).abs().max().item())
print("eager vs inductor :", (eager - inductor).abs().max().item())
