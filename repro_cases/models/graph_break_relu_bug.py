"""Planted: the C++ relu bug (cpp.inject_relu_bug_TESTING_ONLY) in the graph-breaking model of
graph_break_eval.py: its only ReLU sits in the decoder, after both graph breaks (the .item()
and the print), so the culprit is in the last Dynamo graph, not the first.
"""
import torch
from torch import nn
import torch._inductor.config as inductor_config


def plant():
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    inductor_config.triton.inject_relu_bug_TESTING_ONLY = "accuracy"


plant()

PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy", "triton.inject_relu_bug_TESTING_ONLY": "accuracy"}}
DEVICES = ["cpu", "cuda"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.relu.default", "kind": "node", "graph": "forward_2",
            "subsystem": {"kind": "lowering", "name": "aten.relu.default"}}


class Normalised(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, width), nn.GELU(), nn.Linear(width, width))
        self.decoder = nn.Sequential(nn.LayerNorm(width), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 4))
        self.calls = 0

    def forward(self, x):
        h = self.encoder(x)
        scale = h.abs().max().item()  # graph break (a Python float)
        h = h / (scale + 1e-3)
        print(f"[model] scale={scale:.3f}")  # graph break
        return self.decoder(h)


def get_model():
    torch.manual_seed(0)
    return Normalised().eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(4, 16, generator=generator),)
