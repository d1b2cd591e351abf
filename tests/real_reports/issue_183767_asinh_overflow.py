"""https://github.com/pytorch/pytorch/issues/183767 — torch.compile returns inf for torch.asinh on
large finite float32 inputs while eager returns finite values (filed 2026-05-14 against
2.13.0.dev20260513+cpu; closed).

Thread: the vectorised ``Vectorized<float>::asinh`` (SLEEF) overflowed in ``x*x``; fixed by
pytorch/pytorch#184105 ("Fix CPU Inductor vector asinh overflow", merged 2026-05-18).

Check on torch 2.13.0+cpu: eager and compiled both give [52.44863, 60.203682, -55.732044,
23.718998] (fp64: 52.448630, 60.203683, -55.732043, 23.718998): fixed in 2.13.0. The reporter's
script asserts the bug (``assert np.isinf(compiled[0])``), so on 2.13 it ends in an
AssertionError: the tool must still write its report. Class: not_on_2_13, expected ``clean``.
No edits.
"""
REAL_REPORT = {
    "issue": 183767, "class": "not_on_2_13",
    "verdict": "clean",
    "op": None,
    "cli_args": [],
    "known_miss": None,
}
import warnings
warnings.filterwarnings("ignore")

import numpy as np
import torch

def fn(x):
    return torch.asinh(x)

x = torch.tensor([3e22, 7e25, -8e23, 1e10], dtype=torch.float32)

eager = fn(x).cpu().numpy()

torch._dynamo.reset()
compiled = torch.compile(fn, backend="inductor", fullgraph=True)(x).cpu().numpy()

print(f"input: {x.cpu().numpy()}")
print(f"eager: {eager}")
print(f"comp : {compiled}")

assert np.isfinite(eager[0]) and 50 < eager[0] < 60
assert np.isinf(compiled[0])
assert np.isinf(compiled[1])
