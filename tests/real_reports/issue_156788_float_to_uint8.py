"""https://github.com/pytorch/pytorch/issues/156788 — [inductor] [cpu] cpu inductor incorrectly
processes ``.to(torch.uint8)``, resulting in numerical inconsistency (filed 2025-06-25).

Thread: negative floats cast to uint8 came out 0 in compiled code (eager wraps: -2.18 -> 254);
fixed by pytorch/pytorch#157267 ("fix tensor.to(uint8) error when tensor src type is float":
``convert_float_to_int8`` clamped before converting).

Check on torch 2.13.0+cpu: eager and compiled both print [1, 0, 254, 0, 255]: fixed before 2.13.
Class: not_on_2_13, so the right verdict is ``clean``. No edits.
"""
REAL_REPORT = {
    "issue": 156788, "class": "not_on_2_13",
    "verdict": "clean",
    "op": None,
    "cli_args": [],
    "known_miss": None,
}
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._inductor import config

config.fallback_random = True
torch.set_grad_enabled(False)
torch.manual_seed(0)


class Model(torch.nn.Module):

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.to(torch.uint8)
        return x


model = Model()


x = torch.randn(5)
print(f"input x: {x}")

inputs = [x]


def run_test(model, inputs, device, backend):
    torch.manual_seed(0)
    model = model.to(device)
    inputs = [x.to(device) for x in inputs]
    if backend != "eager":
        model = torch.compile(model, backend=backend)
    torch.manual_seed(0)
    output = model(*inputs)
    return output


device = 'cpu'
output = run_test(model, inputs, device, 'eager')
c_output = run_test(model, inputs, device, 'inductor')
print(output)
print(c_output)
