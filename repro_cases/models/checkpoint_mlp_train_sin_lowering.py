"""Planted bug inside a checkpointed block: Inductor's lowering of aten.sin computes sin(x) * 1.05.
The only sin of the model is inside the blocks that torch.utils.checkpoint wraps (use_reentrant=False),
trained one step. AOT Autograd inlines the tag_activation_checkpoint HOP, so the forward graph holds
the sin itself: the tool must name aten.sin.default there.
"""
import torch
import torch._functorch.config
import torch._inductor.config
from torch import nn
from torch.utils.checkpoint import checkpoint

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
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.sin.default", "kind": "node", "graph": "forward_0"}


class Block(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(torch.sin(self.up(x)))


class Net(nn.Module):
    def __init__(self, depth: int = 2):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(depth)])

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return x


def get_model():
    torch.manual_seed(0)
    return Net()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 16, requires_grad=True),)


def loss_fn(output):
    return output.pow(2).mean()
