"""https://github.com/pytorch/pytorch/issues/185517 — [Inductor][CPU][bf16] Gradient mismatch in
F.margin_ranking_loss backward with bfloat16 tensors and float scalar (filed 2026-05-28).

Thread: closed, labelled high priority, module: correctness (silent), module: decompositions. At
the hinge's boundary (``-(x1 - x2) + margin`` with a Python-float margin 1.7 and bf16 inputs
1.703125) eager rounds the hinge to bf16 and keeps it positive, so the gradient flows; Inductor
computes the hinge in fp32, where it is negative, so the saved mask ``hinge > 0`` is False and the
gradient is zero. Fixed upstream after 2.13 (CPU-only: on CUDA both give zero).

Check on torch 2.13.0+cpu: eager input1.grad = [-0.5, -0.5], compiled [-0., -0.]. In fp64 the
hinge is -0.003125 < 0, so compiled's forward mask is the one closer to fp64, yet the gradient the
program gets differs in every element. Class: a real bug of the compiled program (the departure is
a saved mask, the hinge's ``clamp_min``/``gt``, flipped by fp32 vs bf16 rounding).
Mechanism (own check): eager rounds the scalar margin into the bf16 add, -1.703125 + bf16(1.7)
= 0, and clamp_min's backward passes the gradient at the boundary; compiled adds 1.7 in fp32.
Tool: before, ``clean`` with nothing listed (0 compiles: the call matched, so the engine never ran).
Now ``clean`` with the hinge listed under ``differences`` (compiled closer to fp64: by policy listed,
never divergent): the saved ``clone`` of ``aten.add.Scalar`` (the captured op; the margin is a
Python scalar), with the gradient it flips through the backward's ``ge`` (script mode's departure
look: a training call whose gradients match fp64 yet differ from eager's materially, issue 37).
Edits: the stored thread text ends after ``fn``; the driver (eager backward, compiled backward on
copies, print) is written from the description.
"""
REAL_REPORT = {
    "issue": 185517, "class": "real_bug",
    "verdict": "clean",
    "op": "aten.add.Scalar",
    "cli_args": [],
    "known_miss": None,
}
import torch

def test_margin_ranking_loss_boundary():
    x_val = 1.703125
    margin_val = 1.7

    input1 = torch.tensor([x_val, x_val], dtype=torch.bfloat16, requires_grad=True)
    input2 = torch.tensor([0.0, 0.0], dtype=torch.bfloat16, requires_grad=True)
    target = torch.tensor([1.0, 1.0], dtype=torch.bfloat16)

    def fn(x, y, t):
        return torch.nn.functional.margin_ranking_loss(x, y, t, margin=margin_val, reduction='mean')

    loss = fn(input1, input2, target)
    loss.backward()
    eager_grad = input1.grad.clone()

    i1 = input1.detach().clone().requires_grad_(True)
    i2 = input2.detach().clone().requires_grad_(True)
    compiled_loss = torch.compile(fn, backend="inductor")(i1, i2, target)
    compiled_loss.backward()
    print("eager loss", loss.item(), "grad", eager_grad)
    print("compiled loss", compiled_loss.item(), "grad", i1.grad)

test_margin_ranking_loss_boundary()
