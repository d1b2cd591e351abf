"""Clean: HF BertForSequenceClassification (tiny, random init) in train mode with a loss.

Dropout stays at its default (0.1): the graphs hold random ops. loss_fn is cross-entropy on
fixed labels, so the backward graph is checked too. Right-padding attention mask.
"""
import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForSequenceClassification

PLANTED = None
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def get_model():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, num_labels=3)
    return BertForSequenceClassification(config).train()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, 100, (2, 12), generator=generator)
    attention_mask = torch.ones(2, 12, dtype=torch.long)
    attention_mask[1, 8:] = 0
    input_ids[1, 8:] = 0
    return (input_ids, attention_mask)


def loss_fn(output):
    labels = torch.tensor([0, 2], device=output.logits.device)
    return F.cross_entropy(output.logits, labels)
