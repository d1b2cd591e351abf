"""Issue 37, cast elision (written from its description): a bf16 round trip feeding a comparison;
compiled code skips the rounding (intended unless ``emulate_precision_casts``), so elements near
the threshold land on the other side.

    bisect-accuracy run tests/scripts/cast_elision_bf16_compare.py
"""
import torch


@torch.compile
def above(x, threshold):
    return (x.to(torch.bfloat16).to(torch.float32) > threshold).float()


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(4096)
    print(above(x, x + 1e-4).sum().item())
