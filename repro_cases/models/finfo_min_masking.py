"""Clean: the finfo.min masked attention of finfo_min_masked_fill_decomp.py, without the planted bug."""
import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
from torch import nn

aten = torch.ops.aten


def _wrong_masked_fill(x, mask, value):
    return torch.where(mask, torch.full_like(x, value), x * 1.5)  # BUG: kept values scaled


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.masked_fill.Scalar] = _wrong_masked_fill
    inductor_decomp.fast_random_decomps.cache_clear()



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
        s = s.masked_fill(~allowed, torch.finfo(s.dtype).min)
        h = s.softmax(-1) @ self.v(x)
        return self.out(h)


def get_model():
    torch.manual_seed(0)
    return Model().eval()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 100, (3, 8), generator=g)
    valid = torch.ones(3, 8, dtype=torch.bool)
    valid[1, 5:] = False
    return ids, valid
