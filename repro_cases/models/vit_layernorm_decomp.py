"""Planted: a wrong entry in Inductor's decomposition table for aten.native_layer_norm.default,
in the timm-style ViT of vit_eval.py (eval).

The wrong decomposition normalises by the unbiased variance (divides by N - 1): every LayerNorm
output is off by a factor sqrt((N-1)/N) (about 1.6 % at N = 32). The first LayerNorm in the
graph is blocks.0.norm1.
"""
import torch
import torch.nn.functional as F
from torch import nn
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp

aten = torch.ops.aten


def _wrong_layer_norm(x, normalized_shape, weight, bias, eps):
    dims = tuple(range(x.dim() - len(normalized_shape), x.dim()))
    mean = x.mean(dims, keepdim=True)
    var = x.var(dims, keepdim=True, correction=1)  # BUG: LayerNorm uses the biased variance
    rstd = torch.rsqrt(var + eps)
    out = (x - mean) * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


def plant():
    """Install the wrong decomposition (idempotent); compile caches off, cached table cleared."""
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.native_layer_norm.default] = _wrong_layer_norm
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.native_layer_norm.default", "kind": "node", "graph": "forward_0",
            "subsystem": {"kind": "decomposition", "name": "aten.native_layer_norm.default"}}


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
