"""A plain training script (no get_model/get_inputs) with a planted Inductor bug: relu compiles
as x + 1 (``cpp.inject_relu_bug_TESTING_ONLY``), set by the script itself.

Script mode runs it unmodified:

    bisect-accuracy run repro_cases/script_relu_bug.py --steps 3
    BISECT_ACCURACY_LEVEL=4 python repro_cases/script_relu_bug.py --steps 3
"""
import argparse

import torch
import torch._inductor.config as inductor_config
from torch import nn
from torch.nn import functional as F

PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}}

EXPECTED = {"verdict": "divergent", "op": "aten.relu.default", "graph": "forward_0", "kind": "node"}


def plant():
    """Install the bug: Inductor's C++ backend compiles relu(x) as x + 1 (idempotent)."""
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"


plant()


class Model(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, 4)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Model()
    compiled = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(args.steps):
        inputs, targets = torch.randn(8, 16), torch.randn(8, 4)
        loss = F.mse_loss(compiled(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
