"""Planted bug inside the body of a while_loop: Inductor's lowering of aten.sin computes
sin(x) * 1.05. The only sin of the model is in the loop body (h <- h + 0.5 * sin(h W^T + b)); the
graph shows one while_loop node. The tool must judge it as one op, then name aten.sin.default
inside its body_fn (traced on the first iteration's values).
"""
import importlib.util
import sys
from pathlib import Path


def _sibling(name):
    """A case file beside this one, loaded as its own module (in sys.modules: Dynamo looks up the
    globals of the functions it traces by their module's name)."""
    spec = importlib.util.spec_from_file_location(f"_{name}", Path(__file__).with_name(f"{name}.py"))
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module


_wrong_sin = _sibling("moe_cond_sin_lowering")  # its plant(): the wrong aten.sin lowering
_model = _sibling("while_loop_refine")  # the clean twin: the same model, no bug


def plant():
    _wrong_sin.plant()


plant()

PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "divergent", "op": "aten.sin.default", "kind": "node", "graph": "forward_0",
            "inside": {"hop": "while_loop", "subgraph": "body_fn"}}


def get_model():
    return _model.get_model()


def get_inputs():
    return _model.get_inputs()
