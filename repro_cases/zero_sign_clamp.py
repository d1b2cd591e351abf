"""A real torch 2.13 difference (issue 37, "the sign of a zero"): compiled ``clamp(x, max=0.0)``
returns +0.0 where eager returns the -0.0 it was given (Inductor's ``clamp_max`` lowering). The two
are 0 ulps apart, so only an exact rule sees it: under ``--oracle bitwise`` the sign of a zero
counts, and the op is named (without the exact rule this was ``clean``).
"""
import torch
from torch import nn

CLI_ARGS = ["--oracle", "bitwise"]
SUITE = "full"  # BISECT_CORPUS=all; tests/test_exact_rules.py covers the rule in make test

EXPECTED = {"verdict": "divergent", "op": "aten.clamp.default", "graph": "forward_0", "kind": "node"}


class Model(nn.Module):
    def forward(self, x):
        return torch.clamp(x, max=0.0)


def get_model():
    return Model().eval()


def get_inputs():
    return (torch.tensor([-0.0, 0.0, -1.0, 2.0] * 4),)
