"""A training loop that compiles the loss function and the model separately (two torch.compile
calls, each its own graphs, forward and backward). ``--bug``: Inductor's C++ relu compiles as x + 1
(``cpp.inject_relu_bug_TESTING_ONLY``), in the model.

    bisect-accuracy run tests/scripts/separate_loss.py [--bug]
"""
import argparse

import torch
import torch._inductor.config as inductor_config
from torch import nn
from torch.nn import functional as F

EXPECTED = {"verdict": "divergent", "op": "aten.relu.default"}


class Model(nn.Module):
    def __init__(self, width: int = 16, classes: int = 5):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, classes)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def loss_fn(logits, targets):
    return F.cross_entropy(logits, targets, label_smoothing=0.1) + 1e-3 * logits.square().mean()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bug", action="store_true")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    if args.bug:
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    torch.manual_seed(0)
    model = Model()
    compiled_model, compiled_loss = torch.compile(model), torch.compile(loss_fn)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(args.steps):
        inputs, targets = torch.randn(8, 16), torch.randint(0, 5, (8,))
        loss = compiled_loss(compiled_model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
