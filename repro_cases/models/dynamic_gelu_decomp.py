"""Planted: a wrong entry in Inductor's decomposition table for aten.gelu.default (erf(x / 2)
instead of erf(x / sqrt(2))), in the dynamic-shape token mixer of dynamic_shapes.py (inputs marked
dynamic, get_batches() with varying batch sizes and lengths).
"""
import torch
from torch import nn
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp

aten = torch.ops.aten


def _wrong_gelu(x, approximate="none"):
    return 0.5 * x * (1 + torch.erf(x / 2.0))  # BUG: should be x / sqrt(2)


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.gelu.default] = _wrong_gelu
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.gelu.default", "kind": "node", "graph": "forward_0",
            "subsystem": {"kind": "decomposition", "name": "aten.gelu.default"}}


class Mixer(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.mix = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.head = nn.Linear(dim, 5)

    def forward(self, x):
        x = x + torch.softmax(self.mix(self.norm1(x)), dim=1) * x
        x = x + self.mlp(self.norm2(x))
        return self.head(x.mean(1))


def get_model():
    torch.manual_seed(0)
    return Mixer().eval()


def _batch(size, length, seed):
    x = torch.randn(size, length, 32, generator=torch.Generator().manual_seed(seed))
    torch._dynamo.mark_dynamic(x, 0)
    torch._dynamo.mark_dynamic(x, 1)
    return (x,)


def get_inputs():
    return _batch(3, 7, 1)


def get_batches():
    return [_batch(size, length, seed) for seed, (size, length) in enumerate([(3, 7), (5, 9), (2, 11)])]
