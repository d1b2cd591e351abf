"""Clean: HF T5ForConditionalGeneration (tiny), train mode (dropout 0.1), labels -> out.loss (cross
entropy with -100 ignore index), backward checked."""
import torch
from transformers import T5Config, T5ForConditionalGeneration

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


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
