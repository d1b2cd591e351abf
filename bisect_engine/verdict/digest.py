"""Tensor digests: shape, dtype, an L1-norm hash, an exact bit hash and NaN/Inf counts.

The L1 norm (fp64, non-finite entries zeroed) is DebugMode's ``norm`` hash: close values give close
numbers. The bit hash is exact: any flipped bit changes it, and it is position-sensitive. Both are
computed with torch ops so they work on any device and cost one pass over the tensor.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator

import torch

try:  # the bit hash of a host tensor: the same arithmetic in numpy, where there is numpy (torch's CPU wheel needs none)
    import numpy as _numpy
except ImportError:  # pragma: no cover - numpy is there wherever transformers is
    _numpy = None  # type: ignore[assignment]

_MASK_62 = (1 << 62) - 1
# 32-bit words hashed at a time: two int64 buffers of 128 KB, in cache, and below torch's grain size
# (32,768 elements), so each op runs in the calling thread (measured on a 38.6 M-element fp32 value
# at load 13 on 2 cores: 0.5 CPU-s instead of 3.3 at 1 << 20, where the threads wait on each other;
# 0.37 instead of 0.55 with one thread on its own)
CHUNK_WORDS = 1 << 14
_POSITION = 0x85EBCA77  # the position's multiplier


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


class Widened:
    """One fp64 buffer the L1 norms of many values widen their pieces into, reused (:class:`Digests`):
    a fresh 32 MB copy per value was faulted in page by page (the CLI hands freed memory back), three
    times the time of the sum itself."""

    def __init__(self) -> None:
        self._buffers: dict[torch.device, torch.Tensor] = {}

    def like(self, piece: torch.Tensor) -> torch.Tensor:
        """An fp64 tensor laid out as ``piece.to(torch.float64)`` lays it out (``empty_like``'s
        strides, asked of the meta device: no memory): the sum then adds in the same order, to the
        same bits."""
        buffer = self._buffers.get(piece.device)
        if buffer is None or buffer.numel() < piece.numel():
            buffer = self._buffers[piece.device] = torch.empty(piece.numel(), dtype=torch.float64, device=piece.device)
        layout = torch.empty_like(piece, dtype=torch.float64, device="meta")
        return buffer[:piece.numel()].as_strided(piece.shape, layout.stride())


def digest(tensor: torch.Tensor, known_bit_hash: str | None = None, widened: Widened | None = None) -> TensorDigest:
    """Digest one tensor (any dtype, any device); ``known_bit_hash``: its :func:`bit_hash`, taken
    already; ``widened``: the buffer its pieces are widened into (:class:`Digests`)."""
    tensor = tensor.detach()
    if tensor.is_floating_point():
        # |x| in fp64, a piece at a time (:func:`_pieces`: a widened copy of a piece, never of the
        # whole tensor), in the copy's own memory (NaN, Inf and the zeroing below read the same from
        # |x| as from x, and the sum adds the same values)
        l1_norm, nan_count, inf_count = 0.0, 0, 0
        for piece in _pieces(tensor):
            if widened is not None:
                magnitude = widened.like(piece).copy_(piece).abs_()
            else:
                as64 = piece.to(torch.float64)
                magnitude = as64.abs_() if as64 is not piece else as64.abs()
                del as64
            part = float(magnitude.sum())
            if not math.isfinite(part):
                # a NaN or Inf here (an fp64 sum of widened floats cannot overflow): counted, and
                # the sum is ``nan_to_num``'s; else none to count and the sum is the one it gives
                nan_count += int(torch.isnan(magnitude).sum())
                inf_count += int(torch.isinf(magnitude).sum())
                part = float(torch.nan_to_num(magnitude, nan=0.0, posinf=0.0, neginf=0.0).sum())
            l1_norm += part
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
        bit_hash=known_bit_hash if known_bit_hash is not None else bit_hash(tensor),
        nan_count=nan_count,
        inf_count=inf_count,
    )


# Entries widened to fp64 at a time for the L1 norm (32 MB): a value of any size costs a bounded
# temporary (a 50257 x 768 gradient widened whole took 309 MB beside the run's peak). A value of
# up to this many entries is summed as one piece, as before.
L1_PIECE = 1 << 22


def _pieces(tensor: torch.Tensor) -> Iterator[torch.Tensor]:
    """``tensor`` as views of about :data:`L1_PIECE` entries each that cover it once: the flat
    tensor's slices where it is contiguous, else slices along its longest dimension."""
    if tensor.numel() <= L1_PIECE or tensor.dim() == 0:
        yield tensor
        return
    if tensor.is_contiguous():
        flat = tensor.view(-1)
        for start in range(0, flat.numel(), L1_PIECE):
            yield flat[start:start + L1_PIECE]
        return
    dim = max(range(tensor.dim()), key=tensor.size)
    size = tensor.size(dim)
    step = max(1, L1_PIECE * size // tensor.numel())
    for start in range(0, size, step):
        yield tensor.narrow(dim, start, min(step, size - start))


class Digests:
    """Digests of values that are all alive together (one graph's, taken at once): a tensor over
    the same memory with the same sizes, strides, dtype and version counter as one digested before
    is that digest again (the same bits read again: eager's value and a compiled value that is a
    view of it, a value reached by two names); a row-major tensor over the same bytes as an earlier
    row-major one (a ``view`` or ``reshape`` of it, same dtype and version) has its bit hash (the
    hash reads the values flat in logical order: the same words at the same positions). A
    tensor that is not a plain strided host or device tensor is digested on its own. Use one only
    while every value it saw is alive: memory is recognised by its address."""

    def __init__(self) -> None:
        self._digests: dict[tuple[Any, ...], TensorDigest] = {}
        self._bit_hashes: dict[tuple[Any, ...], str] = {}
        self._held: list[torch.Tensor] = []  # the values keyed by address stay alive while keyed
        self._widened = Widened()

    def __call__(self, tensor: torch.Tensor) -> TensorDigest:
        tensor = tensor.detach()
        if type(tensor) is not torch.Tensor or tensor.layout != torch.strided or tensor.device.type == "meta" \
                or tensor.numel() == 0 or tensor.is_inference():
            return digest(tensor)
        memory = (tensor.device, tensor.data_ptr(), tensor.dtype, tensor._version)
        whole = (*memory, tuple(tensor.shape), tuple(tensor.stride()))
        if whole in self._digests:
            return self._digests[whole]
        flat = (*memory, tensor.numel()) if tensor.is_contiguous() else None
        taken = digest(tensor, self._bit_hashes.get(flat) if flat is not None else None, self._widened)
        self._digests[whole] = taken
        if flat is not None:
            self._bit_hashes[flat] = taken.bit_hash
        self._held.append(tensor)
        return taken


def bit_hash(tensor: torch.Tensor, chunk: int = CHUNK_WORDS) -> str:
    """An exact, position-sensitive hash of a tensor's bits, as 16 hex digits.

    The tensor's bytes (in logical order, zero-padded to whole 32-bit words) as words ``w_i``, each
    mixed with its position ``i`` (1-based) and summed modulo 2**64; computed ``chunk`` words at a
    time (a sum modulo 2**64 is the same in any grouping: the same hash, without whole-tensor
    temporaries in int64), in two int64 buffers of a chunk each, reused; a host tensor of more than a
    chunk (at the default ``chunk``) in numpy where there is numpy (:func:`_numpy_fold`: the same value)."""
    flat = tensor.detach().reshape(-1)
    if flat.dtype == torch.bool:
        flat = flat.to(torch.uint8)
    # A dense copy only where the flat view is not one: a byte view needs a unit stride (a size-1
    # dim keeps its stride through ``contiguous()``: a flex attention block mask's (1, 1, 1) tensor).
    if flat.numel() > 0 and (flat.stride(0) != 1 or flat.storage_offset() * flat.element_size() % 4):
        flat = flat.clone(memory_format=torch.contiguous_format)
    raw = flat.view(torch.uint8) if flat.numel() else flat.new_zeros(0, dtype=torch.uint8)
    if chunk == CHUNK_WORDS and type(raw) is torch.Tensor and raw.device.type == "cpu" and _numpy is not None \
            and raw.numel() > 4 * chunk:  # a plain host tensor (a subclass keeps torch's ops)
        return f"{_numpy_fold(raw.numpy()) & _MASK_62:016x}"
    step = 4 * max(int(chunk), 1)  # bytes per chunk: whole words
    words_per_chunk = min(step, raw.numel() + 3) // 4
    # position j of a chunk times the position multiplier; a chunk starting at word s adds s times it
    offsets = torch.arange(1, words_per_chunk + 1, device=raw.device, dtype=torch.int64).mul_(_POSITION)
    mixed = torch.empty(words_per_chunk, device=raw.device, dtype=torch.int64)
    shifted = torch.empty(words_per_chunk, device=raw.device, dtype=torch.int64)
    folded = 0
    for start in range(0, raw.numel(), step):
        part = raw[start:start + step]
        padding = (-part.numel()) % 4  # only the last chunk: the stream's end zero-padded
        if padding or part.storage_offset() % 4:
            part = torch.cat([part, part.new_zeros(padding)])  # a fresh, aligned copy
        words = part.view(torch.int32)
        count = words.numel()
        word, spare = mixed[:count], shifted[:count]
        # Mix each word with its position through a non-linear finaliser (xor-shift, multiply), so
        # swapping two elements changes the sum; int64 products wrap, which is deterministic.
        word.copy_(words).bitwise_and_(0xFFFFFFFF).mul_(0x9E3779B1)
        word.add_(offsets[:count]).add_(_wrapped((start // 4) * _POSITION))
        word.bitwise_xor_(torch.bitwise_right_shift(word, 29, out=spare)).mul_(0x27D4EB2F165667C5)
        word.bitwise_xor_(torch.bitwise_right_shift(word, 31, out=spare))
        folded += int(word.sum())
    return f"{folded & _MASK_62:016x}"


# Words hashed at a time in numpy: its ops never split into threads and cost a microsecond each
# where torch's cost tens (a 4 x 256 x 3072 fp32 value: 10-13 ms against 33; the run's digests of
# every value of a graph were a tenth of a clean GPT-2 small check).
NUMPY_CHUNK_WORDS = 1 << 16


def _numpy_fold(raw: Any) -> int:
    """:func:`bit_hash`'s sum (before its mask) of a host tensor's bytes, ``raw`` (numpy uint8): the
    same int64 arithmetic (wrapping products, arithmetic right shifts), the same value."""
    step = 4 * NUMPY_CHUNK_WORDS
    words_per_chunk = min(step, raw.size + 3) // 4
    offsets = _numpy.arange(1, words_per_chunk + 1, dtype=_numpy.int64) * _numpy.int64(_POSITION)
    mixed = _numpy.empty(words_per_chunk, dtype=_numpy.int64)
    shifted = _numpy.empty(words_per_chunk, dtype=_numpy.int64)
    folded = 0
    with _numpy.errstate(over="ignore"):
        for start in range(0, raw.size, step):
            part = raw[start:start + step]
            padding = (-part.size) % 4
            if padding or part.ctypes.data % 4:
                part = _numpy.concatenate([part, _numpy.zeros(padding, dtype=_numpy.uint8)])
            words = part.view(_numpy.uint32)  # as torch's int32 words masked to 32 bits
            word, spare = mixed[:words.size], shifted[:words.size]
            word[...] = words
            _numpy.multiply(word, _numpy.int64(0x9E3779B1), out=word)
            _numpy.add(word, offsets[:words.size], out=word)
            _numpy.add(word, _numpy.int64(_wrapped((start // 4) * _POSITION)), out=word)
            _numpy.bitwise_xor(word, _numpy.right_shift(word, 29, out=spare), out=word)
            _numpy.multiply(word, _numpy.int64(0x27D4EB2F165667C5), out=word)
            _numpy.bitwise_xor(word, _numpy.right_shift(word, 31, out=spare), out=word)
            folded += int(word.sum(dtype=_numpy.int64))
    return folded


def _wrapped(value: int) -> int:
    """``value`` modulo 2**64 as a signed int64 (what an int64 product wraps to)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= 1 << 63 else value
