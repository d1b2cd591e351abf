"""Planted: a wrong entry in Inductor's decomposition table for aten.gelu.default (erf(x / 2)
instead of erf(x / sqrt(2))), in the tiny HF BertModel of hf_bert_eval.py (eval, padding mask,
hidden_act="gelu" -> aten.gelu). The first GELU is encoder.layer.0.intermediate.
"""
import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
from transformers import BertConfig, BertModel

aten = torch.ops.aten


def _wrong_gelu(x, approximate="none"):
    return 0.5 * x * (1 + torch.erf(x / 2.0))  # BUG: should be x / sqrt(2)


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.gelu.default] = _wrong_gelu
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.gelu.default", "kind": "node", "graph": "forward_0",
            "subsystem": {"kind": "decomposition", "name": "aten.gelu.default"}}


def get_model():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32)
    return BertModel(config).eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, 100, (2, 12), generator=generator)
    attention_mask = torch.ones(2, 12, dtype=torch.long)
    attention_mask[1, 8:] = 0
    input_ids[1, 8:] = 0
    return (input_ids, attention_mask)
