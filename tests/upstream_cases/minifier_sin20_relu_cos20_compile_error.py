"""Restates upstream test/dynamo/test_minifier.py::test_if_graph_minified (CPU twin).

Upstream uses the Dynamo-level testing backend ``relu_compile_error_TESTING_ONLY`` (raises on any
graph with a relu) and expects the minified repro to be the relu alone (``forward(sin_19):
relu``). The Inductor twin here is ``cpp.inject_relu_bug_TESTING_ONLY = "compile_error"`` on
20 x sin -> relu -> 20 x cos. Expected: a crash localised to the relu alone, in few compiles:
the crashing per-node compile is halved over the three signatures (sin, relu, cos), not the 41
nodes, and all config flips at once still raise the relu's own error (about 10 in all; 21 before).
"""
import torch
import torch._inductor.config as inductor_config

DEVICES = ["cpu", "cuda"]
SUITE = "full"
PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "compile_error",
                      "triton.inject_relu_bug_TESTING_ONLY": "compile_error"}}
EXPECTED = {"verdict": "crash", "op": "aten.relu.default", "graph": "forward_0", "kind": "node",
            "error_contains": "CppCompileError", "compiles_at_most": 12}
# Triton's planted compile error is Python source that does not parse.
# CUDA's subsystem search flips Triton's settings too: 15 compiles measured on an H100 (12 on CPU).
EXPECTED_CUDA = {"error_contains": "SyntaxError", "compiles_at_most": 16}


def plant():
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"
    inductor_config.triton.inject_relu_bug_TESTING_ONLY = "compile_error"


plant()


def inner(x):
    for _ in range(20):
        x = torch.sin(x)
    x = torch.relu(x)
    for _ in range(20):
        x = torch.cos(x)
    return x


def get_model():
    return inner


def get_inputs():
    torch.manual_seed(0)
    return (torch.randn(20, 20),)
