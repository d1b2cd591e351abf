"""Planted: Inductor's C++ codegen turns log1p(x) into x + 1 (cpp.inject_log1p_bug_TESTING_ONLY),
reached through Mish: a timm-style CSPDarknet-ish convnet (conv + BatchNorm + nn.Mish, a
cross-stage-partial block, global pool). aten.mish is decomposed by Inductor into
x * tanh(softplus(x)) and softplus into log1p(exp(x)), so the aten op to blame is
aten.mish.default (the first in the graph: stem.act); the broken lowering is log1p's, which no
captured aten graph holds.
"""
import torch
import torch._inductor.config as inductor_config
from torch import nn


def plant():
    inductor_config.cpp.inject_log1p_bug_TESTING_ONLY = "accuracy"


plant()

PLANTED = {"config": {"cpp.inject_log1p_bug_TESTING_ONLY": "accuracy"}}
DEVICES = ["cpu"]  # the log1p injection exists for the C++ backend only
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.mish.default", "kind": "node", "graph": "forward_0",
            "subsystem": {"kind": "lowering", "name": "aten.log1p.default"}}


class ConvBnMish(nn.Module):
    def __init__(self, cin, cout, kernel=3, stride=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = nn.Mish()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class CrossStage(nn.Module):
    def __init__(self, channels):
        super().__init__()
        half = channels // 2
        self.split_a = ConvBnMish(channels, half, 1)
        self.split_b = ConvBnMish(channels, half, 1)
        self.block = nn.Sequential(ConvBnMish(half, half, 1), ConvBnMish(half, half, 3))
        self.merge = ConvBnMish(channels, channels, 1)

    def forward(self, x):
        a = self.split_a(x)
        b = self.split_b(x)
        return self.merge(torch.cat([a, b + self.block(b)], dim=1))


class CSPNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = ConvBnMish(3, 16, 3, 2)
        self.stage = CrossStage(16)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(16, classes)

    def forward(self, x):
        return self.head(torch.flatten(self.pool(self.stage(self.stem(x))), 1))


def get_model():
    torch.manual_seed(0)
    model = CSPNet()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.3, 0.3)
                module.running_var.uniform_(0.5, 2.0)
    return model.eval()


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(2, 3, 16, 16, generator=generator),)
