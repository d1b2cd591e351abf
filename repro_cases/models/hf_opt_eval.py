"""Clean: HF OPTForCausalLM (tiny), eval, relu MLP, padding mask."""
import torch
from transformers import OPTConfig, OPTForCausalLM

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def get_model():
    torch.manual_seed(0)
    config = OPTConfig(vocab_size=100, hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
                       max_position_embeddings=64, word_embed_proj_dim=32, pad_token_id=1)
    return OPTForCausalLM(config).eval()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 100, (2, 10), generator=g)
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[0, :3] = 0  # left padding
    return ids, mask
