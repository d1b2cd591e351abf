"""An unmodified generation-style script with a planted dynamic-only bug: aten.tanh's lowering is
wrong only in symbolic kernels, at sequence lengths of 48 and more (GPT-2's gelu_new reaches
aten.tanh). The script calls the compiled model with lengths 37, 53, 71: Dynamo compiles length
37 statically, then recompiles with a symbolic length at 53 (automatic dynamic shapes); script
mode checks that new graph's first call, and localises in it symbolically.

    bisect-accuracy run repro_cases/script_dynamic_gpt2.py
"""
import torch
import sympy
import torch._functorch.config
import torch._inductor.config

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
EXPECTED = {"verdict": "divergent", "op": "aten.tanh.default", "graph": "forward_0", "kind": "node",
            "shapes": "dynamic-only"}


def main() -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=100, n_positions=128, n_embd=32, n_layer=2, n_head=2, bos_token_id=99,
                        eos_token_id=99)
    model = GPT2LMHeadModel(config).eval()
    compiled = torch.compile(model)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for length in (37, 53, 71):
            ids = torch.randint(0, 100, (2, length), generator=generator)
            print(length, float(compiled(ids).logits.abs().mean()))


if __name__ == "__main__":
    main()
