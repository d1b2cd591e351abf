"""Clean: HF T5ForConditionalGeneration (tiny, random init), eval forward with decoder_input_ids.

Default cache (use_cache=True: the decoder returns an EncoderDecoderCache), relative position
buckets, T5LayerNorm (RMS), ReLU feed-forward. Called as model(input_ids, attention_mask,
decoder_input_ids).
"""
import torch
from transformers import T5Config, T5ForConditionalGeneration

PLANTED = None
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def get_model():
    torch.manual_seed(0)
    config = T5Config(vocab_size=100, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2,
                      num_heads=2, relative_attention_num_buckets=8, relative_attention_max_distance=16,
                      decoder_start_token_id=0, pad_token_id=0)
    return T5ForConditionalGeneration(config).eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, 100, (2, 10), generator=generator)
    attention_mask = torch.ones(2, 10, dtype=torch.long)
    attention_mask[1, 7:] = 0
    decoder_input_ids = torch.randint(1, 100, (2, 6), generator=generator)
    decoder_input_ids[:, 0] = 0
    return (input_ids, attention_mask, decoder_input_ids)
