"""A recurrence over time written with torch's scan higher-order op (an RNN / linear-attention /
state-space layer's shape): h_t = sin(h_{t-1} W^T + u_t), the outputs stacked. Inductor lowers
scan to a while_loop indexed by ``.item()``, so 2.13 compiles it only with scalar outputs captured
(set below, as a user of scan does). Clean: the tool must judge the scan node as one op and say
clean, exit 0.
"""
import torch
from torch import nn
from torch._higher_order_ops.scan import scan

torch._dynamo.config.capture_scalar_outputs = True

DEVICES = ["cpu"]
SUITE = "full"  # "ci": run by make test; "full": BISECT_CORPUS=all
EXPECTED = {"verdict": "clean"}


class Recurrence(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.inp = nn.Linear(width, width)
        self.rec = nn.Linear(width, width, bias=False)
        self.out = nn.Linear(width, width)

    def forward(self, x):  # x: (time, batch, width)
        u = self.inp(x)
        weight = self.rec.weight

        def step(h, u_t):
            h = torch.sin(h @ weight.t() + u_t)
            return h, 2 * h

        last, ys = scan(step, torch.zeros_like(u[0]), u)
        return self.out(ys).sum(0) + last


def get_model():
    torch.manual_seed(0)
    return Recurrence().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(6, 4, 16),)
