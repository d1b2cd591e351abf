"""Restates upstream test/inductor/test_minifier.py::test_accuracy_vs_strict_accuracy (CPU), strict mode.

Two planted C++ codegen bugs at once: relu(x) -> x + 1 and log1p(x) -> x + 1. The log1p result
only feeds a boolean mask (twice negated) that selects between two identical tensors, so the
wrong log1p changes the mask but never the output; the wrong relu changes the output.
Upstream: under the default (fp64-RMSE) accuracy check the minified repro is the relu; only
``--strict-accuracy`` (which also compares boolean intermediates) lands on the log1p.
bisect-accuracy names first the wrong op whose error reaches the output (relu, as upstream's
default) and lists the log1p beside it (reaches_output false); ``--oracle strict`` names the log1p
(minifier_relu_log1p_mask_strict.py). Inputs lie in (-0.9, 0.9): log1p is finite in eager, yet the mask differs
for x in (-0.9, 0] (eager log1p(x) <= 0, planted x + 1 > 0).
"""
import torch
import torch._inductor.config as inductor_config

DEVICES = ["cpu"]  # the log1p injection exists for the C++ backend only
PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy",
                      "triton.inject_relu_bug_TESTING_ONLY": "accuracy",
                      "cpp.inject_log1p_bug_TESTING_ONLY": "accuracy"}}
# upstream strict accuracy -> log1p
CLI_ARGS = ["--oracle", "strict"]
SUITE = "full"  # BISECT_CORPUS=all (make test time): --oracle strict is covered in-process (test_upstream_gate, test_pipeline)
EXPECTED = {"verdict": "divergent", "op": "aten.log1p.default", "graph": "forward_0", "kind": "node",
            "subsystem": {"kind": "lowering", "name": "aten.log1p.default"},
            "findings": {"aten.log1p.default": False, "aten.relu.default": True}}


def plant():
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    inductor_config.triton.inject_relu_bug_TESTING_ONLY = "accuracy"
    inductor_config.cpp.inject_log1p_bug_TESTING_ONLY = "accuracy"


plant()


def inner(x):
    y = torch.log1p(x)
    b = y > 0
    b = torch.logical_not(b)  # twice negated, as upstream: the mask reaches the where
    b = torch.logical_not(b)
    x = torch.relu(x)
    return torch.where(b, x, x)


def get_model():
    return inner


def get_inputs():
    torch.manual_seed(0)
    return (torch.rand(20) * 1.8 - 0.9,)
