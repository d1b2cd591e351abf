"""CPU equivalent of upstream test_compiler_bisector.py::test_bad_decomp.

A wrong decomposition for ``aten.exponential`` (NaN times a random draw) is swapped into the table
Inductor compiles with, as the upstream test does (it patches ``select_decomp_table``).
"""
import torch
from torch._inductor import compile_fx as compile_fx_module

aten = torch.ops.aten
SUITE = "full"  # BISECT_CORPUS=all: loop_reuse_masked_fill_decomp and backward_bug cover a wrong decomposition-table entry in make test
DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
PLANTED = {"config": {}}
EXPECTED = {
    "verdict": "nan", "op": "aten.exponential.default", "graph": "forward_0", "kind": "node",
    "nan_eager_op": None, "nan_compiled_op": "aten.exponential.default",
    "subsystem": {"kind": "decomposition", "name": "aten.exponential.default"},
}


def bad_exp_decomp(self, rate=1, generator=None):
    return torch.rand_like(self) * float("nan")


def plant():
    if getattr(compile_fx_module.select_decomp_table, "_planted", False):
        return
    original = compile_fx_module.select_decomp_table

    def with_bad_exponential():
        table = dict(original())
        table[aten.exponential.default] = bad_exp_decomp
        return table

    with_bad_exponential._planted = True
    compile_fx_module.select_decomp_table = with_bad_exponential


plant()


def vq(x):
    return (x + 3).exponential_() * 10.5


def get_model():
    return vq


def get_inputs():
    torch.manual_seed(0)
    return (torch.randn(4, 40, 16),)
