"""Clean: HF FalconForCausalLM (tiny) with alibi=True (ALiBi bias instead of rotary), parallel attn,
multi-query, padding mask, eval."""
import torch
from transformers import FalconConfig, FalconForCausalLM

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def get_model():
    torch.manual_seed(0)
    config = FalconConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                          alibi=True, multi_query=True, parallel_attn=True, bias=True)
    model = FalconForCausalLM(config).eval()

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).logits
    return Wrap()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 100, (2, 10), generator=g)
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 7:] = 0
    return ids, mask
