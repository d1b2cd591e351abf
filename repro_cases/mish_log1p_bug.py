"""Planted bug: Inductor's C++ codegen turns log1p(x) into x + 1 (``cpp.inject_log1p_bug_TESTING_ONLY``),
reached through a decomposition: the model has no log1p, only ``nn.Mish``. Inductor decomposes
``aten.mish`` into ``x * tanh(softplus(x))`` and softplus into ``log1p(exp(x))``, so the aten op
to blame is ``aten.mish.default``; removing mish's decomposition avoids the bug, but that
decomposition is right. The subsystem must name log1p's lowering and say so, not blame mish's
decomposition.
"""
import torch
import torch._inductor.config as inductor_config
from torch import nn


def plant():
    inductor_config.cpp.inject_log1p_bug_TESTING_ONLY = "accuracy"


plant()

PLANTED = {"config": {"cpp.inject_log1p_bug_TESTING_ONLY": "accuracy"}}
SUITE = "full"  # BISECT_CORPUS=all: log1p_bug covers the planted log1p codegen in make test
DEVICES = ["cpu"]  # the log1p injection exists for the C++ backend only
EXPECTED = {"verdict": "divergent", "op": "aten.mish.default", "graph": "forward_0", "kind": "node",
            "subsystem": {"kind": "lowering", "name": "aten.log1p.default"}}


class Block(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.act = nn.Mish()
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(x + self.act(self.linear(x)))


def get_model():
    torch.manual_seed(0)
    return nn.Sequential(Block(), nn.Linear(16, 4)).eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 16),)
