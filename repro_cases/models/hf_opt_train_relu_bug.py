"""Planted: Inductor's C++ codegen turns relu(x) into x + 1 (cpp.inject_relu_bug_TESTING_ONLY), in a
tiny HF OPTForCausalLM (relu MLP), train mode with dropout 0.1, labels -> loss, backward checked."""
import torch
import torch._inductor.config as inductor_config
from transformers import OPTConfig, OPTForCausalLM


def plant():
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"


plant()

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}}
EXPECTED = {"verdict": "divergent", "op": "aten.relu.default", "kind": "node", "graph": "forward_0",
            "subsystem": {"kind": "lowering", "name": "aten.relu.default"}}


def get_model():
    torch.manual_seed(0)
    config = OPTConfig(vocab_size=100, hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
                       max_position_embeddings=64, word_embed_proj_dim=32, pad_token_id=1, dropout=0.1)
    model = OPTForCausalLM(config).train()

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask, labels):
            return self.m(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
    return Wrap()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 100, (2, 10), generator=g)
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 8:] = 0
    labels = ids.clone()
    labels[1, 8:] = -100
    return ids, mask, labels


def loss_fn(output):
    return output
