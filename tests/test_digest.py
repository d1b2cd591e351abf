"""Tests for bisect_engine.verdict.digest: TensorDigest, digest and bit_hash."""
from __future__ import annotations

import re

import math

import pytest
import torch

from bisect_engine.verdict.digest import TensorDigest, bit_hash, digest


def flip_bit(tensor: torch.Tensor, index: int, bit: int) -> torch.Tensor:
    """A copy of a float32 tensor with one bit of one element flipped."""
    words = tensor.clone().view(torch.int32).reshape(-1)
    words[index] ^= 1 << bit if bit < 31 else -(1 << 31)
    return words.view(torch.float32).reshape(tensor.shape)


# --- digest ---------------------------------------------------------------------------------------


def test_digest_of_a_known_tensor() -> None:
    d = digest(torch.tensor([[1.0, -2.0], [3.5, -0.25]]))
    assert isinstance(d, TensorDigest)
    assert d.shape == (2, 2)
    assert d.dtype == "float32"
    assert d.l1_norm == 6.75
    assert (d.nan_count, d.inf_count) == (0, 0)
    assert not d.nonfinite
    assert re.fullmatch(r"[0-9a-f]{16}", d.bit_hash)
    one_bit_off = torch.tensor([[1.0, -2.0], [3.5, -0.25]]).view(torch.int32)
    one_bit_off[0, 0] ^= 1
    assert digest(one_bit_off.view(torch.float32)).bit_hash != d.bit_hash


def test_l1_norm_is_accumulated_in_fp64() -> None:
    # fp32 cannot hold 200000001 (its spacing there is 16): an fp32 sum would lose the 1.
    d = digest(torch.tensor([1e8, 1.0, -1e8], dtype=torch.float32))
    assert d.l1_norm == 200_000_001.0


def test_nan_and_inf_are_counted_and_left_out_of_the_norm() -> None:
    d = digest(torch.tensor([1.0, math.nan, math.inf, -math.inf, -2.0, math.nan]))
    assert (d.nan_count, d.inf_count) == (2, 2)
    assert d.l1_norm == 3.0
    assert d.nonfinite
    assert digest(torch.tensor([math.inf])).nonfinite
    assert not digest(torch.tensor([1e38, -1e38])).nonfinite


def test_to_json_round_trips_the_fields() -> None:
    payload = digest(torch.tensor([math.nan, 2.0])).to_json()
    assert payload["shape"] == [2]
    assert payload["dtype"] == "float32"
    assert payload["l1_norm"] == 2.0
    assert payload["nan"] == 1 and payload["inf"] == 0
    assert payload["bit_hash"] == bit_hash(torch.tensor([math.nan, 2.0]))


@pytest.mark.parametrize(
    "tensor, dtype, l1, infs",
    [
        (torch.tensor([True, False, True]), "bool", 2.0, 0),
        (torch.tensor([-3, 4, 0], dtype=torch.int64), "int64", 7.0, 0),
        (torch.tensor([-3, 4], dtype=torch.int8), "int8", 7.0, 0),
        (torch.tensor([1.5, -2.25], dtype=torch.bfloat16), "bfloat16", 3.75, 0),
        (torch.tensor([1.5, -2.25, -math.inf], dtype=torch.float16), "float16", 3.75, 1),
    ],
)
def test_digest_of_other_dtypes(tensor: torch.Tensor, dtype: str, l1: float, infs: int) -> None:
    d = digest(tensor)
    assert d.dtype == dtype
    assert d.shape == tuple(tensor.shape)
    assert d.l1_norm == l1
    assert d.nan_count == 0
    assert d.inf_count == infs


def test_digest_of_scalar_and_empty_tensors() -> None:
    assert digest(torch.tensor(-4.0)).shape == ()
    assert digest(torch.tensor(-4.0)).l1_norm == 4.0
    empty = digest(torch.empty(0, 3))
    assert empty.shape == (0, 3)
    assert empty.l1_norm == 0.0


# --- bit_hash -------------------------------------------------------------------------------------


def test_bit_hash_is_equal_for_equal_tensors() -> None:
    a = torch.randn(7, 5, generator=torch.Generator().manual_seed(0))
    b = torch.randn(7, 5, generator=torch.Generator().manual_seed(0))
    assert a.data_ptr() != b.data_ptr()  # two tensors, one content
    assert bit_hash(a) == bit_hash(b)


def test_bit_hash_of_a_non_contiguous_view_equals_its_contiguous_copy() -> None:
    base = torch.randn(6, 8, generator=torch.Generator().manual_seed(1))
    view = base.t()[::2]
    assert not view.is_contiguous()
    assert bit_hash(view) == bit_hash(view.contiguous())
    assert bit_hash(view) != bit_hash(base.t()[1::2].contiguous())


