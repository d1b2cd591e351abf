"""Benchmark model (~66 aten nodes in the forward graph) with a planted Inductor bug.

The bug: Inductor's C++ codegen turns relu(x) into x + 1 (``cpp.inject_relu_bug_TESTING_ONLY``),
planted at import exactly like ``repro_cases/relu_bug.py``. The bug hits *every* relu, so the model
uses exactly one ``torch.relu`` (in the middle block) and tanh / gelu / sigmoid elsewhere.
Small tensors: eager runs instantly; the cost measured is the bisection, not the model.
"""
import torch
import torch._inductor.config as inductor_config
from torch import nn


def plant():
    """Install the bug: Inductor's C++ backend compiles relu(x) as x + 1."""
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"


plant()

PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}}
EXPECTED = {"verdict": "divergent", "op": "aten.relu.default", "kind": "node"}

ACTIVATIONS = ["tanh", "gelu", "relu", "sigmoid", "tanh", "gelu"]


def activate(name, x):
    if name == "relu":
        return torch.relu(x)  # the only relu in the model
    if name == "gelu":
        return nn.functional.gelu(x)
    return getattr(torch, name)(x)


class Block(nn.Module):
    def __init__(self, width, act):
        super().__init__()
        self.act = act
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(activate(self.act, self.up(self.norm(x))))


class Model(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width, act) for act in ACTIVATIONS)
        self.head = nn.Linear(width, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def get_model():
    torch.manual_seed(0)
    return Model().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 16),)
