"""A Llama-style decoder block (RMSNorm, causal SDPA, SwiGLU MLP) repeated three times, its forward
under torch.compiler.nested_compile_region: Dynamo traces it once and every layer calls the same
subgraph through invoke_subgraph. Clean: the tool must say clean, exit 0 (each invoke_subgraph node
is judged as one op, its body in fp64 for the reference).
"""
import torch
import torch.nn.functional as F
from torch import nn

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean"}


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
