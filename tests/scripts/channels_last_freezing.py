"""Inference the way vision models ship on CPU: ``channels_last`` convolutions, ``eval()``,
``no_grad`` and Inductor's ``freezing`` (weights folded as constants). ``--bug``: Inductor's C++
relu compiles as x + 1 (``cpp.inject_relu_bug_TESTING_ONLY``): not in the first relu, which freezing
fuses into the convolution (a oneDNN post-op, so the planted codegen never runs and the program is
right), but in the one after pooling.

    bisect-accuracy run tests/scripts/channels_last_freezing.py [--bug]
"""
import argparse

import torch
import torch._inductor.config as inductor_config
from torch import nn

EXPECTED = {"verdict": "divergent", "op": "aten.relu.default"}


class ConvNet(nn.Module):
    def __init__(self, channels: int = 8, classes: int = 4):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv1(x)))
        x = torch.relu(self.conv2(x).mean(dim=(2, 3)))  # the pooled features' activation (the conv's fuses)
        return self.head(x)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bug", action="store_true")
    args = parser.parse_args()
    inductor_config.freezing = True
    if args.bug:
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    torch.manual_seed(0)
    model = ConvNet().eval().to(memory_format=torch.channels_last)
    compiled = torch.compile(model)
    with torch.no_grad():
        for step in range(2):
            images = torch.randn(2, 3, 16, 16).to(memory_format=torch.channels_last)
            print(f"batch {step}: {compiled(images).argmax(dim=1).tolist()}")


if __name__ == "__main__":
    main()
