"""Planted bug: Inductor's C++ codegen turns log1p(x) into x + 1 (``cpp.inject_log1p_bug_TESTING_ONLY``).

A small tabular regressor. Its middle layer uses the numerically stable softplus
``relu(h) + log1p(exp(-|h|))`` written out by hand; the planted bug sits in that ``torch.log1p``
(``SoftplusFeatures.forward``), the only log1p in the model.
"""
import torch
import torch._inductor.config as inductor_config
from torch import nn


def plant():
    """Install the bug: Inductor's C++ backend compiles log1p(x) as x + 1 (idempotent)."""
    inductor_config.cpp.inject_log1p_bug_TESTING_ONLY = "accuracy"


plant()

PLANTED = {"config": {"cpp.inject_log1p_bug_TESTING_ONLY": "accuracy"}}
CLI_ARGS = ["--random-inputs"]  # this case also checks repros that draw their inputs at random

EXPECTED = {"subsystem": {"kind": "lowering", "name": "aten.log1p.default"}, "verdict": "divergent", "op": "aten.log1p.default", "graph": "forward_0", "kind": "node"}
SUITE = "full"  # BISECT_CORPUS=all (make test time): relu_bug covers the planted C++ codegen path; --random-inputs is covered in-process


class SoftplusFeatures(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        h = self.proj(x)
        return torch.relu(h) + torch.log1p(torch.exp(-h.abs()))


class Regressor(nn.Module):
    def __init__(self, features: int = 12, width: int = 24):
        super().__init__()
        self.embed = nn.Linear(features, width)
        self.features = SoftplusFeatures(width)
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        h = self.features(self.embed(x))
        return self.head(h).squeeze(-1)


def get_model():
    torch.manual_seed(0)
    return Regressor().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(16, 12),)
