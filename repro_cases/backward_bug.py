"""Planted bug: a wrong entry in Inductor's decomposition table for ``aten.gelu_backward.default``.

``plant()`` replaces ``torch._inductor.decomposition.decompositions[aten.gelu_backward.default]``
with ``grad * Phi(x)``: the ``x * phi(x)`` term of d/dx [x * Phi(x)] is dropped. The forward graph
is untouched (gelu's own decomposition is right), so only the gradients are wrong. The model is a
small transformer-style feed-forward block trained with cross-entropy (``loss_fn``); the bug sits
in the backward of ``FeedForward.act`` (``nn.GELU``), the only gelu in the model.
"""
import math

import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
import torch.nn.functional as F
from torch import nn

aten = torch.ops.aten


def _wrong_gelu_backward(grad, x, approximate="none"):
    # BUG: drops the x * pdf(x) term of the derivative (approximate="none" only: the model's case)
    cdf = 0.5 * (1 + torch.erf(x * (1 / math.sqrt(2))))
    return grad * cdf


def _disable_compile_caches():
    # Inductor's on-disk caches key on the graph and the config, not on a patched decomposition
    # table or codegen override: a clean entry would hide the bug, and a buggy one would leak into
    # clean processes. A planted process neither reads nor writes them.
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False


def plant():
    """Install the wrong gelu_backward decomposition (idempotent); clears the cached table copy."""
    _disable_compile_caches()
    inductor_decomp.decompositions[aten.gelu_backward.default] = _wrong_gelu_backward
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
PLANTED = {
    "config": {},
    # not the bug: plant() also turns off the compile caches (see _disable_compile_caches)
    "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False},
}

EXPECTED = {"subsystem": {"kind": "decomposition", "name": "aten.gelu_backward.default"}, "forward_op": "aten.gelu.default", "verdict": "divergent", "op": "aten.gelu_backward.default", "graph": "backward_0", "kind": "node"}


class FeedForward(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.act = nn.GELU()
        self.down = nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.down(self.act(self.up(x)))


class Classifier(nn.Module):
    def __init__(self, width: int = 16, hidden: int = 32, classes: int = 4):
        super().__init__()
        self.ff = FeedForward(width, hidden)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(self.ff(x))


def get_model():
    torch.manual_seed(0)
    return Classifier().train()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 16),)


def loss_fn(output):
    labels = torch.arange(output.shape[0], device=output.device) % output.shape[1]
    return F.cross_entropy(output, labels)
