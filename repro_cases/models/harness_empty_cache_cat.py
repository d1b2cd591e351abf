"""Clean, and a trap for our own harness: an attention-style block whose key cache starts as an
empty tensor and is concatenated on (as HF's DynamicCache does in T5 and GPT-2 eager attention).

Eager's ``cat`` returns a contiguous tensor, so the ``reshape`` before the matmul is captured as a
``view``; Inductor's ``cat`` decomposition drops the empty tensor and clones the transposed key,
whose strides that ``view`` cannot take. A real ``torch.compile`` decomposes before it resolves
the reshape and works; our recompile of the captured graph fails. The tool must say so (report
``harness``), judge the graph with its views as reshapes, and call the model clean, never a crash
or a divergent window.
"""
import torch
from torch import nn

PLANTED = None
DEVICES = ["cpu", "cuda"]
SUITE = "ci"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean", "op": None, "kind": None, "harness": "views_as_reshapes"}


class CachedAttention(nn.Module):
    def __init__(self, dim=16, heads=2):
        super().__init__()
        self.heads = heads
        self.key = nn.Linear(dim, dim)
        self.query = nn.Linear(dim, dim)

    def forward(self, x):
        batch, length, dim = x.shape
        key = self.key(x).view(batch, length, self.heads, dim // self.heads).transpose(1, 2)
        query = self.query(x).view(batch, length, self.heads, dim // self.heads).transpose(1, 2)
        cache = torch.tensor([], device=x.device)  # the empty cache of a first step
        key = torch.cat([cache, key], dim=-2)
        scores = torch.matmul(query, key.transpose(-1, -2)) / (dim // self.heads) ** 0.5
        return scores.softmax(-1).sum(1)


def get_model():
    torch.manual_seed(0)
    return CachedAttention().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(2, 6, 16),)
