"""Restates upstream test/dynamo/test_compiler_bisector.py::test_bisect_pre_grad_graph (CPU twin).

vLLM-style: the model is compiled with a custom backend that splits the Dynamo graph in two
(``split_module``: the first three nodes, then the rest) and compiles each piece with
``torch._inductor.standalone_compile``. The planted C++ relu accuracy bug sits in the second
piece. Upstream (with test_configs.bisect_pre_grad_graph and bisect_keep_custom_backend_for_inductor)
names backend inductor, subsystem ``pre_grad_graph``. Expected here: the relu, localised in the
piece that holds it (``forward_1``), captured inside the user's backend.
The model file hands the tool the model as the user runs it: already wrapped in torch.compile
with the custom backend.
"""
import torch
import torch._inductor.config as inductor_config
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


class SplittingBackend:
    """Split the graph after its third node; compile each piece with Inductor on its own."""

    def __call__(self, gm, example_inputs):
        counter = iter(range(10**6))

        def piece(node):
            return 0 if next(counter) < 3 else 1

        split = split_module(gm, None, piece, keep_original_order=True)
        for name, submodule in split.named_modules():
            if "submod_" in name:
                # as upstream: the example inputs of the whole graph fit every piece here
                submodule.forward = torch._inductor.standalone_compile(
                    submodule, example_inputs, dynamic_shapes="from_example_inputs", options={})
        return split


def get_model():
    return torch.compile(f, backend=SplittingBackend())


def get_inputs():
    torch.manual_seed(0)
    return (torch.randn(1024),)
