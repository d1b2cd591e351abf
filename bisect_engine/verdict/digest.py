"""Tensor digests: shape, dtype, an L1-norm hash, an exact bit hash and NaN/Inf counts.

The L1 norm (fp64, non-finite entries zeroed) is DebugMode's ``norm`` hash: close values give close
numbers. The bit hash is exact: any flipped bit changes it, and it is position-sensitive. Both are
computed with torch ops so they work on any device and cost one pass over the tensor.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

_MASK_62 = (1 << 62) - 1


@dataclass(frozen=True)
class TensorDigest:
    shape: tuple[int, ...]
    dtype: str
    l1_norm: float
    bit_hash: str
    nan_count: int
    inf_count: int

    @property
    def nonfinite(self) -> bool:
        return self.nan_count > 0 or self.inf_count > 0

    def to_json(self) -> dict[str, Any]:
        return {
            "shape": list(self.shape),
            "dtype": self.dtype,
            "l1_norm": self.l1_norm,
            "bit_hash": self.bit_hash,
            "nan": self.nan_count,
            "inf": self.inf_count,
        }


def digest(tensor: torch.Tensor) -> TensorDigest:
    """Digest one tensor (any dtype, any device)."""
    tensor = tensor.detach()
    if tensor.is_floating_point() or tensor.is_complex():
        as64 = tensor.to(torch.complex128 if tensor.is_complex() else torch.float64)
        nan_count = int(torch.isnan(as64).sum())
        inf_count = int(torch.isinf(as64).sum())
        l1_norm = float(torch.nan_to_num(as64, nan=0.0, posinf=0.0, neginf=0.0).abs().sum())
    else:
        nan_count = inf_count = 0
        l1_norm = float(tensor.to(torch.float64).abs().sum())
    return TensorDigest(
        shape=tuple(tensor.shape),
        dtype=str(tensor.dtype).replace("torch.", ""),
        l1_norm=l1_norm,
        bit_hash=bit_hash(tensor),
        nan_count=nan_count,
        inf_count=inf_count,
    )


def bit_hash(tensor: torch.Tensor) -> str:
    """An exact, position-sensitive hash of a tensor's bits, as 16 hex digits."""
    # A fresh dense copy: ``contiguous()`` keeps a size-1 dim's stride (a flex attention block
    # mask's (1, 1, 1) int tensor), and a byte view needs a unit stride.
    flat = tensor.detach().reshape(-1).clone(memory_format=torch.contiguous_format)
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    raw = flat.view(torch.uint8)
    padding = (-raw.numel()) % 4
    raw = torch.cat([raw, raw.new_zeros(padding)])  # a fresh, aligned copy
    words = raw.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    positions = torch.arange(1, words.numel() + 1, device=words.device, dtype=torch.int64)
    # Mix each word with its position through a non-linear finaliser (xor-shift, multiply), so
    # swapping two elements changes the sum; int64 products wrap, which is deterministic.
    mixed = words * 0x9E3779B1 + positions * 0x85EBCA77
    mixed = (mixed ^ (mixed >> 29)) * 0x27D4EB2F165667C5
    mixed = mixed ^ (mixed >> 31)
    folded = int(mixed.sum()) & _MASK_62
    return f"{folded:016x}"
