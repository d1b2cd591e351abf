"""Planted bug inside the combine function of a scan: Inductor's lowering of aten.sin computes
sin(x) * 1.05. The only sin of the model is in the step (h_t = sin(h_{t-1} W^T + u_t)); the graph
shows one scan node. The tool must judge it as one op, then name aten.sin.default inside its
combine_fn (traced on the first step's values).
"""
import torch
import torch._functorch.config
import torch._inductor.config
from torch import nn
from torch._higher_order_ops.scan import scan

torch._dynamo.config.capture_scalar_outputs = True  # Inductor's scan lowering needs it in 2.13

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
            "inside": {"hop": "scan", "subgraph": "combine_fn"}}


class Recurrence(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.inp = nn.Linear(width, width)
        self.rec = nn.Linear(width, width, bias=False)
        self.out = nn.Linear(width, width)

    def forward(self, x):  # x: (time, batch, width)
        u = self.inp(x)
        weight = self.rec.weight

        def step(h, u_t):
            h = torch.sin(h @ weight.t() + u_t)
            return h, 2 * h

        last, ys = scan(step, torch.zeros_like(u[0]), u)
        return self.out(ys).sum(0) + last


def get_model():
    torch.manual_seed(0)
    return Recurrence().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(6, 4, 16),)
