"""Batches of several sizes, nothing marked dynamic: the job's torch.compile compiles the first
batch size statically and, when the second size arrives, recompiles with the batch dim symbolic
(Dynamo's automatic dynamic shapes), which then serves every later batch. The planted tanh
lowering of dynamic_tanh_bug is wrong only in symbolic kernels at sizes of at least 12: the batch
scan sees batch 1 (size 20) diverge, and the search must run on it as the job did, symbolically
(the dims whose size changed among the batches scanned are marked dynamic for our capture).
"""
import importlib.util
from pathlib import Path

import torch

_spec = importlib.util.spec_from_file_location("_dynamic_tanh_bug", Path(__file__).parents[1] / "dynamic_tanh_bug.py")
_planted = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_planted)  # plants the bug


def plant():
    _planted.plant()


PLANTED = {"config": {}, "also_sets": {"fx_graph_cache": False, "functorch.enable_autograd_cache": False}}
DEVICES = ["cpu"]
SUITE = "full"
EXPECTED = {"verdict": "divergent", "op": "aten.tanh.default", "kind": "node", "graph": "forward_0",
            "shapes": "dynamic-only"}


def get_model():
    return _planted.get_model()


def get_inputs():
    return (torch.randn(13, 8, generator=torch.Generator().manual_seed(1)),)


def get_batches():
    generator = torch.Generator().manual_seed(2)
    return [(torch.randn(13, 8, generator=generator),), (torch.randn(20, 8, generator=generator),),
            (torch.randn(20, 8, generator=generator),)]
