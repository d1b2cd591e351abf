"""Restates upstream test/inductor/test_minifier.py::test_rmse_improves_over_atol (CPU twin), as a
plain function.

``x - torch.tensor(655, dtype=half) * 100`` with x = 65500 in fp16. Eager rounds 655 * 100 to
fp16 (65504) and returns 0; Inductor keeps the product in fp32 (65500) and returns 4, which is
what fp64 says (x itself is 65504 in fp16). Upstream: with the fp64 RMSE check "we report no
problem" (only a strict, fp64-less comparison calls it an AccuracyError). Upstream patches
``joint_graph_constant_folding = False``; so does plant(). Expected: clean.
"""
import torch
import torch._inductor.config as inductor_config

DEVICES = ["cpu", "cuda"]
PLANTED = {"config": {"joint_graph_constant_folding": False}}
EXPECTED = {"verdict": "clean", "op": None}


def plant():
    inductor_config.joint_graph_constant_folding = False


plant()


def inner(x):
    return x - torch.tensor(655, dtype=torch.half, device=x.device) * 100


def get_model():
    return inner


def get_inputs():
    return (torch.tensor(655 * 100, dtype=torch.half),)
