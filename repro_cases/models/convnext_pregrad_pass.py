"""Planted: a wrong pre_grad_custom_pass (runs on the torch-level Dynamo graph, before AOT
tracing) that replaces every GELU with SiLU, in the timm-style ConvNeXt of convnext_eval.py.

No aten graph the tool captures shows it (its capture backend is not Inductor, and its compiles
turn pre-grad passes off): the model-level check names the pass ``pre_grad_custom_pass``, and the
pass replayed eagerly on the Dynamo graph localises it: ``divergent``, kind ``pre_grad``, the GELU
nodes it rewrote and the aten op the rewrite runs (aten.silu.default), as
tests/upstream_cases/bisector_pre_grad_pass.py.
"""
import torch
import torch.nn.functional as F
from torch import nn
import torch._inductor.config as inductor_config
from torch._inductor.custom_graph_pass import CustomGraphPass

_GELUS = {torch._C._nn.gelu, F.gelu}


class GeluToSilu(CustomGraphPass):
    """BUG: "simplifies" gelu to silu on the torch-level graph."""

    def __call__(self, graph):
        for node in graph.nodes:
            if node.op == "call_function" and node.target in _GELUS:
                node.target = F.silu
                node.kwargs = {k: v for k, v in node.kwargs.items() if k != "approximate"}
        graph.lint()

    def uuid(self):
        return "bisect-accuracy-corpus/convnext_pregrad_pass/gelu-to-silu/v1"


def plant():
    """Install the wrong pre-grad pass (idempotent)."""
    inductor_config.pre_grad_custom_pass = GeluToSilu()


plant()

PLANTED = {"config": {}}
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.silu.default", "kind": "pre_grad",
            "subsystem": {"kind": "pass", "name": "pre_grad_custom_pass"}}


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over channels of an NCHW tensor (timm's LayerNorm2d)."""

    def forward(self, x):
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.conv_dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 0.5))

    def forward(self, x):
        shortcut = x
        x = self.conv_dw(x).permute(0, 2, 3, 1)
        x = self.fc2(self.act(self.fc1(self.norm(x))))
        x = x * self.gamma
        return x.permute(0, 3, 1, 2) + shortcut


class ConvNeXt(nn.Module):
    def __init__(self, dims=(16, 32), classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, dims[0], 4, 4), LayerNorm2d(dims[0], eps=1e-6))
        self.stage1 = ConvNeXtBlock(dims[0])
        self.downsample = nn.Sequential(LayerNorm2d(dims[0], eps=1e-6), nn.Conv2d(dims[0], dims[1], 2, 2))
        self.stage2 = ConvNeXtBlock(dims[1])
        self.head_norm = nn.LayerNorm(dims[1], eps=1e-6)
        self.head = nn.Linear(dims[1], classes)

    def forward(self, x):
        x = self.stage2(self.downsample(self.stage1(self.stem(x))))
        return self.head(self.head_norm(x.mean((2, 3))))


def get_model():
    torch.manual_seed(0)
    return ConvNeXt().eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(2, 3, 32, 32, generator=generator),)
