"""A plain training script (dropout included) that Inductor compiles correctly.

Script mode must leave it exactly as it is: the same stdout, byte for byte, as ``python
script_clean.py`` (the compiled results and the random stream are the program's own), and its own
exit status (``--exit-code N``).
"""
import argparse
import sys

import torch
from torch import nn
from torch.nn import functional as F

PLANTED = {"config": {}}

EXPECTED = {"verdict": "clean", "op": None}


def plant():
    """No bug."""


class Model(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.dropout = nn.Dropout(0.25)
        self.down = nn.Linear(2 * width, 4)

    def forward(self, x):
        return self.down(self.dropout(torch.tanh(self.up(x))))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--exit-code", type=int, default=0)
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
        print(f"step {step} loss {loss.item():.8f} draw {torch.rand(()).item():.8f}")
    return args.exit_code


if __name__ == "__main__":
    sys.exit(main())
