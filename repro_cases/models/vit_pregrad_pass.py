"""Planted: the wrong pre_grad_custom_pass of convnext_pregrad_pass.py (GELU -> SiLU on the
torch-level Dynamo graph), in the timm-style ViT of vit_eval.py, whose attention goes through
F.scaled_dot_product_attention. Same bug, same contract as convnext_pregrad_pass.py
(``divergent``, kind ``pre_grad``, subsystem ``pre_grad_custom_pass``); the difference is the SDPA node.
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
        return "bisect-accuracy-corpus/vit_pregrad_pass/gelu-to-silu/v1"


def plant():
    """Install the wrong pre-grad pass (idempotent)."""
    inductor_config.pre_grad_custom_pass = GeluToSilu()


plant()

PLANTED = {"config": {}}
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.silu.default", "kind": "pre_grad",
            "subsystem": {"kind": "pass", "name": "pre_grad_custom_pass"},
            # the rewrite, replayed eagerly: the first GELU the pass turned into SiLU, at its source line
            "pre_grad": {"aten_op": "aten.silu.default",
                         "before": "gelu = torch._C._nn.gelu(linear_2, approximate='none')",
                         "after": "gelu = torch.nn.functional.silu(linear_2)"}}


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(b, n, c))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, dim * 2)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    def __init__(self, image=16, patch=4, dim=32, depth=2, heads=2, classes=10):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def make_vit():
    torch.manual_seed(0)
    model = VisionTransformer()
    with torch.no_grad():  # non-trivial LayerNorm affine parameters, as in a trained model
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.2, 0.2)
    return model


def get_model():
    return make_vit().eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(2, 3, 16, 16, generator=generator),)
