"""Planted dynamic-only bug in HF GPT-2 (tiny, random init): aten.tanh's lowering is wrong only when
its input has a symbolic size whose runtime value is at least 48 (gelu_new reaches aten.tanh). The
sequence dim is marked dynamic, so the graph is symbolic; a static compile at any length is right.
"""
import torch
import sympy
import torch._functorch.config
import torch._inductor.config
from transformers import GPT2Config, GPT2LMHeadModel

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
        size = symbolic[0]
        loader = result.make_loader()

        def inner(index):
            value = loader(index)
            big = ops.ge(ops.index_expr(size, torch.int64), ops.constant(48, torch.int64))
            return ops.where(big, ops.mul(value, ops.constant(1.05, value_dtype)), value)  # BUG

        value_dtype = x.get_dtype()
        return Pointwise.create(device=x.get_device(), dtype=value_dtype, inner_fn=inner, ranges=list(x.get_size()))

    wrong_tanh._planted = True
    lowering.lowerings[aten.tanh.default] = wrong_tanh


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu"]
SUITE = "full"
EXPECTED = {"verdict": "divergent", "op": "aten.tanh.default", "kind": "node", "graph": "forward_0",
            "shapes": "dynamic-only", "sizes": {"failing": [[48, 106]]}}


def get_model():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=100, n_positions=128, n_embd=32, n_layer=2, n_head=2, bos_token_id=99, eos_token_id=99)
    return GPT2LMHeadModel(config).eval()


def get_inputs():
    ids = torch.randint(0, 100, (2, 53), generator=torch.Generator().manual_seed(1))
    torch._dynamo.mark_dynamic(ids, 1)
    return (ids,)
