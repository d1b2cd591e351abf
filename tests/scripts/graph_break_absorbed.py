"""A graph break whose first graph's output only feeds the second (issue 36, item 3). Planted in the
program's process: Inductor's ``aten.sigmoid.default`` decomposed 1 % high (beyond upstream's
``same``, not material). By default the second graph compares the gate with 2.0, far from every
value it takes: the error is absorbed, the program's result is exact, the run ``clean`` with the
call listed as absorbed (and its op named). ``--reach``: the second graph multiplies by the gate,
the error reaches the result: ``divergent``, the sigmoid named.

    bisect-accuracy run tests/scripts/graph_break_absorbed.py --level 3 [--reach]
"""
import argparse

import torch
import torch._functorch.config
import torch._inductor.config
import torch._inductor.decomposition as inductor_decomp

EXPECTED = {"verdict": "divergent", "op": "aten.sigmoid.default"}  # --reach; without it: clean, absorbed


HIGH = [1.01]  # --high: the planted factor (1.0002: beyond the ulp rule, within upstream's same)


def _sigmoid_high(x):
    return HIGH[0] / (1 + torch.exp(-x))  # BUG: 1 % high


def plant() -> None:
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_decomp.decompositions[torch.ops.aten.sigmoid.default] = _sigmoid_high
    inductor_decomp.fast_random_decomps.cache_clear()


def layer(x: torch.Tensor, reach: bool) -> torch.Tensor:
    gate = torch.sigmoid(x) * 4  # in (2.9, 3.8)
    torch._dynamo.graph_break()  # the gate: an output of the first graph, an input of the second
    return gate * x if reach else torch.where(gate > 2.0, x, -x)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reach", action="store_true")
    parser.add_argument("--high", type=float, default=1.01)
    args = parser.parse_args()
    HIGH[0] = args.high
    plant()
    x = torch.linspace(1, 3, 64).reshape(8, 8)
    result = torch.compile(layer)(x, args.reach)
    print(f"result {result.sum().item():.4f}")


if __name__ == "__main__":
    main()
