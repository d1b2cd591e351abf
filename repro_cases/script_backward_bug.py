"""A plain training script whose bug is in the backward only: a wrong entry in Inductor's
decomposition table for ``aten.gelu_backward.default`` (the ``x * pdf(x)`` term dropped), planted
by the script itself. The forward matches eager; script mode finds it by checking the compiled
graph's gradients, then localises it in the captured backward graph.

    bisect-accuracy run repro_cases/script_backward_bug.py --level 3
"""
import argparse
import math

import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
from torch import nn
from torch.nn import functional as F

aten = torch.ops.aten

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}

EXPECTED = {"verdict": "divergent", "op": "aten.gelu_backward.default", "graph": "backward_0", "kind": "node",
            "forward_op": "aten.gelu.default",
            "subsystem": {"kind": "decomposition", "name": "aten.gelu_backward.default"}}


def _wrong_gelu_backward(grad, x, approximate="none"):
    cdf = 0.5 * (1 + torch.erf(x * (1 / math.sqrt(2))))
    return grad * cdf  # BUG: the x * pdf(x) term of the derivative is missing


def plant():
    """Install the wrong decomposition (idempotent); compile caches off, as they key on config only."""
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.gelu_backward.default] = _wrong_gelu_backward
    inductor_decomp.fast_random_decomps.cache_clear()


plant()


class FeedForward(nn.Module):
    def __init__(self, width: int = 16, hidden: int = 32, classes: int = 4):
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.act = nn.GELU()
        self.down = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.down(self.act(self.up(x)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = FeedForward()
    compiled = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(args.steps):
        inputs, labels = torch.randn(8, 16), torch.arange(8) % 4
        loss = F.cross_entropy(compiled(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
