"""Issue 37, cast elision (written from its description): the program rounds to bf16 and back
before a sum; compiled code skips the round trip (Inductor keeps the value in fp32 unless
``torch._inductor.config.emulate_precision_casts = True``), so the sum differs from eager's.

    bisect-accuracy run tests/scripts/cast_elision_bf16_sum.py
"""
import torch


@torch.compile
def rounded_sum(x):
    return (x.to(torch.bfloat16).to(torch.float32) * 3.0).sum(dim=-1)


if __name__ == "__main__":
    torch.manual_seed(0)
    print(rounded_sum(torch.randn(8, 256) * 100).tolist()[:2])
