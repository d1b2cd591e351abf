"""A while_loop whose carried state grows: h <- 1.5 h + tanh(h W^T + b), six steps (an unrolled
solver or sampler whose activations widen step by step). The tanh reads small values on the first
iterations and values above 2 only from the fifth on (iteration 4, counting from 0). Clean: the tool must judge the while_loop
node as one op and say clean, exit 0.
"""
import torch
from torch import nn
from torch._higher_order_ops import while_loop

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean"}


class Growth(nn.Module):
    def __init__(self, width: int = 16, steps: int = 6):
        super().__init__()
        self.steps = steps
        self.inp = nn.Linear(width, width)
        self.step = nn.Linear(width, width)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        weight, bias = self.step.weight, self.step.bias

        def cond_fn(i, h):
            return i < self.steps

        def body_fn(i, h):
            return i + 1, 1.5 * h + torch.tanh(h @ weight.t() + bias)

        _, h = while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), 0.25 * self.inp(x)))
        return self.out(h)


def get_model():
    torch.manual_seed(0)
    return Growth().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 16),)
