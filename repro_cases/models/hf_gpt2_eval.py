"""Clean: HF GPT2LMHeadModel (tiny, random init) in eval mode, default attention (SDPA).

gelu_new (the tanh approximation written out in Python ops), causal mask, tied LM head.
"""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

PLANTED = None
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def get_model():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=100, n_positions=32, n_embd=32, n_layer=2, n_head=2, bos_token_id=99, eos_token_id=99)
    return GPT2LMHeadModel(config).eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    return (torch.randint(0, 100, (2, 12), generator=generator),)
