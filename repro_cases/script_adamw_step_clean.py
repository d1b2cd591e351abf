"""A training script whose optimizer step is compiled (``torch.compile(optimizer.step)``, foreach
AdamW, or SGD with momentum: ``--optimizer sgd``), with no bug: the twin of ``script_adamw_step_sqrt.py``. Every tensor the compiled step
writes (parameters, ``exp_avg``, ``exp_avg_sq``, ``step``) is compared with eager's and fp64's, on
copies; the program's parameters end as a plain run leaves them.

    bisect-accuracy run repro_cases/script_adamw_step_clean.py --steps 3
"""
import argparse

import torch
from torch import nn
from torch.nn import functional as F

SUITE = "full"  # run by BISECT_CORPUS=all (tests/test_state.py); the fast tests cover one step taken once
EXPECTED = {"verdict": "clean"}


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
    parser.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")  # sgd: SGD with momentum
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Model()
    if args.optimizer == "adamw":
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, foreach=True)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=True)
    step = torch.compile(optimizer.step)
    for index in range(args.steps):
        inputs, targets = torch.randn(8, 16), torch.randn(8, 4)
        loss = F.mse_loss(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        step()
        print(f"step {index} loss {loss.item():.4f}")
    print(f"up.weight sum {model.up.weight.sum().item():.8f}")


if __name__ == "__main__":
    main()