@pytest.mark.parametrize("index", [0, 13, 34])
@pytest.mark.parametrize("bit", [0, 1, 16, 22, 23, 30, 31])
def test_bit_hash_changes_when_one_bit_flips(index: int, bit: int) -> None:
    tensor = torch.randn(5, 7, generator=torch.Generator().manual_seed(2))
    flipped = flip_bit(tensor, index, bit)
    assert not torch.equal(tensor.view(torch.int32), flipped.view(torch.int32))
    assert bit_hash(flipped) != bit_hash(tensor)


def test_bit_hash_sees_the_sign_of_zero_and_nan_payloads() -> None:
    assert bit_hash(torch.tensor([0.0])) != bit_hash(torch.tensor([-0.0]))
    quiet = torch.tensor([math.nan])
    payload = (quiet.view(torch.int32) | 1).view(torch.float32)
    assert bit_hash(quiet) != bit_hash(payload)


def test_bit_hash_changes_when_two_elements_swap() -> None:
    cases = [
        (torch.tensor([0.0, 1.0, 7.0]), torch.tensor([1.0, 0.0, 7.0])),
        (torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([2.0, 1.0, 3.0, 4.0])),
        (torch.tensor([0, 1, 5], dtype=torch.int64), torch.tensor([1, 0, 5], dtype=torch.int64)),
        (torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([[1.0, 3.0], [2.0, 4.0]])),
    ]
    collisions = [(a.tolist(), b.tolist()) for a, b in cases if bit_hash(a) == bit_hash(b)]
    assert not collisions, f"swapped tensors with equal bit_hash: {collisions}"


@pytest.mark.parametrize(
    "tensor, other",
    [
        (torch.tensor([True, False, True]), torch.tensor([True, True, True])),
        (torch.tensor([3, 4, 5], dtype=torch.int64), torch.tensor([3, 4, 6], dtype=torch.int64)),
        (torch.tensor([3, 4, 5], dtype=torch.int8), torch.tensor([3, 4, 6], dtype=torch.int8)),
        (torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16), torch.tensor([1.0, 2.0, 3.015625], dtype=torch.bfloat16)),
        (torch.tensor([1.0, 2.0, 3.0], dtype=torch.float16), torch.tensor([1.0, 2.0, 3.001953125], dtype=torch.float16)),
    ],
)
def test_bit_hash_of_other_dtypes(tensor: torch.Tensor, other: torch.Tensor) -> None:
    assert not torch.equal(tensor, other)
    assert bit_hash(tensor) == bit_hash(tensor.clone())
    assert bit_hash(tensor) != bit_hash(other)
    assert len(bit_hash(tensor)) == 16


def test_bit_hash_of_odd_byte_counts_depends_on_the_last_element() -> None:
    # 3 bytes are padded to one 4-byte word; the padding must not hide the last byte.
    assert bit_hash(torch.tensor([1, 2, 3], dtype=torch.uint8)) != bit_hash(torch.tensor([1, 2, 4], dtype=torch.uint8))
    assert bit_hash(torch.tensor([1, 2, 3, 0, 0], dtype=torch.uint8)) != bit_hash(torch.tensor([1, 2, 3], dtype=torch.uint8))


@pytest.mark.parametrize("dtype", [torch.int8, torch.float16, torch.bfloat16])
def test_bit_hash_of_an_offset_slice(dtype: torch.dtype) -> None:
    base = torch.arange(9).to(dtype)
    assert bit_hash(base[1:]) == bit_hash(base[1:].clone())


def _whole_tensor_hash(tensor: torch.Tensor) -> str:
    """The bit hash as one whole-tensor formula (main's before the chunked sum)."""
    flat = tensor.detach().reshape(-1).clone(memory_format=torch.contiguous_format)
    raw = (flat.to(torch.uint8) if flat.dtype == torch.bool else flat).view(torch.uint8)
    raw = torch.cat([raw, raw.new_zeros((-raw.numel()) % 4)])
    words = raw.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    positions = torch.arange(1, words.numel() + 1, dtype=torch.int64)
    mixed = words * 0x9E3779B1 + positions * 0x85EBCA77
    mixed = (mixed ^ (mixed >> 29)) * 0x27D4EB2F165667C5
    mixed = mixed ^ (mixed >> 31)
    return f"{int(mixed.sum()) & ((1 << 62) - 1):016x}"


def test_the_bit_hash_summed_chunk_by_chunk_is_the_whole_tensor_hash() -> None:
    from bisect_engine.verdict.digest import bit_hash
    generator = torch.Generator().manual_seed(3)
    values = torch.randn(7, 5, generator=generator) * 100
    for tensor in (values, values.t(), values.half()[1:], values.to(torch.int8), values > 0, values.bfloat16(),
                   values.double(), values[:, :3].to(torch.int16), torch.zeros(0), torch.tensor(2.5)):
        expected = _whole_tensor_hash(tensor)
        assert [bit_hash(tensor, chunk) for chunk in (1, 2, 3, 5, 1 << 20)] == [expected] * 5, tensor.dtype
    # the default chunk over several chunks, the last one short and padded (odd half-precision count)
    many = torch.randn(40_001, generator=generator)
    for tensor in (many, many.half(), many[1:].bfloat16(), many.view(1, -1)[:, ::2]):
        assert bit_hash(tensor) == _whole_tensor_hash(tensor)


