"""Benchmark model (~650 aten nodes in the forward graph) with a planted Inductor bug deep inside.

A 24-block residual MLP (the model of issue 12): each block is two pre-norm sub-layers on a
(batch, sequence, width) input, a gated MLP and a plain MLP, each scaled before the residual add.
The bug: Inductor's C++ codegen turns relu(x) into x + 1 (``cpp.inject_relu_bug_TESTING_ONLY``),
planted at import exactly like ``repro_cases/relu_bug.py``. It hits *every* relu, so the model uses
exactly one ``torch.relu`` (block 17 of 24) and tanh / gelu / sigmoid / silu elsewhere.
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

DEPTH = 24
RELU_BLOCK = 17
OTHERS = ["tanh", "gelu", "sigmoid", "silu"]


def activate(name, x):
    if name == "relu":
        return torch.relu(x)  # the only relu in the model
    if name in ("gelu", "silu"):
        return getattr(nn.functional, name)(x)
    return getattr(torch, name)(x)


class Block(nn.Module):
    def __init__(self, width, act):
        super().__init__()
        self.act = act
        self.norm1 = nn.LayerNorm(width)
        self.gate = nn.Linear(width, 2 * width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)
        self.norm2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 2 * width)
        self.fc2 = nn.Linear(2 * width, width)
        self.scale = nn.Parameter(torch.full((width,), 0.5))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.scale * self.down(torch.sigmoid(self.gate(h)) * self.up(h))
        return x + self.scale * self.fc2(activate(self.act, self.fc1(self.norm2(x))))


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
