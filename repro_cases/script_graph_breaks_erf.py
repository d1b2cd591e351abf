"""A plain script split into many Dynamo graphs by ``.item()`` and data-dependent branches (no bug).

Each layer computes a gate with ``erf``; the gate's largest value, read with ``.item()``, picks a
branch, and the gate also scales the next layer's input. So the gate is an output of its graph (it
feeds ``.item()`` and the next graph), not a result of the program. Inductor's vectorised ``erf``
(Sleef) is ~10 ulps RMS from fp64 on these small arguments where eager's libm is under one: within noise
of what the program returns (its final sum), a difference on an interior value. Issue 36: the tool
reported ``divergent`` on the gate, as if it were the program's result.
"""
import sys

import torch

PLANTED = {"config": {}}
EXPECTED = {"verdict": "clean", "op": None}
LAYERS = 6


def plant():
    """No bug."""


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
