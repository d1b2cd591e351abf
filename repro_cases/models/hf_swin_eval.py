"""Clean: HF SwinModel (tiny): shifted windows (torch.roll), window attention with relative position
bias and the shift mask, patch merging, eval."""
import torch
from transformers import SwinConfig, SwinModel

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def get_model():
    torch.manual_seed(0)
    config = SwinConfig(image_size=32, patch_size=4, num_channels=3, embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                        window_size=4, mlp_ratio=2.0)
    return SwinModel(config).eval()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    return (torch.randn(2, 3, 32, 32, generator=g),)
