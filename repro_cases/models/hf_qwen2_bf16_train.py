"""Clean: HF Qwen2ForCausalLM (tiny, GQA, qkv bias) in bfloat16, train mode, labels -> loss, backward."""
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


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
