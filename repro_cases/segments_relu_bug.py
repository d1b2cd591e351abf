"""Planted bug in a graph judged in segments: Inductor's C++ relu computes x + 1
(``cpp.inject_relu_bug_TESTING_ONLY``), in the last of three pre-norm blocks (the first two use GELU).

Judging a graph holds several copies of what it reads; where that does not fit the memory left, the
graph is cut at module boundaries and each segment is judged on eager's values at its boundary
(issue 34). A model this small fits anywhere, so the case sets the engine's testing hook for the
room it decides with (``BISECT_TESTING_GRAPH_ROOM``, read only there; the memory guard is unchanged):
each block's need fits it, two blocks' do not. The forward is then judged in four segments (a
block each, then the head), the first two clean, and the relu is named in the third, with a repro of
that segment alone. Inference only: ``tests/test_segments.py`` cuts a backward too.
"""
import os

import torch
import torch._inductor.config as inductor_config
from torch import nn

# Each block reads about 5 KB (its parameters and its input); a segment is planned at eight times that.
os.environ["BISECT_TESTING_GRAPH_ROOM"] = "45000"


def plant():
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    inductor_config.triton.inject_relu_bug_TESTING_ONLY = "accuracy"


plant()

PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy", "triton.inject_relu_bug_TESTING_ONLY": "accuracy"}}

EXPECTED = {"verdict": "divergent", "op": "aten.relu.default", "graph": "forward_0_segment3", "kind": "node"}


class Block(nn.Module):
    def __init__(self, width: int, act):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)
        self.act = act

    def forward(self, x):
        return x + self.down(self.act(self.up(self.norm(x))))


class Model(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.blocks = nn.ModuleList([Block(width, nn.GELU()), Block(width, nn.GELU()), Block(width, nn.ReLU())])
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

