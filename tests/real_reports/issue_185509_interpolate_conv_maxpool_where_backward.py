"""https://github.com/pytorch/pytorch/issues/185509 — [inductor] Silent incorrect gradients with
interpolate, conv2d, max_pool2d and torch.where (filed 2026-05-28).

Thread: closed, labelled module: correctness (silent), module: inductor, triaged. The forward
matches eager (max diff ~1.9e-06) while the gradients for input, weight and bias differ by up to
77.0.

Check on torch 2.13.0+cpu: forward max diff 1.9e-06; gradient max diffs 48.9 (x), 43.5 (weight),
77.0 (bias); eager's gradients agree with an fp64 eager run to ~1e-5. Class: a real bug of the
compiled program's backward (interpolate -> slice -> conv2d -> max_pool2d -> where).
Edits: the stored thread text ends after ``fn``; the driver (seeded inputs of shapes x (2,3,6,8),
weight (4,3,3,3), bias (4), the mask from ``make_mask``, eager and compiled backward on copies,
print) is written from the description.
"""
REAL_REPORT = {
    "issue": 185509, "class": "real_bug",
    "verdict": "divergent",
    "op": "aten.max_pool2d_with_indices.default",
    "cli_args": [],
    "known_miss": ("not_reproducible, cause backward_together: forward and backward graphs each match when "
                   "compiled alone. Not the saved offsets (bugs7): the real compile's backward graph, as "
                   "compile_fx_inner receives it (after Inductor's decompositions and partition: the int8 offsets "
                   "saved, offsets_to_indices + scatter_add in the backward), compiled alone on its own eager saved "
                   "values, gives the program's wrong gradients (48.9 / 43.5 / 77.0), while every node of it "
                   "matches alone; the engine on that graph names the window where_1, where_2, view_2, "
                   "scatter_add, view_4, add_7, convolution_backward (named by convolution_backward, 45 compiles). "
                   "Removing Inductor's max_pool2d_with_indices(_backward) decompositions does not fix the "
                   "program. Our capture (AOT without decompositions) never compiles that graph: recapturing "
                   "through Inductor's own entry points (forward and backward) is the missing step"),
}
import torch
import torch.nn.functional as F


def inner(x, weight, bias):
    y = F.interpolate(
        x,
        scale_factor=(1.5, 1.25),
        mode="bilinear",
        align_corners=False,
    )
    y = y[:, :, 1:7, 1:8]

    conv = F.conv2d(y, weight, bias, padding=1)
    pool = F.max_pool2d(conv, kernel_size=3, stride=1, padding=1)
    threshold = pool.mean(dim=(2, 3), keepdim=True)
    return conv, pool, threshold


def make_mask(x, weight, bias):
    conv, _, threshold = inner(x, weight, bias)
    return conv > threshold


def fn(x, weight, bias, mask):
    conv, pool, _ = inner(x, weight, bias)

    return torch.where(mask, conv, pool)


torch.manual_seed(0)
x = torch.randn(2, 3, 6, 8)
weight = torch.randn(4, 3, 3, 3)
bias = torch.randn(4)
mask = make_mask(x, weight, bias)


def run(f):
    leaves = [t.detach().clone().requires_grad_() for t in (x, weight, bias)]
    out = f(*leaves, mask)
    out.sum().backward()
    return out, [t.grad for t in leaves]


out_eager, grads_eager = run(fn)
out_compiled, grads_compiled = run(torch.compile(fn, backend="inductor"))
print("forward max diff:", (out_eager - out_compiled).abs().max().item())
for name, e, c in zip(("x", "weight", "bias"), grads_eager, grads_compiled):
    print(name, "grad max diff:", (e - c).abs().max().item())
