"""https://github.com/pytorch/pytorch/issues/186799 — `torch.compile` silently produces wrong
gradient for `atan2(x, y).amin(dim)` on float32 (filed 2026-06-09 against
2.13.0.dev20260608+cpu).

Thread: open, labelled module: autograd, oncall: cpu inductor, triaged. Forward matches exactly;
``aot_eager`` is right; under Inductor the gradient at an argmin position is dropped to 0.0 / -0.0.
A later comment hits the same with ``.amax`` in fp16 on CUDA (not reproduced on CPU here).

Check on torch 2.13.0+cpu: eager x.grad[2] = -0.136625, compiled -0.0 (the fp64 eager gradient
agrees with eager: -0.136625); every other element agrees. Class: a real compiler bug in the
backward of ``amin`` (the forward is right, the gradient is routed to no element).
Mechanism (own check): compiled ``atan2`` differs from eager's by 1 ulp at x[0, 2] (the argmin);
the forward's fused amin matches eager, the saved atan2 does not, and the backward compares them
with ``eq``. Why our capture alone never saw it (bugs9): Inductor's partition saves ``amin`` and
recomputes ``atan2`` in the backward, so the forward's fused reduction and the backward's pointwise
kernel each compute ``atan2`` and round one element differently (our plain capture saves ``atan2``,
and its compiled forward is self-consistent: ``amin == amin(atan2)`` bitwise). The op whose two
roundings disagree is ``atan2``. Tool: ``divergent`` ``aten.atan2.default`` in ``backward_1``, the
graphs recaptured through ``compile_fx_inner`` (amplified by ``eq``), repro reproduces.
No edits: the reporter's script as written.
"""
REAL_REPORT = {
    "issue": 186799, "class": "real_bug",
    "verdict": "divergent",
    "op": "aten.atan2.default",
    "cli_args": [],
    "known_miss": None,
}
import torch

torch.manual_seed(0)
x_init = torch.randn(2, 3)
y = torch.randn(2, 3)

def fn(x, y):
    return torch.atan2(x, y).amin(dim=-1)

x_e = x_init.detach().clone().requires_grad_(True)
fn(x_e, y).sum().backward()

x_c = x_init.detach().clone().requires_grad_(True)
torch.compile(fn)(x_c, y).sum().backward()

print("eager grad   :", x_e.grad.flatten().tolist())
print("compiled grad:", x_c.grad.flatten().tolist())
print("max diff:", (x_e.grad - x_c.grad).abs().max().item())