# --- Digests: values alive together, a view digested once ------------------------------------------

def test_digests_of_views_and_repeats_equal_each_ones_own_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same tensor again, a row-major view of it, a transposed view, a slice, a value written
    in place after it was digested, other dtypes: each equal to its own ``digest``; only the
    transposed view and the written value hash their bits again."""
    from bisect_engine.verdict import digest as digest_module
    generator = torch.Generator().manual_seed(4)
    base = torch.randn(6, 10, generator=generator)
    written = torch.randn(5, generator=generator)
    values = [base, base, base.view(60), base.reshape(3, 20), base.t(), base[1:], base[:, :3], written,
              torch.tensor([1, 2, 3]), torch.ones(4, dtype=torch.bool), torch.zeros(0)]
    expected = [digest(v) for v in values]
    expected.append(digest(written.add(1.0)))
    hashed: list[tuple[int, ...]] = []
    real = digest_module.bit_hash

    def counted(tensor: torch.Tensor, *args: object) -> str:
        hashed.append(tuple(tensor.shape))
        return real(tensor, *args)

    monkeypatch.setattr(digest_module, "bit_hash", counted)
    digests = digest_module.Digests()
    got = [digests(v) for v in values]
    written.add_(1.0)  # the same memory, another version: digested again
    got.append(digests(written))
    assert got == expected
    assert hashed == [(6, 10), (10, 6), (5, 10), (6, 3), (5,), (3,), (4,), (0,), (5,)]


@pytest.mark.parametrize("tensor", [
    torch.randn(4, 256, 3072, generator=torch.Generator().manual_seed(3)),  # a GPT-2 activation's shape
    torch.randn(300001, generator=torch.Generator().manual_seed(4))[1:],  # an offset flat slice: a copy first
    torch.randn(700, 300, generator=torch.Generator().manual_seed(5)).t(),  # transposed: hashed in logical order
    torch.randint(-128, 127, (200003,), dtype=torch.int8, generator=torch.Generator().manual_seed(6)),  # odd bytes
    torch.randn(100000, dtype=torch.float64, generator=torch.Generator().manual_seed(7)),
    torch.tensor([math.nan, -0.0, math.inf, 1.0] * 40000, dtype=torch.bfloat16),
    torch.rand(300000, generator=torch.Generator().manual_seed(8)) > 0.5,
])
def test_a_large_host_tensors_bit_hash_is_the_same_in_numpy_as_in_torch(tensor: torch.Tensor,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from bisect_engine.verdict import digest as digest_module

    pytest.importorskip("numpy")
    folds: list[int] = []
    fold = digest_module._numpy_fold
    monkeypatch.setattr(digest_module, "_numpy_fold", lambda raw: folds.append(raw.size) or fold(raw))
    in_numpy = bit_hash(tensor)
    assert folds, "a host tensor of more than a chunk is hashed in numpy"
    assert in_numpy == bit_hash(tensor, chunk=1 << 12) == bit_hash(tensor, chunk=(1 << 14) + 3)  # torch's chunks
    other = tensor.contiguous().clone()  # the same bits in the same logical order
    assert bit_hash(other) == in_numpy
    flat = other.view(-1)
    flat[-1] = ~flat[-1] if other.dtype == torch.bool else (flat[0] if flat[-1] != flat[0] else flat[0] + 1)
    assert bit_hash(other) != in_numpy  # its last word counts


def test_digests_widened_into_one_reused_buffer_are_the_plain_digests_bit_for_bit() -> None:
    """:class:`Digests` widens every value's pieces into one fp64 buffer laid out as ``to(float64)``
    lays them out: the same sums in the same order, so the same L1 norms to the last bit."""
    from bisect_engine.verdict.digest import L1_PIECE, Digests

    generator = torch.Generator().manual_seed(9)
    base = torch.randn(64, 96, 40, generator=generator)
    values = [
        torch.randn(4, 256, 3072, generator=generator),
        base.permute(2, 0, 1),  # dense, not row-major: summed in its memory order
        base[:, ::3, 1:],  # not dense: widened row-major, as ``to`` does
        torch.randn(L1_PIECE + 12345, generator=generator) * 1e30,  # two pieces, the buffer reused
        torch.randn(3000, 1500, generator=generator).t()[::2],  # pieces along its longest dimension
        torch.tensor([math.nan, math.inf, -math.inf, -0.0, 2.5] * 1000),  # counted and zeroed
        torch.randn(5000, dtype=torch.float16, generator=generator),
        torch.randn(5000, dtype=torch.float64, generator=generator),
    ]
    digests = Digests()
    for value in values:
        assert digests(value) == digest(value)
