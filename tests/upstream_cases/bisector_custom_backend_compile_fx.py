"""Restates upstream test/dynamo/test_compiler_bisector.py::test_bisect_pre_grad_graph (CPU twin),
with the pieces compiled through ``torch._inductor.compile_fx.compile_fx`` (how vLLM's piecewise
backend calls Inductor) instead of standalone_compile.

The model is wrapped in torch.compile with a custom backend that splits the graph in two and
compiles each piece with compile_fx; the planted C++ relu accuracy bug sits in the second piece.
Expected: the relu, localised in the piece that holds it, the user's backend kept around it.
"""
import torch
import torch._inductor.config as inductor_config
from torch._inductor.compile_fx import compile_fx
from torch.fx.passes.split_module import split_module

DEVICES = ["cpu", "cuda"]
SUITE = "full"  # BISECT_CORPUS=all: the graphs the user's backend hands Inductor, captured inside it
PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy",
                      "triton.inject_relu_bug_TESTING_ONLY": "accuracy"}}
EXPECTED = {"verdict": "divergent", "op": "aten.relu.default", "kind": "node", "graph": "forward_1",
            "backend_graphs": 2,
            "subsystem": {"kind": "lowering", "name": "aten.relu.default"}}


def plant():
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
    inductor_config.triton.inject_relu_bug_TESTING_ONLY = "accuracy"


plant()


def f(x):
    for _ in range(5):
        x = x + 1
    return x.relu()


class PiecewiseBackend:
    def __call__(self, gm, example_inputs):
        counter = iter(range(10**6))

        def piece(node):
            return 0 if next(counter) < 3 else 1

        split = split_module(gm, None, piece, keep_original_order=True)
        for name, submodule in split.named_modules():
            if "submod_" in name:
                submodule.forward = compile_fx(submodule, example_inputs)
        return split


def get_model():
    return torch.compile(f, backend=PiecewiseBackend())


def get_inputs():
    torch.manual_seed(0)
    return (torch.randn(1024),)
