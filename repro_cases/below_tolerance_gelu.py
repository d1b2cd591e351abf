"""Planted, below tolerance: Inductor's decomposition of ``aten.gelu.default`` replaced by the tanh
approximation, in a small residual MLP whose branch is scaled down (a residual block early in
training: ``x + 0.008 * down(gelu(up(x)))``). At the op compiled is hundreds of ulps RMS off fp64
(eager under one); at the output its error is several times eager's but within the tolerance
(2 x eager + 8 ulps). The verdict stays ``clean`` (exit 0); ``findings`` lists the gelu with
``below_tolerance`` and the summary says it (``--oracle strict`` makes it the verdict). The cheap
twin of models/hf_bert_gelu_tanh_below_tol.py, for make test.
"""
import math

import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
from torch import nn

aten = torch.ops.aten


def _tanh_gelu(x, approximate="none"):
    # BUG: the tanh approximation, whatever `approximate` says
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.gelu.default] = _tanh_gelu
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu"]
EXPECTED = {"verdict": "clean", "op": None, "graph": None, "kind": None,
            "below_tolerance": {"op": "aten.gelu.default", "graph": "forward_0"}}
SCALE = 0.008


class ResidualMLP(nn.Module):
    def __init__(self, width: int = 32, hidden: int = 64):
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.act = nn.GELU()
        self.down = nn.Linear(hidden, width)

    def forward(self, x):
        return x + SCALE * self.down(self.act(self.up(x)))


def get_model():
    torch.manual_seed(0)
    return ResidualMLP().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 32),)
