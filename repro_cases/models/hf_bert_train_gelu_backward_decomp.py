"""Planted: a wrong entry in Inductor's decomposition table for aten.gelu_backward.default (the
derivative drops the x * pdf(x) term), in the tiny HF BertForSequenceClassification of
hf_bert_train.py (train mode, dropout 0.1, cross-entropy loss). Only the backward graph is wrong.
"""
import math

import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
import torch.nn.functional as F
from transformers import BertConfig, BertForSequenceClassification

aten = torch.ops.aten


def _wrong_gelu_backward(grad_output, self, approximate="none"):
    cdf = 0.5 * (1 + torch.erf(self / math.sqrt(2.0)))
    return grad_output * cdf  # BUG: d/dx [x * cdf(x)] = cdf(x) + x * pdf(x); the second term is missing


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.gelu_backward.default] = _wrong_gelu_backward
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
# The gradients this tiny BERT returns are ~1e-4: upstream's `same` (atol 1e-3) passes them whatever
# their error, so the upstream gate reads each output at its own scale (judgement.at_own_scale).
EXPECTED = {"verdict": "divergent", "op": "aten.gelu_backward.default", "kind": "node", "graph": "backward_0",
            "forward_op": "aten.gelu.default",
            "subsystem": {"kind": "decomposition", "name": "aten.gelu_backward.default"}}


def get_model():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=3)
    return BertForSequenceClassification(config).train()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, 100, (2, 12), generator=generator)
    attention_mask = torch.ones(2, 12, dtype=torch.long)
    attention_mask[1, 8:] = 0
    input_ids[1, 8:] = 0
    return (input_ids, attention_mask)


def loss_fn(output):
    labels = torch.tensor([0, 2], device=output.logits.device)
    return F.cross_entropy(output.logits, labels)
