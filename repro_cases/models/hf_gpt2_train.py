"""Clean: HF GPT2LMHeadModel (tiny, random init) trained with a next-token LM loss.

Dropout set to 0 (resid/embd/attn), so the graphs are deterministic and the model-level check
runs; train() mode otherwise. loss_fn: shifted cross-entropy against the inputs.
"""
import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

PLANTED = None
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean", "op": None, "kind": None}

_IDS = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(1))


def get_model():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=100, n_positions=32, n_embd=32, n_layer=2, n_head=2, bos_token_id=99, eos_token_id=99,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    return GPT2LMHeadModel(config).train()


def get_inputs():
    return (_IDS.clone(),)


def loss_fn(output):
    logits = output.logits[:, :-1].reshape(-1, output.logits.shape[-1])
    return F.cross_entropy(logits, _IDS[:, 1:].reshape(-1).to(logits.device))
