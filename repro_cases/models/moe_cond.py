"""A mixture-of-experts layer routed with torch.cond: a gate scores the batch and the data picks
the expert (a smooth MLP, or one that reads sin of its input). Clean: the tool must judge the
cond node as one op (its branches in fp64 for the reference) and say clean, exit 0.
"""
import torch
from torch import nn

DEVICES = ["cpu"]
SUITE = "ci"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean"}


class Expert(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class MoE(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.gate = nn.Linear(width, 1)
        self.smooth = Expert(width)
        self.wave = Expert(width)

    def forward(self, x):
        score = self.gate(x).mean()

        def wave(h):
            return self.wave(torch.sin(h))

        def smooth(h):
            return self.smooth(h)

        return torch.cond(score < 0, wave, smooth, (x,)) + x


def get_model():
    torch.manual_seed(0)
    return MoE().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 16) + 0.5,)
