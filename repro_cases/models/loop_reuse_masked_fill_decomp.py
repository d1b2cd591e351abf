"""Planted: a wrong entry in Inductor's decomposition table for aten.masked_fill.Scalar (it ignores
the mask: returns the input unfilled), in a weight-shared block applied 3 times in a Python loop with
a graph break per step, so one Dynamo graph is called 3 times. Step 0's padding mask is all False
(the bug changes nothing there); steps 1 and 2 pad positions (the bug shows)."""
import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
from torch import nn

aten = torch.ops.aten


def _wrong_masked_fill(x, mask, value):
    return x.clone()  # BUG: the mask is ignored


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.masked_fill.Scalar] = _wrong_masked_fill
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

DEVICES = ["cpu", "cuda"]
SUITE = "full"  # BISECT_CORPUS=all (make test's time): test_pipeline's loop twin names the diverging call in process
PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
# The first call's mask hides the bug; the graph's second call shows it (forward_0_call2).
EXPECTED = {"verdict": "divergent", "op": "aten.masked_fill.Scalar", "kind": "node", "graph": "forward_0_call2",
            "subsystem": {"kind": "decomposition", "name": "aten.masked_fill.Scalar"}}


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(32, 32)
        self.ln = nn.LayerNorm(32)

    def forward(self, x, pad):
        h = torch.tanh(self.lin(self.ln(x)))
        h = h.masked_fill(pad[..., None], 0.0)
        return x + h


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(32, 8)

    def forward(self, x, pads):
        for i in range(pads.shape[0]):
            x = self.block(x, pads[i])
            torch._dynamo.graph_break()
        return self.head(x)


def get_model():
    torch.manual_seed(0)
    return Model().eval()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 6, 32, generator=g)
    pads = torch.zeros(3, 2, 6, dtype=torch.bool)
    pads[1, 1, 4:] = True
    pads[2, 0, 3:] = True
    return x, pads
