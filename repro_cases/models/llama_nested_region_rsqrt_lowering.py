"""Planted bug inside a torch.compiler.nested_compile_region: Inductor's lowering of aten.rsqrt
computes rsqrt(x) * 1.05. The Llama-style block's RMSNorms are its only rsqrt; every layer calls
the region's one subgraph through invoke_subgraph. The tool must judge the invoke_subgraph node as
one op, then name aten.rsqrt.default inside its body.
"""
import torch
import torch._functorch.config
import torch._inductor.config
import torch.nn.functional as F
from torch import nn

aten = torch.ops.aten


def plant():
    """Install the bug: a wrong entry for aten.rsqrt in Inductor's lowering table (idempotent)."""
    from torch._inductor import lowering
    from torch._inductor.ir import Pointwise
    from torch._inductor.virtualized import ops
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    original = lowering.lowerings[aten.rsqrt.default]
    if getattr(original, "_planted", False):
        return

    def wrong_rsqrt(x):
        loader = original(x).make_loader()
        dtype = x.get_dtype()
        return Pointwise.create(device=x.get_device(), dtype=dtype, ranges=list(x.get_size()),
                                inner_fn=lambda index: ops.mul(loader(index), ops.constant(1.05, dtype)))  # BUG

    wrong_rsqrt._planted = True
    lowering.lowerings[aten.rsqrt.default] = wrong_rsqrt


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.rsqrt.default", "kind": "node", "graph": "forward_0",
            "inside": {"hop": "invoke_subgraph", "subgraph": "body"}}


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class Block(nn.Module):
    def __init__(self, width: int = 32, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.attn_norm = RMSNorm(width)
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.o = nn.Linear(width, width, bias=False)
        self.mlp_norm = RMSNorm(width)
        self.gate = nn.Linear(width, 2 * width, bias=False)
        self.up = nn.Linear(width, 2 * width, bias=False)
        self.down = nn.Linear(2 * width, width, bias=False)

    @torch.compiler.nested_compile_region
    def forward(self, x):
        b, s, w = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        attention = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(attention.transpose(1, 2).reshape(b, s, w))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(nn.Module):
    def __init__(self, width: int = 32, depth: int = 3):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def get_model():
    torch.manual_seed(0)
    return Model().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(2, 16, 32),)
