"""Planted bug inside a torch.cond branch: Inductor's lowering of aten.sin computes sin(x) * 1.05.
The data routes the batch to the branch that reads sin (the only sin of the model); the graph
shows one cond node. The tool must judge it as one op, then name aten.sin.default inside the branch.
"""
import torch
import torch._functorch.config
import torch._inductor.config
from torch import nn

aten = torch.ops.aten


def plant():
    """Install the bug: a wrong entry for aten.sin in Inductor's lowering table (idempotent)."""
    from torch._inductor import lowering
    from torch._inductor.ir import Pointwise
    from torch._inductor.virtualized import ops
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    original = lowering.lowerings[aten.sin.default]
    if getattr(original, "_planted", False):
        return

    def wrong_sin(x):
        loader = original(x).make_loader()
        dtype = x.get_dtype()
        return Pointwise.create(device=x.get_device(), dtype=dtype, ranges=list(x.get_size()),
                                inner_fn=lambda index: ops.mul(loader(index), ops.constant(1.05, dtype)))  # BUG

    wrong_sin._planted = True
    lowering.lowerings[aten.sin.default] = wrong_sin


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu"]
SUITE = "full"  # BISECT_CORPUS=all (make test's time): moe_cond (clean) runs cond through the CLI, test_hop localises inside HOPs
EXPECTED = {"verdict": "divergent", "op": "aten.sin.default", "kind": "node", "graph": "forward_0",
            "inside": {"hop": "cond", "subgraph": "true_branch"}}


class Expert(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class MoE(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.gate = nn.Linear(width, 1)
        self.smooth = Expert(width)
        self.wave = Expert(width)

    def forward(self, x):
        score = self.gate(x).mean()

        def wave(h):
            return self.wave(torch.sin(h))

        def smooth(h):
            return self.smooth(h)

        return torch.cond(score < 0, wave, smooth, (x,)) + x


def get_model():
    torch.manual_seed(0)
    return MoE().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 16) + 0.5,)
