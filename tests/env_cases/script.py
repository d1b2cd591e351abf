"""A plain script for the environment comparison tests (script mode): one small compiled
function, tanh then a multiply by a graph constant (a get_attr tensor AOT Autograd lifts).
It appends one line to the file named by its first argument, so a test can count its runs."""
import sys

import torch


def step(x):
    return torch.tanh(x) * torch.tensor([1.0, 2.0, 3.0, 4.0])


if __name__ == "__main__":
    torch.manual_seed(0)
    print(torch.compile(step)(torch.randn(3, 4)).sum().item())
    if len(sys.argv) > 1:
        with open(sys.argv[1], "a") as runs:
            runs.write("ran\n")
