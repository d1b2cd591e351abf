"""Clean: HF RobertaModel (tiny), eval, with a float additive 4-D attention mask (0 / finfo.min)."""
import torch
from transformers import RobertaConfig, RobertaModel

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def get_model():
    torch.manual_seed(0)
    config = RobertaConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=64, max_position_embeddings=64, pad_token_id=1)
    return RobertaModel(config).eval()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 100, (2, 10), generator=g)
    keep = torch.ones(2, 10, dtype=torch.bool)
    keep[1, 6:] = False
    mask = torch.zeros(2, 1, 10, 10)
    mask = mask.masked_fill(~keep[:, None, None, :], torch.finfo(torch.float32).min)
    return ids, mask
