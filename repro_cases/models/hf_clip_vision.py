"""Clean: HF CLIPVisionModel (tiny): patch conv, class token, quick_gelu, pre-LN, pooled output, eval."""
import torch
from transformers import CLIPVisionConfig, CLIPVisionModel

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all (from the unseen-model probe)
PLANTED = None
EXPECTED = {"verdict": "clean", "op": None, "kind": None}


def get_model():
    torch.manual_seed(0)
    config = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                              image_size=32, patch_size=8, num_channels=3)
    return CLIPVisionModel(config).eval()


def get_inputs():
    g = torch.Generator().manual_seed(1)
    return (torch.randn(2, 3, 32, 32, generator=g),)
