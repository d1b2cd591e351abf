"""Planted bug inside the body of a while_loop: Inductor's lowering of aten.sin computes
sin(x) * 1.05. The only sin of the model is in the loop body (h <- h + 0.5 * sin(h W^T + b)); the
graph shows one while_loop node. The tool must judge it as one op, then name aten.sin.default
inside its body_fn (traced on the first iteration's values).
"""
import torch
import torch._functorch.config
import torch._inductor.config
from torch import nn
from torch._higher_order_ops import while_loop

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
EXPECTED = {"verdict": "divergent", "op": "aten.sin.default", "kind": "node", "graph": "forward_0",
            "inside": {"hop": "while_loop", "subgraph": "body_fn"}}


class Refine(nn.Module):
    def __init__(self, width: int = 16, steps: int = 4):
        super().__init__()
        self.steps = steps
        self.inp = nn.Linear(width, width)
        self.step = nn.Linear(width, width)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        weight, bias = self.step.weight, self.step.bias

        def cond_fn(i, h):
            return i < self.steps

        def body_fn(i, h):
            return i + 1, h + 0.5 * torch.sin(h @ weight.t() + bias)

        _, h = while_loop(cond_fn, body_fn, (torch.zeros((), dtype=torch.int64), self.inp(x)))
        return self.out(h)


def get_model():
    torch.manual_seed(0)
    return Refine().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 16),)
