"""A program that ships a model as an AOTInductor package: a tiny pre-norm transformer block (causal
self-attention with a lower-triangular mask buffer, then a LayerNorm + GELU MLP) exported with
``torch.export`` (the batch dim dynamic), compiled with ``torch._inductor.aoti_compile_and_package``,
loaded with ``aoti_load_package`` and run. Clean: script mode checks the package on the exported
program's example inputs against the exported graph eagerly and in fp64, and at a second batch size:

    bisect-accuracy run repro_cases/script_aoti_attention.py
"""
import math
import os
import tempfile

import torch
from torch import nn

SUITE = "ci"
EXPECTED = {"verdict": "clean", "backend": "aot_inductor", "second_shape": "match"}


class CausalSelfAttention(nn.Module):
    def __init__(self, width: int = 16, heads: int = 2, context: int = 8):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.register_buffer("mask", torch.tril(torch.ones(context, context, dtype=torch.bool)))

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, width // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(width // self.heads)
        scores = scores.masked_fill(~self.mask[:length, :length], float("-inf"))
        attended = torch.softmax(scores, dim=-1) @ v
        return self.proj(attended.transpose(1, 2).reshape(batch, length, width))


class Block(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attention = CausalSelfAttention(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def main() -> None:
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(2, 8, 16)
    exported = torch.export.export(model, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch", min=1, max=32)}})
    path = torch._inductor.aoti_compile_and_package(exported, package_path=os.path.join(tempfile.mkdtemp(), "block.pt2"))
    package = torch._inductor.aoti_load_package(path)
    with torch.no_grad():
        print(f"max |package - eager| = {(package(x) - model(x)).abs().max().item():.3g}")


if __name__ == "__main__":
    main()
