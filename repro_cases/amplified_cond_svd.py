"""Real (no planted bug, torch 2.13 CPU): an ill-conditioned SVD amplifies a one-ulp ``atan``.

``torch.linalg.cond(torch.atan(X))`` with some rank-1 matrices (all ones): compiled ``atan(1)``
is one ulp below eager's, the SVD's smallest singular value goes from 4e-8 to 0 and ``cond``
from 3.7e7 to inf. fp64 says inf too (the exact matrix is singular), so the fp64 rule cannot
arbitrate; eager replays with atan's compiled value injected name atan, amplified by the SVD.
"""
import torch
from torch import nn


def plant():
    """Nothing to plant: Inductor's own behaviour on torch 2.13 CPU."""


plant()

SUITE = "full"  # BISECT_CORPUS=all: amplified_round_cents covers the amplification search in make test
DEVICES = ["cpu"]
PLANTED = None

EXPECTED = {"verdict": "divergent", "op": "aten.atan.default", "graph": "forward_0", "kind": "amplified",
            "amplifier": "aten._linalg_svd.default"}


class Conditioning(nn.Module):
    def forward(self, x):
        return torch.linalg.cond(torch.atan(x))


def get_model():
    return Conditioning()


def get_inputs():
    torch.manual_seed(0)
    x = torch.randn(6, 2, 2)
    x[::2] = 1.0  # rank 1
    return (x,)
