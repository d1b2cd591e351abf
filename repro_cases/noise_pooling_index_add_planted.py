"""Planted twin of noise_pooling_index_add.py: the same graph-network pooling, with a wrong
decomposition of ``aten.index_add.default`` that drops the last of the 40,000 rows. The reduction-
order floor the noise model gives a duplicate-index sum (issue 36) must still leave one dropped term
of 1,250 per segment thousands of units off: the op is named.
"""
import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
from torch import nn

aten = torch.ops.aten


def _wrong_index_add(x, dim, index, source, *, alpha=1):
    # BUG: the last row of ``source`` is dropped (dim 0 only: the model's case)
    return x.index_put((index[:-1],), source[:-1] * alpha, accumulate=True)


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.index_add.default] = _wrong_index_add
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

SUITE = "full"  # BISECT_CORPUS=all: tests/test_noise.py covers the duplicate-index floor and the run-to-run rule
DEVICES = ["cpu"]
PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
EXPECTED = {"verdict": "divergent", "op": "aten.index_add.default", "graph": "forward_0", "kind": "node"}
ROWS, SEGMENTS, WIDTH = 40_000, 32, 16


class SegmentPooling(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, WIDTH)
        self.gate = nn.Linear(8, WIDTH)

    def forward(self, features, segment):
        rows = torch.tanh(self.embed(features))
        pooled = torch.zeros(SEGMENTS, WIDTH, dtype=rows.dtype).index_add_(0, segment, rows)
        gates = torch.sigmoid(self.gate(features))
        gated = torch.zeros(SEGMENTS, WIDTH, dtype=rows.dtype).scatter_add(
            0, segment[:, None].expand(-1, WIDTH), gates * rows)
        balance = pooled.sum(0) - rows.sum(0)  # analytically 0: rounding noise only
        return pooled, gated, balance


def get_model():
    torch.manual_seed(0)
    return SegmentPooling().eval()


def get_inputs():
    torch.manual_seed(1)
    return torch.randn(ROWS, 8), torch.randint(0, SEGMENTS, (ROWS,))
