"""Clean: a model whose forward has graph breaks: a data-dependent ``.item()`` (a running
max for normalisation) and a ``print``, so Dynamo captures three graphs.
"""
import torch
from torch import nn

PLANTED = None
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


class Normalised(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, width), nn.GELU(), nn.Linear(width, width))
        self.decoder = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 4))
        self.calls = 0

    def forward(self, x):
        h = self.encoder(x)
        scale = h.abs().max().item()  # graph break (a Python float)
        h = h / (scale + 1e-3)
        print(f"[model] scale={scale:.3f}")  # graph break
        return self.decoder(h)


def get_model():
    torch.manual_seed(0)
    return Normalised().eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(4, 16, generator=generator),)
