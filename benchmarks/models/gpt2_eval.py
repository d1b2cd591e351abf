"""GPT-2 small (GPT2Config(), random init) in eval: one forward of 4 x 256 tokens, no loss_fn (inference)."""
import torch
from transformers import GPT2Config, GPT2LMHeadModel


def get_model():
    torch.manual_seed(0)
    config = GPT2Config()
    config.use_cache = False
    return GPT2LMHeadModel(config).eval()


def get_inputs():
    return (torch.randint(0, 50257, (4, 256), generator=torch.Generator().manual_seed(1)),)
