"""Real, clean (no planted bug, torch 2.13 CPU): graph-network pooling, nondeterministic run to run.

40,000 node rows are summed into 32 graph segments with ``index_add_`` (and ``scatter_add``);
a second output, the pooled total minus the rows' total, cancels to ~0. Inductor's CPU kernel for a
duplicate-index sum accumulates with atomic adds across threads, so its order of additions (and its
rounding) changes from run to run; on CUDA every atomic reduction does. Both are noise: the verdict
must be ``clean`` in every run (issue 36: a false ``divergent`` ``aten.index_add.default`` was
reported in about one run of four).
"""
import torch
from torch import nn


def plant():
    """Nothing to plant: Inductor's own behaviour on torch 2.13 CPU."""


plant()

SUITE = "full"  # BISECT_CORPUS=all: tests/test_noise.py covers the duplicate-index floor and the run-to-run rule
DEVICES = ["cpu"]
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "graph": None, "kind": None, "differences": []}
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
