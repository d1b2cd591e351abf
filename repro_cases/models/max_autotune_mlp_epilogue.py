"""Planted bug that lives only under ``mode="max-autotune"``: a GEMM epilogue that adds the bias
twice. ``get_model()`` returns ``torch.compile(model, mode="max-autotune")``, as a user who tunes
their GEMMs writes it.

``plant()`` installs a post-grad pass that, only while ``torch._inductor.config.max_autotune`` is on
(as max-autotune's GEMM template choice is), turns ``addmm(bias, x, w)`` into
``addmm(bias, x, w, beta=2)``: the bias epilogue is applied twice. (A bug inside the C++ GEMM
template's own epilogue would be the real thing; on this CPU max-autotune keeps ATen's GEMM for
these sizes, so the plant goes where every max-autotune compile passes.) A compile in the default
mode is right: the tool must compile as the user did to see it. The model is a small MLP block
(up-projection, GELU, down-projection, residual).
"""
import torch
import torch._functorch.config
import torch._inductor.config as inductor_config
from torch import nn
from torch._inductor.custom_graph_pass import CustomGraphPass

aten = torch.ops.aten


class DoubledBiasEpilogue(CustomGraphPass):
    """Under max-autotune only: addmm's bias epilogue applied twice (BUG: beta must stay 1)."""

    def __call__(self, graph: torch.fx.Graph) -> None:
        if not inductor_config.max_autotune:
            return
        for node in graph.nodes:
            if node.op == "call_function" and node.target is aten.addmm.default:
                node.kwargs = {**node.kwargs, "beta": 2}
        graph.lint()

    def uuid(self):
        return "bisect-accuracy-repro-cases/max_autotune_mlp_epilogue/doubled-bias/v1"


def plant():
    """Install the wrong pass (idempotent); the compile caches off (a cached clean entry hides it)."""
    inductor_config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_config.post_grad_custom_post_pass = DoubledBiasEpilogue()


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
SUITE = "full"  # max-autotune compiles benchmark every GEMM choice: too slow for make test
EXPECTED = {"subsystem": {"kind": "pass", "name": "post_grad_custom_post_pass"},
            "verdict": "divergent", "op": "aten.addmm.default", "graph": "forward_0", "kind": "node"}


class MLPBlock(nn.Module):
    def __init__(self, width: int = 32, hidden: int = 64):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


def get_model():
    torch.manual_seed(0)
    return torch.compile(MLPBlock().eval(), mode="max-autotune")


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(16, 32),)
