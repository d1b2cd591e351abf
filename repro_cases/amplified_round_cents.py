"""Real (no planted bug, torch 2.13 CPU): an integer cast amplifies a one-ulp rounding difference.

``torch.round(price, decimals=2)`` -> cents -> an embedding. Inductor's decomposition of
``aten.round.decimals`` multiplies by the inexact 0.01, so about a quarter of the rounded prices
are one ulp off eager's; ``(r * 100).long()`` turns some of those into a different cent, and the
embedding rows differ by O(1). Every per-op tolerance accepts the round (1 ulp), and the fp64
reference truncates *other* prices to other cents, so the fp64 rule sees nothing: the culprit is
found by eager replays with its compiled value injected (``culprit.kind: "amplified"``).
"""
import torch
from torch import nn


def plant():
    """Nothing to plant: Inductor's own behaviour on torch 2.13 CPU."""


plant()

DEVICES = ["cpu"]
PLANTED = None
# BISECT_CORPUS=all (make test's time): test_amplify names round.decimals on the same cents graph in process
SUITE = "full"

EXPECTED = {"verdict": "divergent", "op": "aten.round.decimals", "graph": "forward_0", "kind": "amplified",
            "amplifier": "aten._to_copy.default"}


class PriceFeatures(nn.Module):
    def __init__(self):
        super().__init__()
        self.cents = nn.Embedding(100, 4)

    def forward(self, price):
        rounded = torch.round(price, decimals=2)
        cents = (rounded * 100).long() % 100
        return self.cents(cents)


def get_model():
    torch.manual_seed(0)
    return PriceFeatures().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.rand(256) * 100,)
