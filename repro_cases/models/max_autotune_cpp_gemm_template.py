"""Planted bug inside max-autotune's C++ GEMM template (``CppGemmTemplate``, the micro-GEMM
``cpp_CppMicroGemmFP32Vec``): the template renders its GEMM with a wrong scale, ``alpha`` =
1 + 1/64 instead of 1, so every product it computes is 1.6 % too large. ATen's GEMM is right.

The model is the transformer FFN block of ``max_autotune_frozen_clean.py``, compiled as a user who
serves it on CPU writes it: ``torch._inductor.config.freezing = True`` and
``options={"max_autotune": True, "max_autotune_gemm_backends": "CPP"}``. The template is only
chosen for a weight that is a frozen constant, so the tool must hold the weights of every copy it
compiles as the user's compile holds them. The subsystem search names the template: with
``max_autotune_gemm_backends="ATEN"`` (the workaround) the compile is right.
"""
import importlib.util
import sys
from pathlib import Path

import torch
import torch._functorch.config
import torch._inductor.compile_fx  # noqa: F401  (imports the C++ template modules in order)
import torch._inductor.config as inductor_config
from torch._inductor.codegen.cpp_gemm_template import CppGemmTemplate


def _sibling(name):
    """A case file beside this one, loaded as its own module (in sys.modules: Dynamo looks up the
    globals of the functions it traces by their module's name)."""
    spec = importlib.util.spec_from_file_location(f"_{name}", Path(__file__).with_name(f"{name}.py"))
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module


_model = _sibling("max_autotune_frozen_clean")  # the clean twin: the same model and the user's freezing, no bug
get_inputs = _model.get_inputs

WRONG_ALPHA = 1.0 + 1.0 / 64


def _render_with_wrong_alpha(render):
    def planted(self, *args, **kwargs):
        """BUG: the micro-GEMM is rendered with alpha scaled by 1 + 1/64 (it must stay as given)."""
        right = self.alpha
        self.alpha = right * WRONG_ALPHA
        try:
            return render(self, *args, **kwargs)
        finally:
            self.alpha = right

    planted.bisect_planted = True
    return planted


def plant():
    """Install the wrong template rendering (idempotent); the compile caches off (a cached clean
    entry hides it)."""
    inductor_config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    if not getattr(CppGemmTemplate.render, "bisect_planted", False):
        CppGemmTemplate.render = _render_with_wrong_alpha(CppGemmTemplate.render)


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
SUITE = "full"  # max-autotune compiles (C++ template code for every GEMM): too slow for make test
EXPECTED = {"subsystem": {"kind": "config", "name": "max_autotune_gemm_backends"},
            "verdict": "divergent", "op": "aten.addmm.default", "graph": "forward_0", "kind": "node"}


def get_model():
    torch.manual_seed(0)
    return torch.compile(_model.FFNBlock().eval(), options={"max_autotune": True, "max_autotune_gemm_backends": "CPP"})
