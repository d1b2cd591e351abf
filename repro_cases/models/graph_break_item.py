"""Clean: a model with Dynamo graph breaks: a print and a data-dependent .item() branch between two
compiled regions (GELU MLP, LayerNorm), eval.

The printed mean of a LayerNorm output cancels to ~0: compiled and eager differ there by one
rounding of its terms (1e-8). Measured at the scale of the ~0 result that read as 1.4e7 ulps, a
false `divergent`; a sum or mean is now judged at the scale of what it adds up."""
import torch
from torch import nn

PLANTED = None
DEVICES = ["cpu", "cuda"]
SUITE = "ci"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32))
        self.b = nn.Sequential(nn.Linear(32, 32), nn.SiLU(), nn.Linear(32, 8))
        self.c = nn.Linear(32, 8)

    def forward(self, x):
        h = self.a(x)
        print("mean", round(h.mean().item(), 3))
        if h.abs().max().item() > 1.0:
            h = h * 0.5
        return self.b(h) + self.c(h).sigmoid()


def get_model():
    torch.manual_seed(0)
    return Model().eval()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    return (torch.randn(4, 16, generator=g),)
