"""Clean case: a bfloat16 transformer-style block, no planted bug.

Linear, LayerNorm, gelu and softmax attention, with weights and inputs in bfloat16. Inductor
computes bf16 pointwise chains in fp32 and rounds once, eager rounds after every op; both must be
judged close enough. ``plant()`` does nothing.
"""
import torch
from torch import nn


def plant():
    """Nothing to plant: a clean case."""


plant()

DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
PLANTED = {"config": {}}

EXPECTED = {"verdict": "clean", "op": None, "graph": None, "kind": None}


class Block(nn.Module):
    def __init__(self, width: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(c, dim=-1)
        q, k, v = (z.reshape(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        attn = torch.softmax(scores, dim=-1) @ v
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, c))
        return x + self.down(nn.functional.gelu(self.up(self.norm2(x))))


def get_model():
    torch.manual_seed(0)
    return Block().to(torch.bfloat16).eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(2, 6, 16).to(torch.bfloat16),)
