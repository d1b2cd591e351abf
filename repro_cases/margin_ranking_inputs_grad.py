"""Real (no planted bug): pytorch#185517 as the user wrote it: ``margin_ranking_loss`` inside the
model, on bf16 inputs that require grad (no parameters).

Eager rounds each step of ``-(high - low) + 1.7`` to bf16; Inductor fuses them in fp32, closer to
fp64. The forward saves that value, the backward's ``ge(saved, 0)`` flips near the hinge, and the
gradients of the inputs differ by 1.0 in 10 of 64 elements. By the fp64 rule compiled is right
(``clean``, exit 0); ``differences`` lists the ``add`` and the gradient it flips. Before, the
model-level check dropped ``requires_grad`` on its fp64 inputs and stopped with an internal error
(exit 3); it now compares the inputs' gradients too.
"""
import torch
from torch import nn


def plant():
    """Nothing to plant: Inductor's own behaviour."""


plant()

DEVICES = ["cpu"]
PLANTED = None

EXPECTED = {"verdict": "clean", "op": None, "graph": None, "kind": None, "differences": ["aten.add.Scalar", "aten.sum.default"],
            "follows_eager": False,
            "backward": {"op": "aten.add.Scalar", "graph": "backward_0", "gradient_of": "low", "amplifier": "aten.ge.Scalar"}}


class Hinge(nn.Module):
    def forward(self, high, low):
        return nn.functional.margin_ranking_loss(high, low, torch.ones_like(low), margin=1.7, reduction="sum")


def get_model():
    return Hinge()


def get_inputs():
    torch.manual_seed(0)
    low = torch.randn(64)
    high = low + 1.7 + 0.02 * torch.randn(64)
    return (high.to(torch.bfloat16).requires_grad_(), low.to(torch.bfloat16).requires_grad_())


def loss_fn(output):
    return output
