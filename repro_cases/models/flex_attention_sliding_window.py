"""An attention block with flex attention and a sliding-window block mask (Mistral / Gemma
local attention): the mask_mod |q_idx - kv_idx| <= 48, its BlockMask made once by
create_block_mask outside the compiled forward (the usual way: the mask is reused across calls).
Clean: Inductor compiles the mask_mod into its C++ flex attention template; the tool must judge
the flex_attention node as one op and say clean, exit 0.
"""
import torch
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean"}
WINDOW = 48


def sliding_window(b, h, q_idx, kv_idx):
    return torch.abs(q_idx - kv_idx) <= WINDOW


class Block(nn.Module):
    def __init__(self, width: int = 32, heads: int = 2, seq: int = 256):
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.block_mask = create_block_mask(sliding_window, None, None, seq, seq, device="cpu")

    def forward(self, x):
        b, s, w = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        out = flex_attention(q, k, v, block_mask=self.block_mask)
        return x + self.proj(out.transpose(1, 2).reshape(b, s, w))


def get_model():
    torch.manual_seed(0)
    return Block().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(2, 256, 32),)
