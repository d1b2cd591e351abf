"""Planted dynamic-only bug: aten.tanh's lowering is wrong only when its input has a symbolic size
whose runtime value is at least 12 (a bug that lives in symbolic kernels alone: a static compile
at any size is right). The model file marks the batch dim dynamic (torch._dynamo.mark_dynamic),
so the job's compiled graph is symbolic; the tool must compile it symbolically, name tanh as
dynamic-only, find the failing batch sizes (12 and up) and emit a repro at batch 12 that compiles
with the same symbolic shapes.
"""
import torch
import sympy
import torch._functorch.config
import torch._inductor.config
from torch import nn

aten = torch.ops.aten


def plant():
    from torch._inductor import lowering
    from torch._inductor.ir import Pointwise
    from torch._inductor.virtualized import ops

    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    original = lowering.lowerings[aten.tanh.default]
    if getattr(original, "_planted", False):
        return

    def wrong_tanh(x):
        result = original(x)
        symbolic = [s for s in x.get_size() if isinstance(s, sympy.Expr) and s.free_symbols]
        if not symbolic:
            return result
        loader, dtype = result.make_loader(), x.get_dtype()

        def inner(index):
            value = loader(index)
            big = ops.ge(ops.index_expr(symbolic[0], torch.int64), ops.constant(12, torch.int64))
            return ops.where(big, ops.mul(value, ops.constant(1.05, dtype)), value)  # BUG

        return Pointwise.create(device=x.get_device(), dtype=dtype, inner_fn=inner, ranges=list(x.get_size()))

    wrong_tanh._planted = True
    lowering.lowerings[aten.tanh.default] = wrong_tanh


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu"]
EXPECTED = {"verdict": "divergent", "op": "aten.tanh.default", "graph": "forward_0", "kind": "node",
            "shapes": "dynamic-only", "sizes": {"failing": [[12, 32]]}}


def get_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).eval()


def get_inputs():
    x = torch.randn(13, 8, generator=torch.Generator().manual_seed(1))
    torch._dynamo.mark_dynamic(x, 0)
    return (x,)
