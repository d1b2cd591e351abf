"""Planted bug: Inductor's C++ codegen turns relu(x) into x + 1 (``cpp.inject_relu_bug_TESTING_ONLY``),
in a model called the way Hugging Face models are: with keyword arguments. ``get_inputs()`` returns
an ``(args, kwargs)`` pair (a dict of keyword arguments alone works too).
"""
import torch
import torch._inductor.config as inductor_config
from torch import nn


def plant():
    """Install the bug: Inductor's C++ backend compiles relu(x) as x + 1 (idempotent)."""
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"


plant()

PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}}

SUITE = "full"  # BISECT_CORPUS=all: test_safety.test_get_inputs_may_give_keyword_arguments covers the keyword form
# at load, after which the pipeline is relu_bug's (flat inputs); CI time limit

EXPECTED = {"verdict": "divergent", "op": "aten.relu.default", "graph": "forward_0", "kind": "node"}


class TinyEncoder(nn.Module):
    def __init__(self, vocab: int = 32, width: int = 16):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, input_ids, attention_mask=None, scale=1.0):
        hidden = self.embed(input_ids)
        hidden = hidden + self.down(torch.relu(self.up(hidden)))
        if attention_mask is not None:
            hidden = hidden * attention_mask.unsqueeze(-1)
        return hidden.sum(dim=1) * scale


def get_model():
    torch.manual_seed(0)
    return TinyEncoder()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(0, 32, (2, 8), generator=generator)
    attention_mask = torch.ones(2, 8)
    attention_mask[1, 5:] = 0
    return (input_ids,), {"attention_mask": attention_mask, "scale": 0.5}
