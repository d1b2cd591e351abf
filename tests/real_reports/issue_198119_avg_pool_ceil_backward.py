"""https://github.com/pytorch/pytorch/issues/198119 — [inductor] `avg_pool1d/2d` backward with
`ceil_mode=True` divides the overhanging last window by the full kernel size, so the compiled
gradient is wrong where eager and `aot_eager` agree (filed 2026-09-22, torch 2.14.0 and nightly,
CPU and CUDA).

Thread: open, labelled module: correctness (silent), module: pooling. The reporter traces it to the
``avg_pool2d_backward`` lowering, which uses ``scale = kH * kW`` whenever ``count_include_pad`` is
set instead of the window clipped to the padded input, as the eager kernel and the forward lowering
do. No maintainer reply yet.

Check on torch 2.13.0+cpu: for a length-6 input, kernel 3, stride 2, ceil mode, eager and
aot_eager give the last two elements 0.8333 / 0.5000, Inductor 0.6667 / 0.3333 (the fp64 eager
gradient equals eager's: 1/2 is exact). 2-D: 11 of 36 gradient elements differ by up to 0.25.
Class: a real compiler bug in the ``avg_pool2d_backward`` lowering (1-D pooling is 2-D inside).
Edits: the stored thread text ends after ``grad_of``; the input (a last window covering two of
its three positions, as the summary describes) and the prints are written from the summary.
"""
REAL_REPORT = {
    "issue": 198119, "class": "real_bug",
    "verdict": "divergent",
    "op": "aten.avg_pool2d_backward.default",
    "cli_args": [],
    "known_miss": None,
}
import torch, torch.nn.functional as F

def grad_of(f, x, backend=None):
    x = x.detach().clone().requires_grad_()
    (f if backend is None else torch.compile(f, backend=backend))(x).sum().backward()
    return x.grad

x = torch.arange(6.).reshape(1, 1, 6)
f = lambda t: F.avg_pool1d(t, 3, 2, ceil_mode=True)
print("eager    ", grad_of(f, x))
print("aot_eager", grad_of(f, x, "aot_eager"))
print("inductor ", grad_of(f, x, "inductor"))

x2 = torch.arange(36.).reshape(1, 1, 6, 6)
f2 = lambda t: F.avg_pool2d(t, 3, 2, ceil_mode=True)
print("2-D max |eager - inductor|:", (grad_of(f2, x2) - grad_of(f2, x2, "inductor")).abs().max().item())
