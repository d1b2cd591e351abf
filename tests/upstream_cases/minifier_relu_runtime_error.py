"""Restates upstream test/inductor/test_minifier_isolate.py::test_after_aot_cpu_runtime_error.

``cpp.inject_relu_bug_TESTING_ONLY = "runtime_error"``: the C++ relu becomes ``x; throw 1``, so
the kernel builds and then throws when it runs (upstream runs it isolated: "they crash the
process"). Expected: a crash localised to the relu alone, the error reported.
"""
import torch
import torch._inductor.config as inductor_config

DEVICES = ["cpu", "cuda"]
SUITE = "full"  # run with BISECT_CORPUS=all (make test runs a twin of it)
PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "runtime_error",
                      "triton.inject_relu_bug_TESTING_ONLY": "runtime_error"}}
EXPECTED = {"verdict": "crash", "op": "aten.relu.default", "graph": "forward_0", "kind": "node"}


def plant():
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "runtime_error"
    inductor_config.triton.inject_relu_bug_TESTING_ONLY = "runtime_error"


plant()


def inner(x):
    x = torch.relu(x)
    x = torch.cos(x)
    return x


def get_model():
    return inner


def get_inputs():
    torch.manual_seed(0)
    return (torch.randn(2, 2),)
