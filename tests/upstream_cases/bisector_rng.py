"""CPU equivalent of upstream test_compiler_bisector.py::test_rng.

``torch.rand([10]) + 1`` compiled draws different numbers than eager under the same seed. With
``--rng strict`` (draws must match eager's), the tool names the rand and ``fallback_random``.
"""
import torch

DEVICES = ["cpu", "cuda"]  # the e2e suite runs this case on each (BISECT_TEST_DEVICE)
PLANTED = None  # nothing planted: this is Inductor's own RNG, fixed by fallback_random
CLI_ARGS = ["--rng", "strict"]
EXPECTED = {
    "verdict": "divergent", "op": "aten.rand.default", "graph": "forward_0",
    "subsystem": {"kind": "config", "name": "fallback_random"},
}


def plant():
    pass


def foo():
    return torch.rand([10]) + 1


def get_model():
    return foo


def get_inputs():
    return ()
