"""Tensor digests: shape, dtype, an L1-norm hash, an exact bit hash and NaN/Inf counts.

The L1 norm (fp64, non-finite entries zeroed) is DebugMode's ``norm`` hash: close values give close
numbers. The bit hash is exact: any flipped bit changes it, and it is position-sensitive. Both are
computed with torch ops so they work on any device and cost one pass over the tensor.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

_MASK_62 = (1 << 62) - 1
CHUNK_WORDS = 1 << 20  # 32-bit words hashed at a time (8 MB of int64 temporaries each)


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
    if tensor.is_floating_point():
        # |x| in fp64, in the widened copy's own memory (a copy of the tensor's: NaN, Inf and the
        # zeroing below read the same from |x| as from x, and the sum adds the same values)
        as64 = tensor.to(torch.float64)
        magnitude = as64.abs_() if as64 is not tensor else as64.abs()
        del as64
        l1_norm = float(magnitude.sum())
        if math.isfinite(l1_norm):
            # Every entry finite (an fp64 sum of widened floats cannot overflow): no NaN or Inf to
            # count or zero, and the sum is the one ``nan_to_num`` would have given (the same values).
            nan_count = inf_count = 0
        else:
            nan_count = int(torch.isnan(magnitude).sum())
            inf_count = int(torch.isinf(magnitude).sum())
            l1_norm = float(torch.nan_to_num(magnitude, nan=0.0, posinf=0.0, neginf=0.0).sum())
        del magnitude
    elif tensor.is_complex():
        as64 = tensor.to(torch.complex128)
        nan_count = int(torch.isnan(as64).sum())
        inf_count = int(torch.isinf(as64).sum())
        l1_norm = float(torch.nan_to_num(as64, nan=0.0, posinf=0.0, neginf=0.0).abs().sum())
        del as64
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


def bit_hash(tensor: torch.Tensor, chunk: int = CHUNK_WORDS) -> str:
    """An exact, position-sensitive hash of a tensor's bits, as 16 hex digits.

    The tensor's bytes (in logical order, zero-padded to whole 32-bit words) as words ``w_i``, each
    mixed with its position ``i`` (1-based) and summed modulo 2**64; computed ``chunk`` words at a
    time (a sum modulo 2**64 is the same in any grouping: the same hash, without whole-tensor
    temporaries in int64)."""
    flat = tensor.detach().reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    # A dense copy only where the flat view is not one: a byte view needs a unit stride (a size-1
    # dim keeps its stride through ``contiguous()``: a flex attention block mask's (1, 1, 1) tensor).
    if flat.numel() > 0 and (flat.stride(0) != 1 or flat.storage_offset() * flat.element_size() % 4):
        flat = flat.clone(memory_format=torch.contiguous_format)
    raw = flat.view(torch.uint8) if flat.numel() else flat.new_zeros(0, dtype=torch.uint8)
    step = 4 * max(int(chunk), 1)  # bytes per chunk: whole words
    folded = 0
    for start in range(0, raw.numel(), step):
        part = raw[start:start + step]
        padding = (-part.numel()) % 4  # only the last chunk: the stream's end zero-padded
        if padding or part.storage_offset() % 4:
            part = torch.cat([part, part.new_zeros(padding)])  # a fresh, aligned copy
        words = part.view(torch.int32).to(torch.int64).bitwise_and_(0xFFFFFFFF)
        positions = torch.arange(start // 4 + 1, start // 4 + words.numel() + 1, device=words.device,
                                 dtype=torch.int64)
        # Mix each word with its position through a non-linear finaliser (xor-shift, multiply), so
        # swapping two elements changes the sum; int64 products wrap, which is deterministic.
        mixed = words.mul_(0x9E3779B1).add_(positions.mul_(0x85EBCA77))
        del positions
        mixed = mixed.bitwise_xor_(mixed >> 29).mul_(0x27D4EB2F165667C5)
        mixed = mixed.bitwise_xor_(mixed >> 31)
        folded += int(mixed.sum())
    return f"{folded & _MASK_62:016x}"
