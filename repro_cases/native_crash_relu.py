"""Planted native crash: Inductor's C++ relu throws inside the compiled kernel
(``cpp.inject_relu_bug_TESTING_ONLY = "runtime_error"`` emits ``throw 1``), so the compiled
program dies in ``std::terminate`` (glibc abort, SIGABRT), as a kernel that corrupts the heap does.

The tool's own process must survive it: ``crash`` on the relu, and a repro that crashes the same way.
"""
import torch
import torch._inductor.config as inductor_config
from torch import nn


def plant():
    """Install the bug: Inductor's C++ backend compiles relu(x) as a kernel that throws (idempotent)."""
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "runtime_error"


plant()

PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "runtime_error"}}
SUITE = "full"  # BISECT_CORPUS=all (two runs: the one that dies, then the isolated rerun; ~2-3 min); tests/test_isolate.py covers the child process in make test

EXPECTED = {"verdict": "crash", "op": "aten.relu.default", "graph": "forward_0", "kind": "node"}


class Model(nn.Module):
    def __init__(self, width: int = 256):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, 4)

    def forward(self, x):
        return self.down(torch.relu(torch.tanh(self.up(x))))


def get_model():
    torch.manual_seed(0)
    return Model().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(64, 256),)
