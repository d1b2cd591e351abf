"""CPU mixed-precision training as the AMP docs write it: the compiled model's forward under
``torch.autocast("cpu", dtype=torch.bfloat16)``, the loss scaled by ``torch.amp.GradScaler("cpu")``
(``scale(loss).backward()``, ``step``, ``update``). bf16 rounding is no bug: a clean run is clean.
``--bug``: Inductor's C++ relu compiles as x + 1 (``cpp.inject_relu_bug_TESTING_ONLY``).

    bisect-accuracy run tests/scripts/amp_bf16_gradscaler.py [--bug]
"""
import argparse

import torch
import torch._inductor.config as inductor_config
from torch import nn
from torch.nn import functional as F

EXPECTED = {"verdict": "divergent", "op": "aten.relu.default"}


class Model(nn.Module):
    def __init__(self, width: int = 32, classes: int = 5):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.norm = nn.LayerNorm(2 * width)
        self.down = nn.Linear(2 * width, classes)

    def forward(self, x):
        return self.down(torch.relu(self.norm(self.up(x))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bug", action="store_true")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    if args.bug:
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    torch.manual_seed(0)
    model = Model()
    compiled = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    for step in range(args.steps):
        inputs, targets = torch.randn(16, 32), torch.randint(0, 5, (16,))
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(compiled(inputs), targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        print(f"step {step} loss {loss.item():.3f} scale {scaler.get_scale():.0f}")


if __name__ == "__main__":
    main()
