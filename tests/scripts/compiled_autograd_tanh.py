"""A training step under compiled autograd (``torch._dynamo.config.compiled_autograd = True``):
``loss.backward()`` inside the compiled training step is itself compiled by Dynamo. ``--bug``: a wrong decomposition of
``aten.tanh_backward`` (``grad * (1 + y*y)`` instead of ``grad * (1 - y*y)``), so only the
backward graphs compiled autograd makes are wrong.

    bisect-accuracy run tests/scripts/compiled_autograd_tanh.py [--bug]
"""
import argparse

import torch
import torch._dynamo
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp
from torch import nn

aten = torch.ops.aten

EXPECTED = {"verdict": "divergent", "op": "aten.tanh_backward.default"}


def _wrong_tanh_backward(grad, y):
    return grad * (1 + y * y)  # BUG: the derivative of tanh is 1 - y*y


def plant() -> None:
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[aten.tanh_backward.default] = _wrong_tanh_backward
    inductor_decomp.fast_random_decomps.cache_clear()


class Model(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, 4)

    def forward(self, x):
        return self.down(torch.tanh(self.up(x)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bug", action="store_true")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    if args.bug:
        plant()
    torch._dynamo.config.compiled_autograd = True
    torch.manual_seed(0)
    model = Model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    @torch.compile
    def train_step(x):
        loss = model(x).square().mean()
        loss.backward()  # inside the compiled function: compiled autograd compiles the backward
        return loss

    for step in range(args.steps):
        optimizer.zero_grad()
        loss = train_step(torch.randn(8, 16))
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f} grad {model.up.weight.grad.abs().sum().item():.6f}")


if __name__ == "__main__":
    main()
