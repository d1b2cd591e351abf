"""Issue 37 miss (d), written from its description: ``minimum(-0.0, 0.0)`` returns the other zero
in compiled code on torch 2.13 (one element: Inductor's scalar ``min_propagate_nan``), and the
program observes the sign (``signbit``).

    bisect-accuracy run tests/scripts/zero_sign_minimum.py
"""
import torch


@torch.compile
def negative(a, b):
    return torch.signbit(torch.minimum(a, b))


if __name__ == "__main__":
    print(negative(torch.tensor([-0.0]), torch.tensor([0.0])).tolist())
