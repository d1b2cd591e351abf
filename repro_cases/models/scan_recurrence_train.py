"""scan_recurrence trained (a loss, gradients): torch 2.13 on CPU compiles scan under autograd, and
its Inductor-compiled backward computes a WRONG gradient for the weight the combine_fn closes over
(rec.weight: max error 1.96 against fp64, its largest value 0.82; eager, aot_eager and
aot_eager_decomp_partition are right, and so is Inductor's forward). A real upstream bug, not planted.

The tool must not call it clean: it says ``not_reproducible`` (the model-level check, the user's own
torch.compile, diverges; our captured graphs, traced before Inductor's decompositions and partitioned
by AOT's default partitioner, compile right one by one, so no graph is named), and names the
subsystem (donated buffers, below). Still wrong in torch 2.14.1; when torch fixes the bug this case
turns clean and its EXPECTED must change.
"""
import importlib.util
import sys
from pathlib import Path

import torch

torch._dynamo.config.capture_scalar_outputs = True

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
# The model-level subsystem search names AOT Autograd's donated buffers: with
# torch._functorch.config.donated_buffer = False the compiled model matches (pytorch#153679: Inductor
# lowers the scan body as a subgraph that inherits the outer graph's donated-buffer indices).
EXPECTED = {"verdict": "not_reproducible", "subsystem": {"kind": "config", "name": "functorch.donated_buffer"}}


def _sibling(name):
    """A case file beside this one, loaded as its own module (in sys.modules: Dynamo looks up the
    globals of the functions it traces by their module's name)."""
    spec = importlib.util.spec_from_file_location(f"_{name}", Path(__file__).with_name(f"{name}.py"))
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    spec.loader.exec_module(module)
    return module


_model = _sibling("scan_recurrence")


def get_model():
    return _model.get_model().train()


def get_inputs():
    return _model.get_inputs()


def loss_fn(output):
    return output.square().mean()
