"""A quantisation-aware training step under compiled autograd (``torch._dynamo.config.compiled_autograd
= True``): a straight-through estimator whose backward passes only positive gradients
(``relu(grad)``), as rectified STE variants do, so ``relu`` runs in the backward graphs compiled
autograd makes and not in the forward. ``--bug``: Inductor's C++ codegen turns relu(x) into x + 1
(``cpp.inject_relu_bug_TESTING_ONLY``), a config a repro carries, so the repro exits 1 with it and
0 without.

    bisect-accuracy run tests/scripts/compiled_autograd_ste.py [--bug]
"""
import argparse

import torch
import torch._dynamo
import torch._inductor.config
from torch import nn

EXPECTED = {"verdict": "divergent", "op": "aten.relu.default"}


class RoundSTE(torch.autograd.Function):
    """Round to a grid of 1/8 in the forward; the backward passes the positive part of the gradient."""

    @staticmethod
    def forward(ctx, x):
        return torch.round(x * 8) / 8

    @staticmethod
    def backward(ctx, grad):
        return torch.relu(grad)


class Model(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, 4)

    def forward(self, x):
        return self.down(torch.tanh(RoundSTE.apply(self.up(x))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bug", action="store_true")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    if args.bug:
        torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    torch._dynamo.config.compiled_autograd = True
    torch.manual_seed(0)
    model = Model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    @torch.compile
    def train_step(x):
        loss = model(x).square().mean()
        loss.backward()  # inside the compiled function: compiled autograd compiles the backward
        return loss

    for step in range(args.steps):
        optimizer.zero_grad()
        loss = train_step(torch.randn(8, 16))
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f} grad {model.up.weight.grad.abs().sum().item():.6f}")


if __name__ == "__main__":
    main()
