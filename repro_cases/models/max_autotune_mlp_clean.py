"""A small MLP block compiled as a user who tunes their GEMMs writes it: ``get_model()`` returns
``torch.compile(model, mode="max-autotune")``. No bug: the twin of ``max_autotune_mlp_epilogue.py``.
Every compile the tool makes runs under the user's mode (``max_autotune`` on).
"""
import torch
from torch import nn

SUITE = "full"  # max-autotune compiles benchmark every GEMM choice: too slow for make test
EXPECTED = {"verdict": "clean"}


class MLPBlock(nn.Module):
    def __init__(self, width: int = 32, hidden: int = 64):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


def get_model():
    torch.manual_seed(0)
    return torch.compile(MLPBlock().eval(), mode="max-autotune")


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(16, 32),)
