"""Clean: HF WhisperModel encoder (tiny): conv1d front end + GELU, sinusoidal positions, eval."""
import torch
from transformers import WhisperConfig, WhisperModel

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def get_model():
    torch.manual_seed(0)
    config = WhisperConfig(vocab_size=100, num_mel_bins=16, encoder_layers=2, decoder_layers=2, d_model=32,
                           encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                           decoder_ffn_dim=64, max_source_positions=12, max_target_positions=16,
                           pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    return WhisperModel(config).get_encoder().eval()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    return (torch.randn(2, 16, 24, generator=g),)
