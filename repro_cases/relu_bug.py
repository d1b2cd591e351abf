"""Planted bug: Inductor's C++ codegen turns relu(x) into x + 1 (``cpp.inject_relu_bug_TESTING_ONLY``).

A small residual MLP; the bug sits in the relu of the second block.
"""
import torch
import torch._inductor.config as inductor_config
from torch import nn


def plant():
    """Install the bug: Inductor's C++ backend compiles relu(x) as x + 1 (idempotent)."""
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    inductor_config.triton.inject_relu_bug_TESTING_ONLY = "accuracy"  # the same bug on GPUs


plant()

DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy", "triton.inject_relu_bug_TESTING_ONLY": "accuracy"}}

EXPECTED = {"subsystem": {"kind": "lowering", "name": "aten.relu.default"}, "verdict": "divergent", "op": "aten.relu.default", "graph": "forward_0", "kind": "node"}


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        hidden = self.up(self.norm(x))
        return x + self.down(torch.relu(hidden))


class Model(nn.Module):
    def __init__(self, width: int = 16, depth: int = 2):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, 4)

    def forward(self, x):
        for block in self.blocks:
            x = torch.tanh(block(x))
        return self.head(x)


def get_model():
    torch.manual_seed(0)
    return Model().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 16),)
