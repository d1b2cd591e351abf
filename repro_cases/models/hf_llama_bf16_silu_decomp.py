"""Planted, bf16: a wrong entry in Inductor's decomposition table for aten.silu.default
(x * sigmoid(1.702 x), the sigmoid-GELU approximation, instead of x * sigmoid(x)), in the bf16
tiny HF LlamaForCausalLM of hf_llama_bf16.py. The first SiLU is model.layers.0.mlp.act_fn.

The wrong SiLU is 17 bf16 ulps RMS off at its own output, but at the logits of this random-init
model only 1.5 ulps (eager's own error: 1.1): by default the outputs agree and the run is clean.
``--oracle strict`` judges every node even then, and names the SiLU.
"""
import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
from transformers import LlamaConfig, LlamaForCausalLM

aten = torch.ops.aten


def _wrong_silu(x):
    return x * torch.sigmoid(1.702 * x)  # BUG: SiLU is x * sigmoid(x)


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.silu.default] = _wrong_silu
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
CLI_ARGS = ["--oracle", "strict"]
EXPECTED = {"verdict": "divergent", "op": "aten.silu.default", "kind": "node", "graph": "forward_0",
            "subsystem": {"kind": "decomposition", "name": "aten.silu.default"}}


def get_model():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config).to(torch.bfloat16).eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    return (torch.randint(0, 100, (2, 12), generator=generator),)
