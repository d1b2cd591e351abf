"""A script whose compiled kernel kills the process (issue 37: a tiled reduction's tail store that
writes out of bounds took the tool down with ``malloc_consolidate(): invalid chunk size``, exit -6).
Planted: Inductor's C++ relu throws inside the kernel's OpenMP region
(``cpp.inject_relu_bug_TESTING_ONLY = "runtime_error"``), so ``std::terminate`` aborts the process
(SIGABRT) as heap corruption does. ``--clean``: the same program without the bug.

    bisect-accuracy run tests/scripts/native_crash.py [--clean]
"""
import argparse

import torch
import torch._inductor.config as inductor_config


def step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(torch.tanh(x @ w)).sum(dim=1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clean", action="store_true")
    args = parser.parse_args()
    if not args.clean:
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "runtime_error"
    torch.manual_seed(0)
    x, w = torch.randn(64, 256), torch.randn(256, 512)
    print(torch.compile(step)(x, w).sum())


if __name__ == "__main__":
    main()
