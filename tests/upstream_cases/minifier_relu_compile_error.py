"""Restates upstream test/inductor/test_minifier.py::test_after_aot_cpu_compile_error.

``cpp.inject_relu_bug_TESTING_ONLY = "compile_error"``: Inductor's C++ codegen emits
``compile error!`` for relu, so any kernel holding a relu fails to build (CppCompileError).
Upstream reproduces the CppCompileError after AOT. Expected: a crash, localised to the relu alone
(cos compiles fine), with the compiler's error text in the report.
"""
import torch
import torch._inductor.config as inductor_config

DEVICES = ["cpu", "cuda"]
SUITE = "full"  # BISECT_CORPUS=all (make test's time): test_script_mode's planted compile error (inductor_crash.py)
# covers the same crash search on relu and its repro in make test
PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "compile_error",
                      "triton.inject_relu_bug_TESTING_ONLY": "compile_error"}}
EXPECTED = {"verdict": "crash", "op": "aten.relu.default", "graph": "forward_0", "kind": "node",
            "error_contains": "CppCompileError"}
# Triton's planted compile error is Python source that does not parse.
EXPECTED_CUDA = {"error_contains": "SyntaxError"}


def plant():
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"
    inductor_config.triton.inject_relu_bug_TESTING_ONLY = "compile_error"


plant()


def inner(x):
    x = torch.relu(x)
    x = torch.cos(x)
    return x


def get_model():
    return inner


def get_inputs():
    torch.manual_seed(0)
    return (torch.randn(20, 20),)
