"""Planted: a wrong entry in Inductor's decomposition table for aten.embedding_dense_backward.default
(the gradient doubled), in the tiny Qwen2 bf16 train case (a backward-only op)."""
import torch
import torch._decomp.decompositions as ref_decomps
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
from transformers import Qwen2Config, Qwen2ForCausalLM

aten = torch.ops.aten


def _wrong_embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    out = ref_decomps.embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
    return out * 2  # BUG


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.embedding_dense_backward.default] = _wrong_embedding_dense_backward
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
EXPECTED = {"verdict": "divergent", "op": "aten.embedding_dense_backward.default", "kind": "node",
            "graph": "backward_0", "subsystem": {"kind": "decomposition", "name": "aten.embedding_dense_backward.default"}}


def get_model():
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = Qwen2ForCausalLM(config).to(torch.bfloat16).train()

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, input_ids, labels):
            return self.m(input_ids=input_ids, labels=labels).loss
    return Wrap()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 100, (2, 12), generator=g)
    return ids, ids.clone()


def loss_fn(output):
    return output
