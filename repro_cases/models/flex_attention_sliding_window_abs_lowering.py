"""Planted bug inside a flex attention mask_mod: Inductor's lowering of aten.abs computes
abs(x) + 1 (on the int32 index difference, the window shrinks by one). The only abs of the model
is in the sliding-window mask_mod |q_idx - kv_idx| <= 48, which Inductor lowers into its C++ flex
attention template; its BlockMask is made outside the compiled forward, so the graph shows one
flex_attention node. The tool must judge that node as one op, then name aten.abs.default inside
its mask_mod.
"""
import importlib.util
import sys
from pathlib import Path

import torch
import torch._functorch.config
import torch._inductor.config


def _sibling(name):
    """A case file beside this one, loaded as its own module (in sys.modules: Dynamo looks up the
    globals of the functions it traces by their module's name)."""
    spec = importlib.util.spec_from_file_location(f"_{name}", Path(__file__).with_name(f"{name}.py"))
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module


aten = torch.ops.aten


def plant():
    """Install the bug: a wrong entry for aten.abs in Inductor's lowering table (idempotent)."""
    from torch._inductor import lowering
    from torch._inductor.ir import Pointwise
    from torch._inductor.virtualized import ops
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    original = lowering.lowerings[aten.abs.default]
    if getattr(original, "_planted", False):
        return

    def wrong_abs(x):
        loader = original(x).make_loader()
        dtype = x.get_dtype()
        return Pointwise.create(device=x.get_device(), dtype=dtype, ranges=list(x.get_size()),
                                inner_fn=lambda index: ops.add(loader(index), ops.constant(1, dtype)))  # BUG

    wrong_abs._planted = True
    lowering.lowerings[aten.abs.default] = wrong_abs


plant()

_model = _sibling("flex_attention_sliding_window")  # the clean twin: the same model, no bug

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.abs.default", "kind": "node", "graph": "forward_0",
            "inside": {"hop": "flex_attention", "subgraph": "mask_mod"}}


def get_model():
    return _model.get_model()


def get_inputs():
    return _model.get_inputs()
