"""A real torch 2.13 crash of Inductor's C++ backend (pytorch/pytorch#196570, also #188228): a mask
written in place by index, then a softmax over ``x + mask``. Outer-loop fusion promotes the
index_put's mutation-output buffer to a local buffer and raises ``InductorError: KeyError: 'buf1'``.
No node crashes alone: the crash is a window of nodes (verdict ``crash``), and falling back
``prims.iota`` (``arange``'s decomposition) avoids it. Script mode meets the same graph in
tests/scripts/inductor_crash.py.
"""
import torch

SUITE = "full"  # BISECT_CORPUS=all: a planted compile error covers the crash path in make test
EXPECTED = {"verdict": "crash", "op": "aten.arange.default", "graph": "forward_0", "kind": "window",
            "error_contains": "KeyError"}


def masked_softmax(x):
    mask = torch.full((8, 8), -10000.0)
    mask[torch.arange(8).unsqueeze(0), torch.arange(8).unsqueeze(1)] = 0
    return torch.softmax(x + mask, dim=-1)


def get_model():
    return masked_softmax


def get_inputs():
    torch.manual_seed(0)
    return (torch.randn(8, 8),)
