"""The AOTInductor twin of ``script_aoti_attention.py`` with a planted Inductor bug: the C++ codegen
of ``exp`` (scalar and vectorized kernels, ``CppOverrides.exp`` / ``CppVecOverrides.exp``) adds
0.01 to its result, so the packaged block's attention softmax is wrong (the only exp in the block):
the causally masked positions get weight too.
Script mode checks the package against the exported graph, names ``aten._softmax.default`` and writes
a repro that exports the op and compiles it through AOTInductor:

    bisect-accuracy run repro_cases/script_aoti_attention_exp.py
"""
import importlib.util
import os

import torch
import torch._functorch.config
import torch._inductor.config
from torch._inductor.codegen import cpp as inductor_cpp

_spec = importlib.util.spec_from_file_location(
    "_script_aoti_attention", os.path.join(os.path.dirname(os.path.abspath(__file__)), "script_aoti_attention.py"))
_clean = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_clean)

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
SUITE = "full"  # two AOTInductor compiles plus the repro's (about a minute on two cores)
EXPECTED = {"verdict": "divergent", "op": "aten._softmax.default", "graph": "forward_0", "kind": "node",
            "backend": "aot_inductor"}


def exp(x):
    # BUG: should be std::exp(x)
    return f"(std::exp({x}) + decltype({x})(0.01))"


def vectorized_exp(x):
    # BUG: should be x.exp()
    return f"({x}.exp() + decltype({x})(0.01))"


vectorized_exp.__name__ = "exp"


def plant():
    """Install the wrong exp codegen (idempotent); the compile caches off (they do not see it)."""
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    inductor_cpp.CppOverrides.exp = staticmethod(exp)
    inductor_cpp.CppVecOverrides.exp = staticmethod(vectorized_exp)


plant()

if __name__ == "__main__":
    _clean.main()
