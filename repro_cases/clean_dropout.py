"""Clean case: dropout in training mode, trained through ``loss_fn``; no planted bug.

Compiled dropout draws different random numbers from eager, so a right answer must not blame
``dropout`` (or its backward). ``plant()`` does nothing.
"""
import torch
import torch.nn.functional as F
from torch import nn


def plant():
    """Nothing to plant: a clean case."""


plant()

DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
PLANTED = {"config": {}}

EXPECTED = {"verdict": "clean", "op": None, "graph": None, "kind": None}


class MLP(nn.Module):
    def __init__(self, features: int = 10, width: int = 24, classes: int = 3, p: float = 0.2):
        super().__init__()
        self.fc1 = nn.Linear(features, width)
        self.drop1 = nn.Dropout(p)
        self.fc2 = nn.Linear(width, width)
        self.drop2 = nn.Dropout(p)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        x = self.drop1(torch.relu(self.fc1(x)))
        x = self.drop2(torch.relu(self.fc2(x)))
        return self.head(x)


def get_model():
    torch.manual_seed(0)
    return MLP().train()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 10),)


def loss_fn(output):
    labels = torch.arange(output.shape[0], device=output.device) % output.shape[1]
    return F.cross_entropy(output, labels)
