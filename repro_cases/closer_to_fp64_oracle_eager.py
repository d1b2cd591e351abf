"""Real (no planted bug): compiled differs from eager but is closer to fp64 (--oracle eager).

A bf16 shift and unshift, `(x + 32) - 32`: eager rounds `x + 32` to bf16 (spacing 0.25), so
eager's result is up to 0.125 off; Inductor fuses both ops in fp32 and returns x exactly. By the
fp64 rule compiled is right (`clean`), but the user sees different numbers: report.json
`differences` lists the value with the setting that makes compiled follow eager's rounding
(`emulate_precision_casts`, checked by one compile). With `--oracle eager` eager's values are the
reference, and compiled's 0.125 from them is the rounding of the sub's terms (32 in bf16: the noise
floor the sub carries), so no finding: `clean`, with the very listing `--oracle outputs` gives (a
stricter oracle never says less). `--oracle bitwise` makes it a finding.
"""
import torch
from torch import nn


def plant():
    """Nothing to plant: Inductor's own behaviour."""


plant()

DEVICES = ["cpu"]
SUITE = "full"  # run with BISECT_CORPUS=all (closer_to_fp64_bf16 runs in make test)
PLANTED = None
CLI_ARGS = ["--oracle", "eager"]

EXPECTED = {"verdict": "clean", "op": None, "graph": None, "kind": None, "differences": ["aten.sub.Tensor"]}


class ShiftUnshift(nn.Module):
    def forward(self, x):
        shifted = x + 32.0
        return shifted - 32.0


def get_model():
    return ShiftUnshift()


def get_inputs():
    torch.manual_seed(0)
    return (torch.randn(64, 16).to(torch.bfloat16),)
