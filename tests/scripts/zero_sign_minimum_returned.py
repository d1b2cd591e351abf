"""Issue 37, miss (d) without the ``signbit``: compiled ``minimum(-0.0, 0.0)`` returns the other
zero and the program returns it as is. 0 ulps apart, so ``clean`` by the ulp rule; under
``--oracle bitwise`` (accepted in script mode) the sign of the zero counts and the op is named.

    bisect-accuracy run --oracle bitwise tests/scripts/zero_sign_minimum_returned.py
"""
import torch


@torch.compile
def smaller(a, b):
    return torch.minimum(a, b)


if __name__ == "__main__":
    print((1.0 / smaller(torch.tensor([-0.0]), torch.tensor([0.0]))).tolist())
