"""Issue 37 miss (b), written from its description: an int64 ``arange(n) * 1e9`` made inside the
compiled function wraps at 2^31 in compiled code on torch 2.13 (Inductor's ``iota`` lowering
computes the index in 32 bits), called at two lengths (automatic dynamic shapes).

    bisect-accuracy run tests/scripts/int64_arange_wrap.py
"""
import torch


@torch.compile
def stamps(x):
    return x + torch.arange(x.shape[0]) * 1000000000


if __name__ == "__main__":
    for n in (8, 12):
        print(n, stamps(torch.zeros(n, dtype=torch.int64)).tolist())
