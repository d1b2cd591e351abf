"""A training script whose compiled forward registers a tensor hook on an intermediate, with
module and parameter hooks around it. ``--bug``: Inductor's C++ relu compiles as x + 1
(``cpp.inject_relu_bug_TESTING_ONLY``), next to the hook.

    bisect-accuracy run tests/scripts/hooks_relu.py [--bug]
"""
import argparse

import torch
import torch._inductor.config as inductor_config
from torch import nn

EXPECTED = {"verdict": "divergent", "op": "aten.relu.default"}



def halve(grad):
    return grad * 0.5  # traceable: Dynamo keeps its registration in the graph (a register_hook node)


class Model(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, 4)

    def forward(self, x):
        hidden = self.up(x)
        hidden.register_hook(halve)  # a tensor hook on an intermediate
        return self.down(torch.relu(hidden))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bug", action="store_true")
    parser.add_argument("--steps", type=int, default=2)
    args = parser.parse_args()
    if args.bug:
        inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    torch.manual_seed(0)
    model = Model()
    model.down.register_forward_hook(lambda module, inputs, output: None)  # a module hook
    model.up.weight.register_hook(lambda grad: grad * 1.0)  # a parameter hook
    compiled = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(args.steps):
        loss = compiled(torch.randn(8, 16)).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f} grad {model.up.weight.grad.abs().sum().item():.6f}")


if __name__ == "__main__":
    main()
