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
print) is written from the description, and sets 2 intra-op threads (bugs9: the bug needs at least
two OpenMP threads; under the corpus's ``OMP_NUM_THREADS=1`` the program matches and the case was
``clean``, which the strict xfail hid).
Mechanism (bugs9): Inductor's forward saves the conv weight channels-last; the backward, compiled
for that layout, fuses the max-pool backward (``max_pool2d_with_indices_backward`` decomposed to
``scatter_add`` into a zero buffer) with ``where``, ``add`` and ``convolution_backward``'s channels-last
input, and the fused kernel (``cpp_fused_add_convolution_backward_scatter_add_view_where_0``) never
scatters: it copies the zero buffer and adds it (the indices are not even its argument). The same
backward graph compiled with the weight contiguous is exact (0.0); with it channels-last it gives
48.9 / 43.5 / 77.0, the program's; ``max_fusion_size = 1`` makes it match. The op whose work the
compiled code drops is ``scatter_add`` (the max-pool backward), not the forward's
``max_pool2d_with_indices`` (not in the backward graph).
Named (bugs10): recaptured through compile_fx_inner, backward_1's window (where_1, where_2, view_2,
scatter_add, view_4, add_7, convolution_backward) gives exactly eager's outputs with scatter_add's
work skipped (its zero buffer passed through: max |diff| 0.0, 18.1 from eager's), so it is named by
``scatter_add`` (``culprit.dropped_work``), not by the ``convolution_backward`` whose output departs;
its repro sets the program's 2 threads (``torch.set_num_threads(2)``) and reproduces under the
corpus's ``OMP_NUM_THREADS=1``.
"""
REAL_REPORT = {
    "issue": 185509, "class": "real_bug",
    "verdict": "divergent",
    "op": "aten.scatter_add.default",
    "cli_args": [],
    "known_miss": None,
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


torch.set_num_threads(2)  # the reporter's machine had several; one thread compiles other code
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
