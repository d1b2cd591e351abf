"""Planted: a wrong entry in Inductor's decomposition table for aten._log_softmax.default (it
subtracts an extra 0.05), in the tiny T5 train case with labels (the cross-entropy loss's
log_softmax)."""
import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
from transformers import T5Config, T5ForConditionalGeneration

aten = torch.ops.aten


def _wrong_log_softmax(x, dim, half_to_float):
    shifted = x - x.amax(dim, keepdim=True)
    return shifted - torch.log(torch.exp(shifted).sum(dim, keepdim=True)) - 0.05  # BUG


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten._log_softmax.default] = _wrong_log_softmax
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
EXPECTED = {"verdict": "divergent", "op": "aten._log_softmax.default", "kind": "node", "graph": "forward_0",
            "subsystem": {"kind": "decomposition", "name": "aten._log_softmax.default"}}


def get_model():
    torch.manual_seed(0)
    config = T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                      relative_attention_num_buckets=8, relative_attention_max_distance=16, dropout_rate=0.1,
                      decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = T5ForConditionalGeneration(config).train()

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask, labels):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
    return Wrap()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(2, 100, (2, 10), generator=g)
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 8:] = 0
    labels = torch.randint(2, 100, (2, 7), generator=g)
    labels[0, 5:] = -100
    return ids, mask, labels


def loss_fn(output):
    return output
