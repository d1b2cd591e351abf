"""Planted bug that fires only for some input values, found through the batch that triggers it.

Inductor's decomposition of ``aten.hardsigmoid`` is replaced by one that is wrong above x = 3
(it returns 0 where the saturated answer is 1). Four batches of eight samples; only sample 5 of
batch 2 holds a value above 3, so only that batch (and that sample) diverges.
"""
import torch
from torch import nn
from torch._inductor import decomposition

aten = torch.ops.aten
DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
SUITE = "full"  # BISECT_CORPUS=all: make test covers the batch scan with bad_sample_nan and tests/test_budget_scans.py
PLANTED = {"config": {}}
EXPECTED = {
    "verdict": "divergent", "op": "aten.hardsigmoid.default", "graph": "forward_0", "kind": "node",
    "batch": {"index": 2, "samples": [5]},
    "subsystem": {"kind": "decomposition", "name": "aten.hardsigmoid.default"},
}


def wrong_hardsigmoid(x):
    right = torch.clamp(x / 6 + 0.5, 0, 1)
    return torch.where(x > 3, torch.zeros_like(x), right)


def plant():
    decomposition.decompositions[aten.hardsigmoid.default] = wrong_hardsigmoid
    decomposition.fast_random_decomps.cache_clear()


plant()


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 6)

    def forward(self, x):
        return self.proj(x) * nn.functional.hardsigmoid(x)


def get_model():
    torch.manual_seed(0)
    return Gate().eval()


def get_batches():
    torch.manual_seed(1)
    batches = [(torch.rand(8, 6) * 4 - 2,) for _ in range(4)]  # values in [-2, 2)
    batches[2][0][5, 3] = 4.5
    return batches


def get_inputs():
    return get_batches()[0]
