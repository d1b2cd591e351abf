"""Planted twin of script_graph_breaks_erf.py: the same script split into many graphs by ``.item()``,
with Inductor's decomposition table given a wrong ``aten.erf.default`` (``tanh`` in its place, tens of
percent off): the interior gate's error now reaches what the program returns, so the end-to-end
tolerance script calls are judged at (issue 36) still names the op.
"""
import sys

import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp

aten = torch.ops.aten
PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
EXPECTED = {"verdict": "divergent", "op": "aten.erf.default", "graph": "forward_0", "kind": "node"}
LAYERS = 6


def _wrong_erf(x):
    return torch.tanh(x)  # BUG: erf(x) is not tanh(x) (1.13 x near 0, tanh's slope is 1)


def plant():
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.erf.default] = _wrong_erf
    inductor_decomp.fast_random_decomps.cache_clear()


plant()


def layer(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    hidden = torch.tanh(x @ weight)
    gate = torch.erf(hidden * 0.3)
    if gate.max().item() > 0.01:  # a data-dependent branch: a graph break
        hidden = hidden * (1 + gate)
    else:
        hidden = hidden - gate
    return hidden


def main() -> int:
    torch.manual_seed(0)
    weights = [torch.randn(64, 64) / 8 for _ in range(LAYERS)]
    compiled = torch.compile(layer)
    x = torch.randn(32, 64)
    for weight in weights:
        x = compiled(x, weight)
    print(f"result {x.sum().item():.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
