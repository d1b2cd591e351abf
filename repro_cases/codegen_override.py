"""Planted bug: Inductor's C++ codegen for sigmoid drops the minus sign: it emits 1 / (1 + exp(x)).

``plant()`` patches ``torch._inductor.codegen.cpp.CppOverrides.sigmoid`` (scalar kernels) and
``CppVecOverrides.sigmoid`` (vectorized kernels), so compiled ``sigmoid(x)`` computes
``sigmoid(-x)`` in both code paths. The model is a small gated MLP (GLU-style): the bug sits in the
``torch.sigmoid`` of the gate (``GatedBlock.forward``), the only sigmoid in the model.
"""
import torch
import torch._functorch.config
import torch._inductor.config
from torch import nn
from torch._inductor.codegen import cpp as inductor_cpp


def _wrong_scalar_sigmoid(x):
    # BUG: should be std::exp(-x)
    return f"decltype({x})(1) / (decltype({x})(1) + std::exp({x}))"


def _wrong_vec_sigmoid(x):
    # BUG: should be x.neg().exp()
    return f"decltype({x})(1)/(decltype({x})(1) + {x}.exp())"


def _disable_compile_caches():
    # Inductor's on-disk caches key on the graph and the config, not on a patched decomposition
    # table or codegen override: a clean entry would hide the bug, and a buggy one would leak into
    # clean processes. A planted process neither reads nor writes them.
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False


def plant():
    """Install the wrong sigmoid codegen on both the scalar and vectorized C++ overrides (idempotent)."""
    _disable_compile_caches()
    inductor_cpp.CppOverrides.sigmoid = staticmethod(_wrong_scalar_sigmoid)
    inductor_cpp.CppVecOverrides.sigmoid = staticmethod(_wrong_vec_sigmoid)


plant()

PLANTED = {
    "config": {},
    # not the bug: plant() also turns off the compile caches (see _disable_compile_caches)
    "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False},
}

SUITE = "full"  # run by BISECT_CORPUS=all; make test covers its path with a cheaper case (CI time limit)
EXPECTED = {"subsystem": {"kind": "lowering", "name": "aten.sigmoid.default"}, "verdict": "divergent", "op": "aten.sigmoid.default", "graph": "forward_0", "kind": "node"}


class GatedBlock(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.value = nn.Linear(width, hidden)
        self.gate = nn.Linear(width, hidden)
        self.out = nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.out(self.value(x) * torch.sigmoid(self.gate(x)))


class GatedMLP(nn.Module):
    def __init__(self, width: int = 16, hidden: int = 32, classes: int = 3):
        super().__init__()
        self.block = GatedBlock(width, hidden)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(self.block(x))


def get_model():
    torch.manual_seed(0)
    return GatedMLP().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(10, 16),)
