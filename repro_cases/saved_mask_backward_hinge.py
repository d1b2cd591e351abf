"""Real (no planted bug): pytorch#185517's bf16 ranking hinge written with its mask, so that the
forward saves a **bool mask** for the backward.

``gap = 1.7 - (high - low); (gap * (gap >= 0)).sum()`` on bf16 inputs that require grad: the
forward computes ``ge(gap, 0)`` and saves the bool mask (the backward of ``mul`` needs it). Eager
rounds each step to bf16; Inductor fuses them in fp32, closer to fp64, so near the hinge the saved
mask differs and the gradients differ by 1.0 in several of 64 elements (before: ``divergent``, a
window ``rsub, ge`` judged by exact equality although compiled's mask is fp64's). By the fp64 rule compiled is right (``clean``, exit 0), but the user sees different
gradients: ``differences`` lists the mask and, under ``backward``, the gradient it flips (one eager
replay of the backward graph with the compiled forward's saved mask, no compile).
"""
import torch
from torch import nn


def plant():
    """Nothing to plant: Inductor's own behaviour."""


plant()

DEVICES = ["cpu"]
PLANTED = None

EXPECTED = {"verdict": "clean", "op": None, "graph": None, "kind": None, "differences": ["aten.ge.Scalar", "aten.sum.default"],
            "follows_eager": False, "backward": {"op": "aten.ge.Scalar", "graph": "backward_0", "gradient_of": "high"}}


class Hinge(nn.Module):
    def forward(self, high, low):
        gap = 1.7 - (high - low)
        return (gap * (gap >= 0)).sum()


def get_model():
    return Hinge()


def get_inputs():
    torch.manual_seed(0)
    low = torch.randn(64)
    high = low + 1.7 + 0.02 * torch.randn(64)
    return (high.to(torch.bfloat16).requires_grad_(), low.to(torch.bfloat16).requires_grad_())


def loss_fn(output):
    return output
