"""A tiny model for the environment comparison tests: linear -> tanh -> silu -> exp(-|h|) -> linear.
Each op is where one planted environment change lands (see plant_*.py)."""
import torch
import torch.nn.functional as F
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(8, 16)
        self.last = nn.Linear(16, 4)

    def forward(self, x):
        h = torch.tanh(self.first(x))
        h = F.silu(h)
        return self.last(torch.exp(-h.abs()))


def get_model():
    torch.manual_seed(0)
    return Model().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(4, 8),)
