"""Planted bug fixed by a config flip: only the *vectorized* C++ codegen of ``tanh`` is wrong.

``plant()`` patches ``CppVecOverrides.tanh`` to emit ``tanh(2x)``; scalar kernels stay right. So
turning vectorisation off (``cpp.simdlen = 1``) makes compiled match eager: the tool should name
that config flip as the subsystem, before falling back to the aten kernel.
"""
import torch
import torch._functorch.config
import torch._inductor.config
from torch import nn
from torch._inductor.codegen import cpp as inductor_cpp

PLANTED = {"config": {}}
EXPECTED = {
    "verdict": "divergent", "op": "aten.tanh.default", "graph": "forward_0", "kind": "node",
    "subsystem": {"kind": "config", "name": "cpp.simdlen"},
}


def _wrong_vec_tanh(x):
    return f"({x} + {x}).tanh()"  # BUG: tanh(2x)


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_cpp.CppVecOverrides.tanh = staticmethod(_wrong_vec_tanh)


plant()


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(32, 64)
        self.out = nn.Linear(64, 16)

    def forward(self, x):
        return self.out(torch.tanh(self.inp(x)))


def get_model():
    torch.manual_seed(0)
    return Encoder().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(16, 32),)
