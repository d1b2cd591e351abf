"""Issue 37, cast elision (written from its description): a value past fp16's range is cast to
fp16 and back; eager overflows to inf, compiled keeps the fp32 value (the cast elided unless
``emulate_precision_casts``).

    bisect-accuracy run tests/scripts/cast_elision_fp16_overflow.py
"""
import torch


@torch.compile
def scaled(x):
    return (x * 1000.0).to(torch.float16).to(torch.float32) + 1.0


if __name__ == "__main__":
    torch.manual_seed(0)
    print(scaled(torch.randn(64) * 100).tolist()[:4])
