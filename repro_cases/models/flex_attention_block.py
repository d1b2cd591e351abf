"""An attention block written with flex attention (torch.nn.attention.flex_attention): a tanh
soft-cap score_mod (Gemma-2 style) and a causal block mask from create_block_mask. Clean: on CPU
Inductor compiles it through its C++ flex attention template; the tool must say clean, exit 0.
"""
import torch
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean"}


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def softcap(score, b, h, q_idx, kv_idx):
    return 20.0 * torch.tanh(score / 20.0)


class Block(nn.Module):
    def __init__(self, width: int = 32, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        b, s, w = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        mask = create_block_mask(causal, None, None, s, s, device=x.device)
        out = flex_attention(q, k, v, score_mod=softcap, block_mask=mask)
        return x + self.proj(out.transpose(1, 2).reshape(b, s, w))


def get_model():
    torch.manual_seed(0)
    return Block().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(2, 256, 32),)
