"""Clean: HF LlamaForCausalLM (tiny, random init), eval: RMSNorm, rotary embeddings, GQA, SDPA
with its causal mask, SiLU-gated MLP.
"""
import torch
from transformers import LlamaConfig, LlamaForCausalLM

PLANTED = None
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def get_model():
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config).eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    return (torch.randint(0, 100, (2, 12), generator=generator),)
