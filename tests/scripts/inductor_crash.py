"""A script whose compiled function Inductor fails to compile. ``--planted``: Inductor's C++ relu
raises a compile error (``cpp.inject_relu_bug_TESTING_ONLY = "compile_error"``); otherwise the
real torch 2.13 crash the issue names: an in-place max-norm rescale of parameters and an EMA
``lerp_`` in one compiled function.

    bisect-accuracy run tests/scripts/inductor_crash.py [--planted]
"""
import argparse

import torch
import torch._inductor.config as inductor_config


def planted(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(x @ w).sum(dim=1)


@torch.no_grad()
def renorm_and_ema(params: list, ema: list, max_norm: float = 1.0, decay: float = 0.99) -> None:
    for p, e in zip(params, ema):
        norm = p.norm()
        p.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
        e.lerp_(p, 1 - decay)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--planted", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.planted:
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"
        print(torch.compile(planted)(torch.randn(4, 8), torch.randn(8, 8)))
        return
    params = [torch.randn(8, 8) * 3, torch.randn(8) * 3]
    ema = [p.clone() for p in params]
    torch.compile(renorm_and_ema)(params, ema)
    print(sum(float(e.sum()) for e in ema))


if __name__ == "__main__":
    main()
