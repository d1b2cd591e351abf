"""HF GPT-2 (tiny, random init) that get_model() returns as ``torch.compile(model, dynamic=True)``,
with the same planted dynamic-only tanh lowering as hf_gpt2_dynamic_tanh_lowering (wrong only
when its input has a symbolic size of at least 48; gelu_new reaches aten.tanh). No dim is marked:
the job's ``dynamic=True`` makes every size symbolic from the first compile, so our capture and
model check must compile with it too (they compiled statically and called this model clean).
"""
import importlib.util
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("_gpt2_dynamic_tanh", Path(__file__).with_name("hf_gpt2_dynamic_tanh_lowering.py"))
_planted = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_planted)  # plants the bug


def plant():
    _planted.plant()


PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu"]
SUITE = "full"
EXPECTED = {"verdict": "divergent", "op": "aten.tanh.default", "kind": "node", "graph": "forward_1",
            "shapes": "dynamic-only", "sizes": {"failing": [[48, 100]]}}


def get_model():
    return torch.compile(_planted.get_model(), dynamic=True)


def get_inputs():
    # the plant keys on the first symbolic size: under dynamic=True that is the batch (at least 48 fails)
    return (torch.randint(0, 100, (50, 20), generator=torch.Generator().manual_seed(1)),)
