"""Clean: HF BartForConditionalGeneration (tiny, random init), eval, use_cache=True, encoder+decoder,
padding attention mask on the encoder side."""
import torch
from transformers import BartConfig, BartForConditionalGeneration

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def get_model():
    torch.manual_seed(0)
    config = BartConfig(vocab_size=100, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
                        pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, use_cache=True)
    model = BartForConditionalGeneration(config).eval()

    class Wrap(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask, decoder_input_ids):
            out = self.m(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids,
                         use_cache=True)
            return out.logits, out.encoder_last_hidden_state
    return Wrap()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 100, (2, 10), generator=g)
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 7:] = 0
    ids[1, 7:] = 1
    dec = torch.randint(3, 100, (2, 8), generator=g)
    return ids, mask, dec
