"""Clean: HF BertModel (tiny, random init) in eval mode, with a right-padding attention mask.

Two sequences of 12 tokens; the second is padded after 8 tokens. Default attention
implementation (SDPA in transformers 5), GELU activations, post-LN.
"""
import torch
from transformers import BertConfig, BertModel

PLANTED = None
DEVICES = ["cpu", "cuda"]
SUITE = "ci"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def get_model():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, type_vocab_size=2)
    return BertModel(config).eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, 100, (2, 12), generator=generator)
    attention_mask = torch.ones(2, 12, dtype=torch.long)
    attention_mask[1, 8:] = 0
    input_ids[1, 8:] = 0
    return (input_ids, attention_mask)
