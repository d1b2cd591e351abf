"""Real (no planted bug): pytorch#185517 as its reporter wrote it: ``F.margin_ranking_loss`` on bf16
inputs at the hinge (1.703125 against 0, target 1) with the margin a Python float, 1.7.

Eager casts the margin to bf16 (1.703125): the loss is 0 at the hinge, the backward's mask
``ge(x, 0)`` holds, and the gradient of ``x1`` is -0.5. Inductor keeps 1.7 as a float: the value
saved for the backward is -0.0031, the mask is off, the gradient 0, as in fp64. By the fp64 rule
compiled is right (``clean``, exit 0; fixed upstream after 2.13 to follow eager); the user sees
different gradients: ``differences`` lists the value the forward saves and, under ``backward``,
the gradient it flips (one eager replay of the backward graph, no compile).
"""
import torch
from torch import nn

SUITE = "full"


def plant():
    """Nothing to plant: Inductor's own behaviour."""


plant()

DEVICES = ["cpu"]
PLANTED = None

EXPECTED = {"verdict": "clean", "op": None, "graph": None, "kind": None, "differences": ["aten.add.Scalar"],
            "follows_eager": False,
            "backward": {"op": "aten.add.Scalar", "graph": "backward_0", "gradient_of": "x1", "amplifier": "aten.ge.Scalar"}}


class Ranking(nn.Module):
    def forward(self, x1, x2, target):
        return nn.functional.margin_ranking_loss(x1, x2, target, margin=1.7, reduction="mean")


def get_model():
    return Ranking()


def get_inputs():
    x1 = torch.tensor([1.703125, 1.703125], dtype=torch.bfloat16, requires_grad=True)
    x2 = torch.tensor([0.0, 0.0], dtype=torch.bfloat16, requires_grad=True)
    return (x1, x2, torch.tensor([1.0, 1.0], dtype=torch.bfloat16))


def loss_fn(output):
    return output
