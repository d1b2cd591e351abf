"""Real (no planted bug): a hinge written with ``clamp_min`` and ``relu`` on bf16 inputs that
require grad: the mechanism of pytorch#185517 without ``margin_ranking_loss``.

``relu(clamp_min(1.7 - (high - low), 0) - 0.0)``: eager rounds ``1.7 - (high - low)`` to bf16 at each
step; Inductor fuses it in fp32, closer to fp64. Near the hinge the value the forward saves for
``clamp_min``'s backward (its mask ``ge(saved, 0)``) changes sign, so gradients of ``high`` and
``low`` differ by 1.0 in 3 of 64 elements. By the fp64 rule compiled is right (``clean``,
exit 0); ``differences`` lists the values saved for ``clamp_min``'s and ``relu``'s backward (``rsub``,
and ``relu``'s output as ``detach``) and, under ``backward``, the gradient they flip.
"""
import torch
from torch import nn

SUITE = "full"


def plant():
    """Nothing to plant: Inductor's own behaviour."""


plant()

DEVICES = ["cpu"]
PLANTED = None

EXPECTED = {"verdict": "clean", "op": None, "graph": None, "kind": None,
            "differences": ["aten.rsub.Scalar", "aten.detach.default", "aten.sum.default"], "follows_eager": False,
            "backward": {"op": ["aten.rsub.Scalar", "aten.detach.default"], "graph": "backward_0", "gradient_of": "high",
                         "amplifier": "aten.ge.Scalar"}}


class Hinge(nn.Module):
    def forward(self, high, low):
        return torch.relu(torch.clamp_min(1.7 - (high - low), 0.0)).sum()


def get_model():
    return Hinge()


def get_inputs():
    torch.manual_seed(0)
    low = torch.randn(64)
    high = low + 1.7 + 0.02 * torch.randn(64)
    return (high.to(torch.bfloat16).requires_grad_(), low.to(torch.bfloat16).requires_grad_())


def loss_fn(output):
    return output
