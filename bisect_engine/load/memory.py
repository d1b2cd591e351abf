"""A memory bound said before it is reached: the check keeps several copies of the model's
inputs and parameters (eager, fp64 reference, compiled, per-node values), so a run whose
estimate exceeds the memory available is refused up front (exit 2), not left to swap or be
killed."""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree

from ..errors import UsageError

# Peak memory of a run, as a multiple of the model's inputs and parameters (measured: a 1 GiB
# input peaked above 12 GiB).
COPIES = 12


def tensor_bytes(values: Any) -> int:
    return sum(v.numel() * v.element_size() for v in pytree.tree_leaves(values)
               if isinstance(v, torch.Tensor) and v.device.type == "cpu")


def available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (Linux); None elsewhere."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_memory(model: Any, inputs: Any, available: Callable[[], int | None] | None = None) -> None:
    """Refuse (``UsageError``) when the run's estimated peak exceeds the memory available."""
    parameters = list(model.parameters()) if isinstance(model, torch.nn.Module) else []
    footprint = tensor_bytes(inputs) + tensor_bytes(parameters)
    free = (available or available_bytes)()
    if free is None or footprint * COPIES <= free:
        return
    gib = 2**30
    raise UsageError(f"the model's inputs and parameters take {footprint / gib:.2f} GiB; checking keeps about "
                     f"{COPIES} copies ({footprint * COPIES / gib:.1f} GiB) and {free / gib:.1f} GiB is available: "
                     "refused before starting; use smaller inputs (a smaller batch or sequence) in get_inputs()")
