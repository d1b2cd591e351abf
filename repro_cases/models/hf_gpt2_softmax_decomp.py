"""Planted: a wrong entry in Inductor's decomposition table for aten._softmax.default (it
normalises over dim - 1 instead of dim: for square attention scores the shapes still agree),
in the tiny HF GPT2LMHeadModel of hf_gpt2_eval.py with attn_implementation="eager", so the
attention softmax is an explicit aten._softmax (eval).
"""
import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
from transformers import GPT2Config, GPT2LMHeadModel

aten = torch.ops.aten


def _wrong_softmax(x, dim, half_to_float):
    dim = dim if dim >= 0 else dim + x.dim()
    dim = dim - 1 if dim > 0 else dim  # BUG: off by one dimension
    shifted = x - x.amax(dim, keepdim=True)
    exp = torch.exp(shifted)
    return exp / exp.sum(dim, keepdim=True)


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten._softmax.default] = _wrong_softmax
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
# GPT-2's eager attention concatenates an empty cache: our recompile needs the views-as-reshapes fallback.
# A padded query's row is masked whole: the noise model must not read finfo.min's scale into it
# (verdict/noise.py: exact results and elementwise adds), or the planted softmax is judged noise.
EXPECTED = {"verdict": "divergent", "op": "aten._softmax.default", "kind": "node", "graph": "forward_0",
            "harness": "views_as_reshapes",
            "subsystem": {"kind": "decomposition", "name": "aten._softmax.default"}}
# On CUDA the attention takes SDPA's kernels and our recompile needs no fallback.
EXPECTED_CUDA = {"harness": None}


def get_model():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=100, n_positions=32, n_embd=32, n_layer=2, n_head=2, bos_token_id=99,
                        eos_token_id=99, attn_implementation="eager")
    return GPT2LMHeadModel(config).eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    return (torch.randint(0, 100, (2, 12), generator=generator),)
