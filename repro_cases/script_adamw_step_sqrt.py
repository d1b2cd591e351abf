"""A training script whose optimizer step is compiled (``torch.compile(optimizer.step)``, foreach
AdamW), with a planted Inductor bug: the C++ codegen of sqrt adds 1e-3 (``plant()`` patches
``CppOverrides.sqrt`` and ``CppVecOverrides.sqrt``), so the compiled step's ``_foreach_sqrt`` of
the second moments (and of the bias correction) is wrong.

The compiled step's graph has no outputs: it writes the parameters and the optimizer state, which
Dynamo holds as graph attributes. Script mode compares every tensor it writes (eager and fp64 on
copies, the compiled step on the program's own) and names the foreach op:

    bisect-accuracy run repro_cases/script_adamw_step_sqrt.py --steps 3
"""
import argparse

import torch
import torch._functorch.config
import torch._inductor.config
from torch import nn
from torch.nn import functional as F
from torch._inductor.codegen import cpp as inductor_cpp

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
SUITE = "ci"
EXPECTED = {"verdict": "divergent", "op": "aten._foreach_sqrt.default", "graph": "forward_0", "kind": "node",
            "written": "parameter up.weight"}


def sqrt(x):
    # BUG: should be std::sqrt(x)
    return f"(std::sqrt({x}) + decltype({x})(1e-3))"


def vectorized_sqrt(x):
    # BUG: should be x.sqrt()
    return f"({x}.sqrt() + decltype({x})(1e-3))"


vectorized_sqrt.__name__ = "sqrt"  # Inductor's vectorized codegen finds the scalar twin by this name


def plant():
    """Install the wrong sqrt codegen (idempotent); the compile caches off (they do not see it)."""
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_cpp.CppOverrides.sqrt = staticmethod(sqrt)
    inductor_cpp.CppVecOverrides.sqrt = staticmethod(vectorized_sqrt)


plant()


class Model(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, 4)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, foreach=True)
    step = torch.compile(optimizer.step)
    for index in range(args.steps):
        inputs, targets = torch.randn(8, 16), torch.randn(8, 4)
        loss = F.mse_loss(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        step()
        print(f"step {index} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
