"""Planted, below tolerance: Inductor's decomposition of aten.gelu.default replaced by the tanh
approximation (``approximate="tanh"``'s formula under ``approximate="none"``), in the tiny HF
BertModel of hf_bert_eval.py (weights drawn a little wider). At the op compiled is hundreds of ulps
RMS off fp64 (eager ~1); at the model output 7.9 ulps vs eager's 1.75 (4.5x), inside the
tolerance (2 x eager + 8): the verdict
stays ``clean`` (exit 0), and ``findings`` names the op below tolerance (``--oracle strict``
makes it the verdict).
"""
import math

import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
from transformers import BertConfig, BertModel

aten = torch.ops.aten


def _tanh_gelu(x, approximate="none"):
    # BUG: the tanh approximation, whatever `approximate` says
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.gelu.default] = _tanh_gelu
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean", "op": None, "graph": None, "kind": None,
            "below_tolerance": {"op": "aten.gelu.default", "graph": "forward_0"}}


def get_model():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32,
                        initializer_range=0.027)  # trained weights are wider than the 0.02 init
    return BertModel(config).eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, 100, (2, 12), generator=generator)
    attention_mask = torch.ones(2, 12, dtype=torch.long)
    attention_mask[1, 8:] = 0
    input_ids[1, 8:] = 0
    return (input_ids, attention_mask)
