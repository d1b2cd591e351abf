"""Clean: HF PhiForCausalLM (tiny): partial rotary, parallel attention + MLP, gelu_new, eval."""
import torch
from transformers import PhiConfig, PhiForCausalLM

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def get_model():
    torch.manual_seed(0)
    config = PhiConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=4, max_position_embeddings=64, partial_rotary_factor=0.5)
    return PhiForCausalLM(config).eval()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    return (torch.randint(0, 100, (2, 12), generator=g),)
