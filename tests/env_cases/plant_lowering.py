"""Environment B, compiled side: Inductor's lowering of aten.tanh multiplies by 1.05 (an Inductor
change: eager tanh is untouched)."""
import torch
from torch._inductor import lowering
from torch._inductor.ir import Pointwise
from torch._inductor.virtualized import ops

aten = torch.ops.aten
torch._inductor.config.fx_graph_cache = False
_original = lowering.lowerings[aten.tanh.default]


def _wrong_tanh(x):
    loader, dtype = _original(x).make_loader(), x.get_dtype()
    return Pointwise.create(device=x.get_device(), dtype=dtype, ranges=list(x.get_size()),
                            inner_fn=lambda index: ops.mul(loader(index), ops.constant(1.05, dtype)))


if not getattr(_original, "_planted", False):
    _wrong_tanh._planted = True
    lowering.lowerings[aten.tanh.default] = _wrong_tanh
