"""Planted bug: a custom Inductor post-grad pass that "fuses" ``mul`` + ``add`` wrongly.

``plant()`` installs ``torch._inductor.config.post_grad_custom_post_pass``: for every
``aten.add.Tensor`` whose first input is produced by an ``aten.mul.Tensor`` (an FMA-style
pattern in the post-grad graph), the add is turned into a ``sub``. Each of the two ops compiled on
its own is right (neither sees the other), only the pair compiled together is wrong. The model is
a FiLM-style conditioned MLP: the pattern is the explicit ``x * gamma + beta`` in
``FiLM.forward``, the only multiply feeding an add in the model.
"""
import torch
import torch._inductor.config as inductor_config
from torch import nn
from torch._inductor.custom_graph_pass import CustomGraphPass

aten = torch.ops.aten


class MulAddFusionPass(CustomGraphPass):
    """Rewrites add(mul(a, b), c) as sub(mul(a, b), c) (BUG: should keep the add)."""

    def __call__(self, graph: torch.fx.Graph) -> None:
        for node in graph.nodes:
            if node.op != "call_function" or node.target is not aten.add.Tensor:
                continue
            first = node.args[0]
            if isinstance(first, torch.fx.Node) and first.op == "call_function" and first.target is aten.mul.Tensor:
                node.target = aten.sub.Tensor
        graph.lint()

    def uuid(self):
        return "bisect-accuracy-repro-cases/fused_pattern_pass/mul-add-to-sub/v1"


def plant():
    """Install the wrong post-grad pass (idempotent)."""
    inductor_config.post_grad_custom_post_pass = MulAddFusionPass()


plant()

DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
PLANTED = {"config": {}}  # plant() installs the pass object (not renderable as config code)

SUITE = "full"  # run by BISECT_CORPUS=all; make test covers its path with a cheaper case (CI time limit)
EXPECTED = {"subsystem": {"kind": "pass", "name": "post_grad_custom_post_pass"}, 
    "verdict": "divergent",
    "op": "aten.add.Tensor",  # the window's node whose own output departs (the add made a sub)
    "graph": "forward_0",
    "kind": "window",
    "ops": ["aten.mul.Tensor", "aten.add.Tensor"],
}


class FiLM(nn.Module):
    """Feature-wise affine conditioning: x * gamma + beta, gamma and beta from the condition."""

    def __init__(self, cond: int, width: int):
        super().__init__()
        self.to_gamma = nn.Linear(cond, width)
        self.to_beta = nn.Linear(cond, width)

    def forward(self, x, c):
        return x * self.to_gamma(c) + self.to_beta(c)


class ConditionedMLP(nn.Module):
    def __init__(self, features: int = 10, cond: int = 4, width: int = 16, outputs: int = 2):
        super().__init__()
        self.inp = nn.Linear(features, width)
        self.film = FiLM(cond, width)
        self.out = nn.Linear(width, outputs)

    def forward(self, x, c):
        return self.out(torch.tanh(self.film(torch.tanh(self.inp(x)), c)))


def get_model():
    torch.manual_seed(0)
    return ConditionedMLP().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 10), torch.randn(8, 4))
