"""Not an upstream test (upstream test_compiler_bisector.py::test_bisect_pre_grad_graph keeps the
user's backend): a vLLM-style backend applies its own torch-level pass (x + 1 -> x + 2 on the first
add) and then hands the graph to compile_fx. Nothing is planted in Inductor: the user's backend is
wrong. Expected: divergent, kind ``pre_grad``, the add the backend rewrote (before/after, source
line) and the backend named; no repro (the rewrite is the user's code, not Inductor's).
"""
import operator

import torch
from torch._inductor.compile_fx import compile_fx

DEVICES = ["cpu", "cuda"]
SUITE = "full"
PLANTED = None
EXPECTED = {"verdict": "divergent", "op": "aten.add.Tensor", "kind": "pre_grad", "graph": "forward_0", "repro": False,
            "pre_grad": {"aten_op": "aten.add.Tensor", "before": "x = _operator.add(l_x_, 1)",
                         "after": "x = _operator.add(l_x_, 2)"}}


def plant():
    pass


def f(x):
    for _ in range(5):
        x = x + 1
    return x.relu()


class PassThenInductorBackend:
    def __call__(self, gm, example_inputs):
        first = next(n for n in gm.graph.nodes if n.op == "call_function" and n.target in (operator.add, torch.add))
        first.args = (first.args[0], 2)
        gm.recompile()
        return compile_fx(gm, example_inputs)


def get_model():
    return torch.compile(f, backend=PassThenInductorBackend())


def get_inputs():
    torch.manual_seed(0)
    return (torch.randn(1024),)
