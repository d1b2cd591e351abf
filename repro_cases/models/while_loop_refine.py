"""An iterative refinement written with torch's while_loop higher-order op: four damped steps
h <- h + 0.5 * sin(h W^T + b) (a fixed-point solver's shape, as deep-equilibrium and diffusion
samplers write it). Clean: the tool must judge the while_loop node as one op (its body in fp64 for
the reference) and say clean, exit 0; our recompile must trace it with a ShapeEnv, as Dynamo does.
"""
import torch
from torch import nn
from torch._higher_order_ops import while_loop

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean"}


class Refine(nn.Module):
    def __init__(self, width: int = 16, steps: int = 4):
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
            return i + 1, h + 0.5 * torch.sin(h @ weight.t() + bias)

        _, h = while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), self.inp(x)))
        return self.out(h)


def get_model():
    torch.manual_seed(0)
    return Refine().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 16),)
