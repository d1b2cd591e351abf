"""Clean: dynamic shapes. A small transformer-ish token mixer whose input is marked dynamic
(torch._dynamo.mark_dynamic on batch and sequence dims), and get_batches() with varying batch
sizes and sequence lengths, so the compiled graphs are symbolic.
"""
import torch
from torch import nn

PLANTED = None
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


class Mixer(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.mix = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, 5)

    def forward(self, x):
        x = x + torch.softmax(self.mix(self.norm1(x)), dim=1) * x
        x = x + self.mlp(self.norm2(x))
        return self.head(x.mean(1))


def get_model():
    torch.manual_seed(0)
    return Mixer().eval()


def _batch(size, length, seed):
    x = torch.randn(size, length, 32, generator=torch.Generator().manual_seed(seed))
    torch._dynamo.mark_dynamic(x, 0)
    torch._dynamo.mark_dynamic(x, 1)
    return (x,)


def get_inputs():
    return _batch(3, 7, 1)


def get_batches():
    return [_batch(size, length, seed) for seed, (size, length) in enumerate([(3, 7), (5, 9), (2, 11)])]
