"""A plain script split into many Dynamo graphs by ``.item()`` and data-dependent branches (no bug).

Each layer computes a gate with ``erf``; the gate's largest value, read with ``.item()``, picks a
branch, and the gate also scales the next layer's input. So the gate is an output of its graph (it
feeds ``.item()`` and the next graph), not a result of the program. Issue 36: the tool reported
``divergent`` on the gate, as if it were the program's result.

Decided with evidence (torch 2.13.0 CPU, against fp64; the conflict with pytorch#198183,
``tests/real_reports/issue_198183_erf_near_zero.py``): Inductor's vectorised float32 ``erf`` is
one kernel in both, with an absolute error of ~2e-7 to 5e-7 at every argument (at most 41 of its
own ulps on [0.1, 1), thousands near 0), where eager's is under one ulp. On this gate (RMS 0.21)
that is 12.7 ulps RMS, max 37 (eager 0.45, max 1.2): a real kernel error, not rounding noise (erf
does not cancel), which the per-op rule would name; but what each call returns is judged at the
end-to-end tolerance (4x eager + 64 ulps RMS) and passes it, and the program's result is 1.15x
eager's error. So ``clean``, with ``aten.erf.default`` listed as a model file lists it: the call's
gate is clearly above eager's error at its noise floor (within the end-to-end tolerance), so the
session's below-tolerance look (once per graph: the engine's per-node check, two compiles) names
the op wrong alone, under the clean verdict.
"""
import sys

import torch

PLANTED = {"config": {}}
EXPECTED = {"verdict": "clean", "op": None, "listed": ["aten.erf.default"]}
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
