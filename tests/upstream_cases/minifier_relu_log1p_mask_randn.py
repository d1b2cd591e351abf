"""Restates upstream test/inductor/test_minifier.py::test_accuracy_vs_strict_accuracy (CPU) with
upstream's own inputs, ``torch.randn(20)``.

As ``minifier_relu_log1p_mask.py``, but some inputs are below -1: eager's log1p makes NaN there.
That NaN only decides a mask (NaN > 0 is False) choosing between two identical tensors, so the
model's output is finite and eager is right; the divergence of the output is the planted relu.
Upstream (default accuracy) minifies to the relu.
"""
import torch
import torch._inductor.config as inductor_config

SUITE = "full"  # BISECT_CORPUS=all: minifier_relu_log1p_mask_strict covers the same graph in make test
DEVICES = ["cpu"]
PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy",
                      "triton.inject_relu_bug_TESTING_ONLY": "accuracy",
                      "cpp.inject_log1p_bug_TESTING_ONLY": "accuracy"}}
EXPECTED = {"verdict": "divergent", "op": "aten.relu.default", "graph": "forward_0", "kind": "node",
            "subsystem": {"kind": "lowering", "name": "aten.relu.default"},
            "findings": {"aten.log1p.default": False, "aten.relu.default": True}}


def plant():
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    inductor_config.triton.inject_relu_bug_TESTING_ONLY = "accuracy"
    inductor_config.cpp.inject_log1p_bug_TESTING_ONLY = "accuracy"


plant()


def inner(x):
    y = torch.log1p(x)
    b = y > 0
    b = torch.logical_not(b)
    b = torch.logical_not(b)
    x = torch.relu(x)
    return torch.where(b, x, x)


def get_model():
    return inner


def get_inputs():
    torch.manual_seed(0)
    x = torch.randn(20)
    assert bool((x < -1).any()), "the scenario needs an input below -1 (eager log1p NaN)"
    return (x,)
