"""CPU equivalent of upstream test_compiler_bisector.py::test_bad_lowering.

The planted relu codegen bug (``cpp.inject_relu_bug_TESTING_ONLY``); upstream expects the
``lowerings`` subsystem with relu in its debug info.
"""
import torch
import torch._inductor.config as inductor_config

DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
SUITE = "full"  # run with BISECT_CORPUS=all: relu_bug.py checks the same lowering bug in make test
PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy", "triton.inject_relu_bug_TESTING_ONLY": "accuracy"}}
EXPECTED = {
    "verdict": "divergent", "op": "aten.relu.default", "graph": "forward_0", "kind": "node",
    "subsystem": {"kind": "lowering", "name": "aten.relu.default"},
}


def plant():
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    inductor_config.triton.inject_relu_bug_TESTING_ONLY = "accuracy"  # the same bug on GPUs


plant()


def my_func(x):
    return ((x * -1) - 0.01).relu()


def get_model():
    return my_func


def get_inputs():
    torch.manual_seed(0)
    return (torch.rand([100]),)
