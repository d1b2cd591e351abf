"""Planted dynamic-only codegen bug: the vectorised C++ tail loop of exp is wrong only in kernels
compiled with symbolic sizes (its tail length is an expression of the batch size; a static compile
has an integer tail, or none), in a small conv net whose SiLU activations Inductor computes with
exp, batch dim marked dynamic. The tail runs only at batch sizes where the element count is not a
multiple of the vector width, so the failing sizes are not one interval. The tool must name the
SiLU (aten.silu.default) as dynamic-only, with the failing batch sizes, and a repro at the
smallest that compiles with the same symbolic shapes."""
import sympy
import torch
import torch._functorch.config
import torch._inductor.config
from torch import nn


def plant():
    from torch._inductor.codegen import cpp
    from torch._inductor.virtualized import V
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    original = cpp.CppVecOverrides.exp
    if getattr(original, "_planted", False):
        return

    def wrong_exp(x):
        tail = getattr(V.kernel, "tail_size", None)
        if isinstance(tail, sympy.Expr) and tail.free_symbols:  # a symbolic tail loop only
            return f"({original(x)} * decltype({x})(0.75))"  # BUG
        return original(x)

    wrong_exp._planted = True
    cpp.CppVecOverrides.exp = staticmethod(wrong_exp)


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu"]
SUITE = "full"
# The head's SiLU runs over batch*10 elements: the vector tail (10*b mod 8 elements) runs at odd b.
EXPECTED = {"verdict": "divergent", "op": "aten.silu.default", "kind": "node", "graph": "forward_0", "shapes": "dynamic-only",
            "sizes": {"failing": [[3, 3], [5, 5], [7, 7], [9, 9], [11, 11], [13, 13], [15, 15]]}}


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.SiLU(),
            nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.BatchNorm2d(6), nn.SiLU(),
        )
        self.head = nn.Sequential(nn.Linear(6, 10), nn.SiLU(), nn.Linear(10, 5))  # SiLU over batch*10 elements

    def forward(self, x):
        return self.head(self.features(x).mean((2, 3)))


def get_model():
    torch.manual_seed(0)
    return ConvNet().eval()


def get_inputs():
    x = torch.randn(5, 3, 5, 5, generator=torch.Generator().manual_seed(1))
    torch._dynamo.mark_dynamic(x, 0)
    return (x,)
