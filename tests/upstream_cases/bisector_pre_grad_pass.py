"""CPU equivalent of upstream test_compiler_bisector.py::test_pre_grad.

A custom pre-grad pass rewrites ``x + 1`` into ``x + 2`` on the torch-level graph, before AOT
tracing: no aten graph we capture shows it, so the tool names the pass by recompiling the whole
model with each pass disabled, then replays the pass eagerly on the Dynamo graph: ``divergent``,
the rewritten node and the aten op it runs (kind ``pre_grad``); the repro compiles the torch-level
node through torch.compile (exit 1 with the pass set, 0 without).
"""
import operator

import torch
from torch._inductor import config
from torch._inductor.custom_graph_pass import CustomGraphPass

DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
PLANTED = {"config": {}}
EXPECTED = {
    "verdict": "divergent", "op": "aten.add.Tensor", "graph": "forward_0", "kind": "pre_grad",
    "subsystem": {"kind": "pass", "name": "pre_grad_custom_pass"},
    # localised: the torch-level node the pass rewrote, eagerly, and the aten op it runs
    "pre_grad": {"aten_op": "aten.add.Tensor", "before": "add = _operator.add(l_x_, 1)", "after": "add = _operator.add(l_x_, 2)"},
}


class CustomPrePass(CustomGraphPass):
    def __call__(self, graph: torch.fx.Graph) -> None:
        for node in graph.find_nodes(op="call_function", target=operator.add):
            args = list(node.args)
            args[1] = 2
            node.args = tuple(args)

    def uuid(self):
        return hash("bisect-accuracy.upstream.pre_grad")


def plant():
    config.pre_grad_custom_pass = CustomPrePass()


plant()


def foo(x):
    return x + 1


def get_model():
    return foo


def get_inputs():
    torch.manual_seed(0)
    return (torch.rand([10]),)
