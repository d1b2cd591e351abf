"""Planted bug inside a flex attention mask_mod: Inductor's lowering of aten.abs computes
abs(x) + 1 (on the int32 index difference, the window shrinks by one). The only abs of the model
is in the sliding-window mask_mod |q_idx - kv_idx| <= 48, which Inductor lowers into its C++ flex
attention template; its BlockMask is made outside the compiled forward, so the graph shows one
flex_attention node. The tool must judge that node as one op, then name aten.abs.default inside
its mask_mod.
"""
import torch
import torch._functorch.config
import torch._inductor.config
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

aten = torch.ops.aten


def plant():
    """Install the bug: a wrong entry for aten.abs in Inductor's lowering table (idempotent)."""
    from torch._inductor import lowering
    from torch._inductor.ir import Pointwise
    from torch._inductor.virtualized import ops
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    original = lowering.lowerings[aten.abs.default]
    if getattr(original, "_planted", False):
        return

    def wrong_abs(x):
        loader = original(x).make_loader()
        dtype = x.get_dtype()
        return Pointwise.create(device=x.get_device(), dtype=dtype, ranges=list(x.get_size()),
                                inner_fn=lambda index: ops.add(loader(index), ops.constant(1, dtype)))  # BUG

    wrong_abs._planted = True
    lowering.lowerings[aten.abs.default] = wrong_abs


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.abs.default", "kind": "node", "graph": "forward_0",
            "inside": {"hop": "flex_attention", "subgraph": "mask_mod"}}
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
