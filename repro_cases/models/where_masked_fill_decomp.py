"""Planted: a wrong entry in Inductor's decomposition table for aten.masked_fill.Scalar (it fills
where the mask is False), in the torch.where / finfo.min masking model of where_inf_masking.py."""
import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
from torch import nn

aten = torch.ops.aten


def _wrong_masked_fill(x, mask, value):
    return torch.where(mask, x, torch.full_like(x, value))  # BUG: fills where the mask is False


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.masked_fill.Scalar] = _wrong_masked_fill
    inductor_decomp.fast_random_decomps.cache_clear()


plant()

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
EXPECTED = {"verdict": "divergent", "op": "aten.masked_fill.Scalar", "kind": "node", "graph": "forward_0",
            "subsystem": {"kind": "decomposition", "name": "aten.masked_fill.Scalar"}}


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
