"""CPU equivalent of upstream test_compiler_bisector.py::test_joint_graph.

A custom joint-graph pass rewrites ``x + 1`` into ``x + 2``.
"""
import torch
from torch._inductor import config
from torch._inductor.custom_graph_pass import CustomGraphPass

DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
PLANTED = {"config": {}}
SUITE = "full"  # BISECT_CORPUS=all (make test time): bisector_pre_grad_pass covers a planted pass
EXPECTED = {
    "verdict": "divergent", "op": "aten.add.Tensor", "graph": "forward_0", "kind": "node",
    "subsystem": {"kind": "pass", "name": "joint_custom_post_pass"},
}


class CustomPostPass(CustomGraphPass):
    def __call__(self, graph: torch.fx.Graph) -> None:
        for node in graph.find_nodes(op="call_function", target=torch.ops.aten.add.Tensor):
            args = list(node.args)
            args[1] = 2
            node.args = tuple(args)

    def uuid(self):
        return hash("bisect-accuracy.upstream.joint_graph")


def plant():
    config.joint_custom_post_pass = CustomPostPass()


plant()


def foo(x):
    return x + 1


def get_model():
    return foo


def get_inputs():
    torch.manual_seed(0)
    return (torch.rand([10]),)
