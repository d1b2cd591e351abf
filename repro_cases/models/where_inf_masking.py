"""Clean: hand-written attention with torch.where(-inf) masking of scores, finfo.min fills, a
masked mean and a log-sum-exp readout; no row is fully masked (eager is finite everywhere)."""
import torch
from torch import nn

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.q = nn.Linear(32, 32)
        self.k = nn.Linear(32, 32)
        self.v = nn.Linear(32, 32)
        self.out = nn.Linear(32, 16)

    def forward(self, ids, valid):
        x = self.emb(ids)
        s = self.q(x) @ self.k(x).transpose(-1, -2) / 32 ** 0.5
        n = ids.shape[1]
        causal = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        allowed = causal[None] & valid[:, None, :]
        s = torch.where(allowed, s, torch.tensor(float("-inf"), device=x.device))
        p = s.softmax(-1)
        h = p @ self.v(x)
        h = h.masked_fill(~valid[..., None], torch.finfo(h.dtype).min)
        pooled = h.amax(1)
        logits = self.out(torch.tanh(pooled))
        return logits, torch.logsumexp(logits, -1)


def get_model():
    torch.manual_seed(0)
    return Model().eval()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 100, (3, 8), generator=g)
    valid = torch.ones(3, 8, dtype=torch.bool)
    valid[1, 5:] = False
    valid[2, 1:3] = False  # first token always valid: no fully masked causal row
    return ids, valid
