"""Clean: HF GPT2LMHeadModel (tiny) with attn_implementation="sdpa", left padding mask and explicit
position_ids (cumsum of the mask), eval."""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def get_model():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=100, n_positions=32, n_embd=32, n_layer=2, n_head=2, bos_token_id=99,
                        eos_token_id=99, attn_implementation="sdpa")
    model = GPT2LMHeadModel(config).eval()

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask):
            position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
            return self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids).logits
    return Wrap()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 99, (2, 10), generator=g)
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[0, :4] = 0
    ids[0, :4] = 99
    return ids, mask
