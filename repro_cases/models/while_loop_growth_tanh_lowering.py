"""Planted bug that only a later iteration of a while_loop reaches: Inductor's lowering of
aten.tanh computes 0.9 tanh(x) where |x| > 2 (right below). The loop's state grows, so its body's
tanh reads values above 2 only from iteration 4 on (counting from 0): on the first iteration's
carry every op of the body is right. The tool must judge the while_loop node as one op, then find
the first iteration whose carry makes the body wrong and name aten.tanh.default inside its body_fn
on that carry (the iteration said), with a repro on that iteration's values.
"""
import importlib.util
import sys
from pathlib import Path

import torch
import torch._functorch.config
import torch._inductor.config

aten = torch.ops.aten


def _sibling(name):
    """A case file beside this one, loaded as its own module (in sys.modules: Dynamo looks up the
    globals of the functions it traces by their module's name)."""
    spec = importlib.util.spec_from_file_location(f"_{name}", Path(__file__).with_name(f"{name}.py"))
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module


_model = _sibling("while_loop_growth")  # the clean twin: the same model, no bug


def plant():
    """Install the bug: a wrong entry for aten.tanh in Inductor's lowering table, wrong only
    where |x| > 2 (idempotent)."""
    from torch._inductor import lowering
    from torch._inductor.ir import Pointwise
    from torch._inductor.virtualized import ops
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    original = lowering.lowerings[aten.tanh.default]
    if getattr(original, "_planted", False):
        return

    def wrong_tanh(x):
        loader, read = original(x).make_loader(), x.make_loader()
        dtype = x.get_dtype()

        def inner_fn(index):
            value = loader(index)
            large = ops.gt(ops.abs(read(index)), ops.constant(2.0, dtype))
            return ops.where(large, ops.mul(value, ops.constant(0.9, dtype)), value)  # BUG above |x| > 2

        return Pointwise.create(device=x.get_device(), dtype=dtype, ranges=list(x.get_size()), inner_fn=inner_fn)

    wrong_tanh._planted = True
    lowering.lowerings[aten.tanh.default] = wrong_tanh


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.tanh.default", "kind": "node", "graph": "forward_0",
            "inside": {"hop": "while_loop", "subgraph": "body_fn", "iteration": 4}}


def get_model():
    return _model.get_model()


def get_inputs():
    return _model.get_inputs()
