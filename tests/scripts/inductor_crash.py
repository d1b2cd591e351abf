"""A script whose compiled function Inductor fails to compile. ``--planted``: Inductor's C++ relu
raises a compile error (``cpp.inject_relu_bug_TESTING_ONLY = "compile_error"``); otherwise a real
torch 2.13 crash of Inductor's C++ backend (pytorch/pytorch#196570: a mask written in place by index,
then a softmax over ``x + mask``, raises ``InductorError: KeyError: 'buf1'``).

    bisect-accuracy run tests/scripts/inductor_crash.py [--planted]
"""
import argparse

import torch
import torch._inductor.config as inductor_config


def planted(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w).sum(dim=1)


def masked_softmax(x: torch.Tensor) -> torch.Tensor:
    mask = torch.full((8, 8), -10000.0)
    mask[torch.arange(8).unsqueeze(0), torch.arange(8).unsqueeze(1)] = 0
    return torch.softmax(x + mask, dim=-1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--planted", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.planted:
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"
        print(torch.compile(planted)(torch.randn(4, 8), torch.randn(8, 8)))
        return
    print(torch.compile(masked_softmax)(torch.randn(8, 8)).sum())


if __name__ == "__main__":
    main()
