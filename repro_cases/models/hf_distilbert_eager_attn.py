"""Clean: HF DistilBertModel (tiny) with attn_implementation="eager", padding mask, eval."""
import torch
from transformers import DistilBertConfig, DistilBertModel

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def get_model():
    torch.manual_seed(0)
    config = DistilBertConfig(vocab_size=100, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                              max_position_embeddings=64, attn_implementation="eager")
    return DistilBertModel(config).eval()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 100, (2, 10), generator=g)
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 6:] = 0
    return ids, mask
