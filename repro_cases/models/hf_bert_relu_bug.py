"""Planted: Inductor's C++ codegen turns relu(x) into x + 1 (cpp.inject_relu_bug_TESTING_ONLY),
in a tiny HF BertModel configured with hidden_act="relu" (eval, right-padding attention mask).
The first ReLU is the intermediate activation of encoder.layer.0.
"""
import torch
import torch._inductor.config as inductor_config
from transformers import BertConfig, BertModel


def plant():
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    inductor_config.triton.inject_relu_bug_TESTING_ONLY = "accuracy"


plant()

PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy", "triton.inject_relu_bug_TESTING_ONLY": "accuracy"}}
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # BISECT_CORPUS=all: relu_bug (the plant) and hf_bert_eval (BERT's capture) cover it in make test
EXPECTED = {"verdict": "divergent", "op": "aten.relu.default", "kind": "node", "graph": "forward_0",
            "subsystem": {"kind": "lowering", "name": "aten.relu.default"}}


def get_model():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, hidden_act="relu")
    return BertModel(config).eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, 100, (2, 12), generator=generator)
    attention_mask = torch.ones(2, 12, dtype=torch.long)
    attention_mask[1, 8:] = 0
    input_ids[1, 8:] = 0
    return (input_ids, attention_mask)
