"""Real (no planted bug): a bf16 ranking hinge that compiled keeps in fp32 flips in the backward.

``margin_ranking_loss(high, low, 1, margin=1.7)`` in bf16 (pytorch#185517's pattern): eager rounds
each step of ``-(high - low) + 1.7`` to bf16; Inductor fuses them in fp32, closer to fp64. Where a
pair sits near the hinge, the value saved for the backward changes sign, so the backward's
``ge(saved, 0)`` selects differently and the gradients of ``high`` and ``low`` differ by 1.0 in
10 of 64 elements. By the fp64 rule compiled is right (``clean``, exit 0), but the user sees
different gradients: ``differences`` lists the forward's ``add`` and, under ``backward``, the
gradient it changes and the comparison that flips it (one eager replay of the backward graph with
the compiled forward's saved value, no compile). No Inductor setting makes compiled follow eager
here (``emulate_precision_casts`` is checked and does not).
"""
import torch
from torch import nn


def plant():
    """Nothing to plant: Inductor's own behaviour."""


plant()

# make test runs the same mechanism on inputs that require grad (margin_ranking_inputs_grad.py,
# the same listing and backward consequence, ~half the time): this parameter twin under BISECT_CORPUS=all.
SUITE = "full"
DEVICES = ["cpu"]
PLANTED = None

EXPECTED = {"verdict": "clean", "op": None, "graph": None, "kind": None, "differences": ["aten.add.Scalar", "aten.sum.default"],
            "follows_eager": False,
            "backward": {"op": "aten.add.Scalar", "graph": "backward_0", "gradient_of": "self.high", "amplifier": "aten.ge.Scalar"}}


class Ranker(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        low = torch.randn(64)
        self.low = nn.Parameter(low.to(torch.bfloat16))
        # the preferred items score about `margin` above the others: the hinge decides per pair
        self.high = nn.Parameter((low + 1.7 + 0.02 * torch.randn(64)).to(torch.bfloat16))

    def forward(self, scale):
        return nn.functional.margin_ranking_loss(self.high * scale, self.low * scale, torch.ones_like(self.low),
                                                 margin=1.7, reduction="sum")


def get_model():
    return Ranker()


def get_inputs():
    return (torch.ones(64, dtype=torch.bfloat16),)


def loss_fn(output):
    return output
