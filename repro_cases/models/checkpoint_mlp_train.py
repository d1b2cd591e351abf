"""Activation checkpointing inside a compiled model: two residual MLP blocks, each wrapped in
torch.utils.checkpoint.checkpoint(..., use_reentrant=False), trained one step. Dynamo traces each
as a tag_activation_checkpoint HOP; AOT Autograd inlines it (the forward's ops, recomputed in the
backward). Clean: the tool must say clean, exit 0, for the forward and the backward graph.
"""
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean"}


class Block(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(torch.sin(self.up(x)))


class Net(nn.Module):
    def __init__(self, depth: int = 2):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(depth)])

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return x


def get_model():
    torch.manual_seed(0)
    return Net()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 16, requires_grad=True),)


def loss_fn(output):
    return output.pow(2).mean()
