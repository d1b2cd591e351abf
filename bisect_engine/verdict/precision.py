"""The precision the user allowed an op to compute in, so that it is judged at that precision.

A float32 matmul or convolution may run in TF32 (10-bit mantissa) or bf16 when the user allowed
it: ``torch.backends.cuda.matmul.allow_tf32`` or ``torch.set_float32_matmul_precision("high" |
"medium")`` for matmuls, ``torch.backends.cudnn.allow_tf32`` (on by default) for CUDA
convolutions. Eager and Inductor both honour the setting, and their results then differ by
TF32 roundings, thousands of float32 ulps. Measured in float32 ulps, a difference that the setting
explains would read as a divergence: such an output is measured in units of the allowed precision
instead (:func:`allowed_precision`), and the verdict names the setting. Pure: reads torch's flags.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch

aten = torch.ops.aten

# Matmuls, with the positions of the two operands they multiply (the precision rule needs the names;
# the oracle's scale of a matmul's terms needs the operands).
MATMUL_OPERANDS = {"mm": (0, 1), "bmm": (0, 1), "matmul": (0, 1), "dot": (0, 1), "mv": (0, 1), "addmm": (1, 2),
                   "baddbmm": (1, 2), "addbmm": (1, 2)}
_MATMULS = {*(set(MATMUL_OPERANDS) - {"dot", "mv"}), "linear", "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_cudnn_attention", "scaled_dot_product_attention"}
_CONVOLUTIONS = {"convolution", "_convolution", "cudnn_convolution", "conv2d", "conv1d", "conv3d"}
# Unit roundoff of the formats the settings allow.
TF32 = 2.0 ** -11
BF16 = 2.0 ** -8


@dataclass(frozen=True)
class Precision:
    """The settings that let float32 matmuls and convolutions run below float32, as one value: the
    judgement pins them (:meth:`current`), so a repro measures in the units the tool measured in
    and runs its ops as the tool's run did (:meth:`apply`)."""

    matmul_tf32: bool = False  # torch.backends.cuda.matmul.allow_tf32
    cudnn_tf32: bool = True  # torch.backends.cudnn.allow_tf32 (on by default)
    matmul_precision: str = "highest"  # torch.get_float32_matmul_precision()

    @classmethod
    def current(cls) -> "Precision":
        return cls(bool(torch.backends.cuda.matmul.allow_tf32), bool(torch.backends.cudnn.allow_tf32),
                   torch.get_float32_matmul_precision())

    def apply(self) -> None:
        """Set torch's flags to these (a repro, in a process of its own, runs as the tool's run did)."""
        torch.set_float32_matmul_precision(self.matmul_precision)
        torch.backends.cuda.matmul.allow_tf32 = self.matmul_tf32
        torch.backends.cudnn.allow_tf32 = self.cudnn_tf32


@dataclass(frozen=True)
class Allowed:
    setting: str  # the line that turns it off, for the report
    unit: float  # unit roundoff of the allowed precision


def op_base_name(target: Any) -> str:
    """``mm`` for ``aten.mm.default`` (an overload's packet name), a function's own name otherwise."""
    packet = getattr(target, "_opname", None) or getattr(target, "__name__", "")
    return str(packet).split(".")[0]


def allowed_precision(target: Any, value: Any, precision: Precision | None = None) -> Allowed | None:
    """For the output ``value`` of an op ``target``: the reduced precision the user allowed, or None.
    ``precision``: the settings to read (default: torch's flags now)."""
    if not isinstance(value, torch.Tensor) or value.dtype != torch.float32:
        return None
    name = op_base_name(target)
    flags = precision if precision is not None else Precision.current()
    matmul_precision = flags.matmul_precision
    if name in _MATMULS:
        if value.device.type == "cuda" and flags.matmul_tf32:
            return Allowed("torch.backends.cuda.matmul.allow_tf32 = False", TF32)
        if matmul_precision != "highest" and value.device.type in ("cuda", "cpu"):
            return Allowed('torch.set_float32_matmul_precision("highest")', BF16 if matmul_precision == "medium" else TF32)
    if name in _CONVOLUTIONS and value.device.type == "cuda" and flags.cudnn_tf32:
        return Allowed("torch.backends.cudnn.allow_tf32 = False", TF32)
    return None


def allowed_units(graph_module: torch.fx.GraphModule) -> list[float]:
    """The unit roundoffs the user allowed below float32 to ops of a Dynamo graph (TF32
    convolutions and matmuls: :func:`allowed_precision`). The checks that judge a whole model's
    outputs measure them in the coarsest: an output downstream of such an op carries its roundings."""
    units = []
    for node in graph_module.graph.nodes:
        if node.op not in ("call_function", "call_method"):
            continue
        target = node.target if node.op == "call_function" else SimpleNamespace(__name__=node.target)
        allowed = allowed_precision(target, node.meta.get("example_value", node.meta.get("val")))
        if allowed is not None:
            units.append(allowed.unit)
    return units
