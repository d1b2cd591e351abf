"""Real, clean (no planted bug, torch 2.13 CPU): a loss whose gradient into the last LayerNorm cancels.

Two pre-norm MLP blocks, a final LayerNorm, ``loss = output.pow(2).mean()``. The LayerNorm's output
has mean 0 and variance ~1 per row whatever its input, so the gradient into that LayerNorm's input is
analytically ~0: what eager and compiled compute there is rounding noise of the terms it combined
(``grad_out`` times the normalised input, summed over the row). Measured at its own (tiny) scale, one
rounding reads as millions of ulps; measured where its rounding lives, it is noise. The verdict must be
``clean`` with no noise listed (issue 36).
"""
import os

import torch
from torch import nn


def plant():
    """Nothing to plant: Inductor's own behaviour on torch 2.13 CPU."""


plant()

DEVICES = ["cpu"]
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "graph": None, "kind": None, "differences": []}
WIDTH = int(os.environ.get("NOISE_WIDTH", "256"))
LOSS = os.environ.get("NOISE_LOSS", "pow2mean")


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(self.norm(x))))


class PreNormMLP(nn.Module):
    def __init__(self, width: int = WIDTH):
        super().__init__()
        self.blocks = nn.Sequential(Block(width), Block(width))
        self.final = nn.LayerNorm(width)

    def forward(self, x):
        return self.final(self.blocks(x))


def get_model():
    torch.manual_seed(0)
    return PreNormMLP().train()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(16, WIDTH),)


def loss_fn(output):
    return output.sum() if LOSS == "sum" else output.pow(2).mean()
