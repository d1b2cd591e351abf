"""An fp64 reference for a whole model, constants made inside ``forward`` included.

``model.to(float64)`` upcasts parameters and buffers only: a tensor the model creates while it runs
(``torch.tensor(..., dtype=torch.float16)``, ``torch.full``, a ``.to(torch.bfloat16)``) stays in
its own dtype, so the "fp64" result can be as rounded as eager's (a plain function gets no fp64
version at all). :class:`Upcast` is a ``TorchDispatchMode`` under which every floating op runs in
fp64: its floating tensor arguments upcast, a floating ``dtype`` argument raised to float64. Random
ops run as they are (their draws are data, and an fp64 draw would be another number), then upcast;
an op with no fp64 kernel runs in its own dtype and its result is upcast. For forward values only:
autograd records the original dtypes, so gradients keep ``model.to(float64)``.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..search import stop_if_out_of_memory
from .fx_eval import on_host, scalar_arguments, scalars_as_eager, to_fp64

_FLOATING = (torch.float16, torch.bfloat16, torch.float32)


def _raised(kwargs: dict[str, Any]) -> dict[str, Any]:
    if kwargs.get("dtype") in _FLOATING:
        return {**kwargs, "dtype": torch.float64}
    return kwargs


class OnHost(TorchDispatchMode):
    """Every op on the host: an fp64 model reference too large for its device, run on the host. Its
    parameters and inputs are moved there before; a tensor the model holds otherwise (a cached
    mask), or one a factory op is told to make on the device (``torch.arange(n, device="cuda")``),
    is moved or made there as each op reads it."""

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        return func(*on_host(args), **on_host(kwargs or {}))


class Upcast(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()):
            return to_fp64(func(*args, **kwargs))
        if scalar_arguments(func, args, kwargs):  # a Python scalar: as eager's op sees it (fx_eval)
            args, kwargs = scalars_as_eager(func, args, kwargs, args, kwargs)
        try:
            return func(*to_fp64(args), **_raised(to_fp64(kwargs)))
        except Exception as error:  # noqa: BLE001 - no fp64 kernel: the op's own dtype stands in
            stop_if_out_of_memory(error, "in an fp64 op")
            return to_fp64(func(*args, **kwargs))
