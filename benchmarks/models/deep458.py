"""Benchmark model (~458 aten nodes in the forward graph) with a planted Inductor bug.

Many small residual blocks. The bug: Inductor's C++ codegen turns relu(x) into x + 1
(``cpp.inject_relu_bug_TESTING_ONLY``), planted at import exactly like ``repro_cases/relu_bug.py``.
The bug hits *every* relu, so the model uses exactly one ``torch.relu`` (in a block in the middle)
and tanh / gelu / sigmoid elsewhere. Small tensors: eager runs instantly.
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

DEPTH = 42
RELU_BLOCK = 22
OTHERS = ["tanh", "gelu", "sigmoid"]


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
    def __init__(self, width=16, depth=DEPTH):
        super().__init__()
        self.stem = nn.Linear(width, width)
        acts = ["relu" if i == RELU_BLOCK else OTHERS[i % len(OTHERS)] for i in range(depth)]
        self.blocks = nn.ModuleList(Block(width, act) for act in acts)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, 4)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.head(nn.functional.gelu(self.norm(x)))


def get_model():
    torch.manual_seed(0)
    return Model().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 16),)
