"""Planted bug: a wrong entry in Inductor's decomposition table for ``aten.softplus.default`` that
makes NaN only in compiled code.

``plant()`` replaces ``torch._inductor.decomposition.decompositions[aten.softplus.default]`` with
``log(expm1(beta * x)) / beta`` below the threshold (the right form is ``log1p(exp(beta * x))``):
for x < 0, expm1 is negative and the log is NaN. Eager runs the real kernel and stays finite. The
model is a small Gaussian regression head whose standard deviation goes through ``F.softplus``
(``GaussianHead.forward``), the only softplus in the model.
"""
import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
import torch.nn.functional as F
from torch import nn

aten = torch.ops.aten


def _wrong_softplus(x, beta=1, threshold=20):
    scaled = x * beta
    # BUG: log(expm1(.)) instead of log1p(exp(.)); NaN for every x < 0
    return torch.where(scaled > threshold, x, torch.log(torch.expm1(scaled)) / beta)


def _disable_compile_caches():
    # Inductor's on-disk caches key on the graph and the config, not on a patched decomposition
    # table or codegen override: a clean entry would hide the bug, and a buggy one would leak into
    # clean processes. A planted process neither reads nor writes them.
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False


def plant():
    """Install the wrong softplus decomposition (idempotent); clears the cached table copy."""
    _disable_compile_caches()
    inductor_decomp.decompositions[aten.softplus.default] = _wrong_softplus
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
PLANTED = {
    "config": {},
    # not the bug: plant() also turns off the compile caches (see _disable_compile_caches)
    "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False},
}

SUITE = "full"  # run by BISECT_CORPUS=all; make test covers its path with a cheaper case (CI time limit)
EXPECTED = {"subsystem": {"kind": "decomposition", "name": "aten.softplus.default"}, 
    "verdict": "nan",
    "op": "aten.softplus.default",
    "graph": "forward_0",
    "kind": "node",
    "nan_eager_op": None,
    "nan_compiled_op": "aten.softplus.default",
}


class GaussianHead(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.mean = nn.Linear(width, 2)
        self.raw_std = nn.Linear(width, 2)

    def forward(self, h):
        return self.mean(h), F.softplus(self.raw_std(h)) + 1e-3


class GaussianRegressor(nn.Module):
    def __init__(self, features: int = 6, width: int = 16):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh())
        self.head = GaussianHead(width)

    def forward(self, x):
        mean, std = self.head(self.body(x))
        return torch.cat([mean, std], dim=-1)


def get_model():
    torch.manual_seed(0)
    return GaussianRegressor().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(12, 6),)
