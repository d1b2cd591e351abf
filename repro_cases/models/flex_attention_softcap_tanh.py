"""Planted bug inside a flex attention score_mod: Inductor's lowering of aten.tanh computes
tanh(x) * 1.05. The only tanh of the model is the soft-cap of the score_mod, which Inductor
lowers into its C++ flex attention template; the graph itself shows one flex_attention node.
The tool must judge that node as one op, then name aten.tanh.default inside its score_mod.
"""
import torch
import torch._functorch.config
import torch._inductor.config
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

aten = torch.ops.aten


def plant():
    """Install the bug: a wrong entry for aten.tanh in Inductor's lowering table (idempotent)."""
    from torch._inductor import lowering
    from torch._inductor.ir import Pointwise
    from torch._inductor.virtualized import ops
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    original = lowering.lowerings[aten.tanh.default]
    if getattr(original, "_planted", False):
        return

    def wrong_tanh(x):
        loader = original(x).make_loader()
        dtype = x.get_dtype()
        return Pointwise.create(device=x.get_device(), dtype=dtype, ranges=list(x.get_size()),
                                inner_fn=lambda index: ops.mul(loader(index), ops.constant(1.05, dtype)))  # BUG

    wrong_tanh._planted = True
    lowering.lowerings[aten.tanh.default] = wrong_tanh


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.tanh.default", "kind": "node", "graph": "forward_0",
            "inside": {"hop": "flex_attention", "subgraph": "score_mod"}}


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
