"""No compiler bug: the model itself makes NaN in eager.

A small 1-D conv encoder with geometric-mean pooling, ``exp(mean(log(h)))``, written without the
usual ``clamp(min=eps)``: the conv output goes negative, so ``torch.log`` (``GeometricMeanPool``)
makes NaN in eager and compiled alike. ``plant()`` does nothing.
"""
import torch
from torch import nn


def plant():
    """Nothing to plant: the NaN comes from the model."""


plant()

DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
PLANTED = {"config": {}}

EXPECTED = {
    "verdict": "nan",
    "op": "aten.log.default",
    "graph": "forward_0",
    "kind": "node",
    "nan_eager_op": "aten.log.default",
    "nan_compiled_op": "aten.log.default",
}


class GeometricMeanPool(nn.Module):
    def forward(self, h):
        # BUG (in the model): no clamp(min=eps) before the log
        return torch.exp(torch.log(h).mean(dim=-1))


class Encoder(nn.Module):
    def __init__(self, channels: int = 4, width: int = 8, classes: int = 3):
        super().__init__()
        self.conv = nn.Conv1d(channels, width, kernel_size=3, padding=1)
        self.pool = GeometricMeanPool()
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(self.pool(self.conv(x)))


def get_model():
    torch.manual_seed(0)
    return Encoder().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(4, 4, 16),)
