"""Planted bug in an exported program: ``get_model()`` returns ``torch.export.export(model, inputs)``
(what ``aoti_compile_and_package`` takes) and Inductor's C++ codegen turns relu(x) into x + 1
(``cpp.inject_relu_bug_TESTING_ONLY``). The exported program is checked as its graph module
(``ExportedProgram.module()``), per node, eager vs fp64 vs Inductor; the repro exports the op and
compiles it through AOTInductor (``aoti_compile_and_package``, then ``aoti_load_package``).
"""
import torch
import torch._inductor.config as inductor_config
from torch import nn


def plant():
    """Install the bug: Inductor's C++ backend compiles relu(x) as x + 1 (idempotent)."""
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"


plant()

DEVICES = ["cpu"]
SUITE = "full"  # BISECT_CORPUS=all: tests/test_aoti.py covers the exported path in make test (a flat exported graph, its model-level package check, a wrong op in a package named and its repro compiled through AOTInductor)
PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}}
EXPECTED = {"verdict": "divergent", "op": "aten.relu.default", "graph": "forward_0", "kind": "node"}


class Model(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, 4)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def get_model():
    torch.manual_seed(0)
    return torch.export.export(Model().eval(), get_inputs())


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(4, 16),)
