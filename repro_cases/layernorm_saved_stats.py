"""Planted bug: a wrong decomposition of ``aten.native_layer_norm.default`` that only matters in
training.

``plant()`` wraps Inductor's own entry in ``torch._inductor.decomposition.decompositions``: the
normalized output stays right, but the saved statistic ``rstd`` (an extra output that only the
backward uses) comes back as ``1 / (var + eps)`` instead of ``1 / sqrt(var + eps)``. In inference
the statistic is dead and the model compiles correctly; trained through ``loss_fn``, the forward
graph returns ``rstd`` for the backward, so the forward graph already disagrees at the layer norm
(``Encoder.norm``, the only LayerNorm in the model) and the gradients come out wrong.
"""
import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
import torch.nn.functional as F
from torch import nn

aten = torch.ops.aten


def _original_native_layer_norm():
    original = inductor_decomp.decompositions[aten.native_layer_norm.default]
    return getattr(original, "_bisect_original", original)


def _make_wrong_native_layer_norm(original):
    def _wrong_native_layer_norm(x, normalized_shape, weight, bias, eps):
        out, mean, rstd = original(x, normalized_shape, weight, bias, eps)
        # BUG: returns 1 / (var + eps) where 1 / sqrt(var + eps) is meant
        return out, mean, rstd * rstd

    _wrong_native_layer_norm._bisect_original = original
    return _wrong_native_layer_norm


def _disable_compile_caches():
    # Inductor's on-disk caches key on the graph and the config, not on a patched decomposition
    # table or codegen override: a clean entry would hide the bug, and a buggy one would leak into
    # clean processes. A planted process neither reads nor writes them.
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False


def plant():
    """Install the wrong native_layer_norm decomposition (idempotent); clears the cached table copy."""
    _disable_compile_caches()
    original = _original_native_layer_norm()
    inductor_decomp.decompositions[aten.native_layer_norm.default] = _make_wrong_native_layer_norm(original)
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
PLANTED = {
    "config": {},
    # not the bug: plant() also turns off the compile caches (see _disable_compile_caches)
    "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False},
}

SUITE = "full"  # run by BISECT_CORPUS=all; make test covers its path with a cheaper case (CI time limit)
EXPECTED = {"subsystem": {"kind": "decomposition", "name": "aten.native_layer_norm.default"}, "verdict": "divergent", "op": "aten.native_layer_norm.default", "graph": "forward_0", "kind": "node"}


class Encoder(nn.Module):
    def __init__(self, features: int = 12, width: int = 16, classes: int = 3):
        super().__init__()
        self.embed = nn.Linear(features, width)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(torch.tanh(self.norm(self.embed(x) * 3.0)))


def get_model():
    torch.manual_seed(0)
    return Encoder().train()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 12),)


def loss_fn(output):
    labels = torch.arange(output.shape[0], device=output.device) % output.shape[1]
    return F.cross_entropy(output, labels)
