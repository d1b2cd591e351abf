"""Compiled training parts from eager at step 3: a bug that fires only for large activations.

Inductor's decomposition of ``aten.hardsigmoid`` is replaced by one that is wrong above x = 3.
The batches grow in scale with the step (step k holds values up to k + 1), so steps 0-2 agree and
step 3 is the first whose loss (and so gradients and parameters) diverge. The tool scans the
training steps (eager, fp64 and compiled copies from one initial state, SGD from
``get_optimizer``), names step 3, then finds the op inside that step.
"""
import torch
import torch._functorch.config
import torch._inductor.config
from torch import nn
from torch._inductor import decomposition

aten = torch.ops.aten
DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
PLANTED = {"config": {}}
# BISECT_CORPUS=all (make test's time): test_budget_scans' step twin covers the step scan in process
SUITE = "full"
EXPECTED = {
    "verdict": "divergent", "op": "aten.hardsigmoid.default", "graph": "forward_0", "kind": "node",
    "step": 3,
}


def wrong_hardsigmoid(x):
    right = torch.clamp(x / 6 + 0.5, 0, 1)
    return torch.where(x > 3, torch.zeros_like(x), right)


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
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
    return Gate()


def get_batches():
    torch.manual_seed(1)
    return [((torch.rand(8, 6) * 2 - 1) * (step + 1),) for step in range(6)]


def get_inputs():
    return get_batches()[0]


def loss_fn(output):
    return output.square().mean()


def get_optimizer(parameters):
    return torch.optim.SGD(parameters, lr=0.05)
