"""Planted bug: a wrong entry in Inductor's decomposition table for ``aten.hardswish.default``.

``plant()`` replaces ``torch._inductor.decomposition.decompositions[aten.hardswish.default]``
with ``x * clamp(x + 3, 0, 6) / 8`` (the divisor should be 6). Eager runs the real kernel, so only
the compiled hardswish is off. The model is a tiny MobileNetV3-style conv stem; the bug sits in
the ``nn.Hardswish`` after the first conv + batch norm (``stem.act``).
"""
import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
from torch import nn

aten = torch.ops.aten


def _wrong_hardswish(x):
    # BUG: the divisor of hardswish is 6, not 8
    return x * torch.clamp(x + 3, 0, 6) / 8


def _disable_compile_caches():
    # Inductor's on-disk caches key on the graph and the config, not on a patched decomposition
    # table or codegen override: a clean entry would hide the bug, and a buggy one would leak into
    # clean processes. A planted process neither reads nor writes them.
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False


def plant():
    """Install the wrong decomposition (idempotent); clears the cached copy of the table."""
    _disable_compile_caches()
    inductor_decomp.decompositions[aten.hardswish.default] = _wrong_hardswish
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
PLANTED = {
    "config": {},
    # not the bug: plant() also turns off the compile caches (see _disable_compile_caches)
    "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False},
}

SUITE = "full"  # run by BISECT_CORPUS=all; make test covers its path with a cheaper case (CI time limit)
EXPECTED = {"subsystem": {"kind": "decomposition", "name": "aten.hardswish.default"}, "verdict": "divergent", "op": "aten.hardswish.default", "graph": "forward_0", "kind": "node"}


class ConvBNAct(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = nn.Hardswish()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class TinyMobileNet(nn.Module):
    def __init__(self, classes: int = 5):
        super().__init__()
        self.stem = ConvBNAct(3, 8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.stem(x)), 1))


def get_model():
    torch.manual_seed(0)
    model = TinyMobileNet()
    with torch.no_grad():  # non-trivial running stats, as in a trained model
        model.stem.bn.running_mean.uniform_(-0.5, 0.5)
        model.stem.bn.running_var.uniform_(0.5, 2.0)
    return model.eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(2, 3, 6, 6),)
