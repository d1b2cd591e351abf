"""What a run in the caller's own process leaves as it found it (``bisect_engine.check``).

The engine runs the caller's model eagerly and compiled: a backward sets gradients, a BatchNorm in
training mode moves its running statistics, seeds are set before every run, Dynamo is reset, and a
model may write to its inputs. :func:`caller_state_kept` records, before the run, every tensor the
caller handed over (parameters, buffers, inputs: their bits, their ``.grad`` object and bits,
``requires_grad``), each module's ``training`` flag, the random states (torch, CUDA where it was
initialised, Python's ``random``, NumPy's where NumPy is imported), torch's global flags
(:data:`GLOBAL_FLAGS`), Inductor's, Dynamo's and functorch's config and the environment variables,
and puts back what changed, in ``finally``. A tensor is written back only where its bits changed,
so its version counter (and an autograd graph the caller holds) is untouched otherwise. The caller's
compiled functions keep their compiled code (``inductor_adapter.dynamo_caches_kept``).
"""
from __future__ import annotations

import contextlib
import logging
import os
import random
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
import torch.utils._pytree as pytree

from .verdict.inductor_adapter import dynamo_caches_kept

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SavedTensor:
    """One tensor of the caller's, as it was: its bits, its gradient object and that one's bits."""

    tensor: torch.Tensor
    value: torch.Tensor
    grad: torch.Tensor | None
    grad_value: torch.Tensor | None
    requires_grad: bool


def _flag(getter: Callable[[], Any], setter: Callable[[Any], None]) -> tuple[Callable[[], Any], Callable[[Any], None]]:
    return getter, setter


def _attribute(owner: Any, name: str) -> tuple[Callable[[], Any], Callable[[Any], None]] | None:
    return (lambda: getattr(owner, name), lambda value: setattr(owner, name, value)) if hasattr(owner, name) else None


def _set_grad_mode(enabled: bool) -> None:
    torch.set_grad_enabled(enabled)  # called, not entered: sets the mode until set again


def global_flags() -> dict[str, tuple[Callable[[], Any], Callable[[Any], None]]]:
    """torch's process-wide switches a run may touch, each as (read, write)."""
    backends = torch.backends
    flags: dict[str, Any] = {
        "default dtype": _flag(torch.get_default_dtype, torch.set_default_dtype),
        "grad mode": _flag(torch.is_grad_enabled, _set_grad_mode),
        "deterministic algorithms": _flag(
            lambda: (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
            lambda value: torch.use_deterministic_algorithms(value[0], warn_only=value[1])),
        "anomaly mode": _flag(lambda: (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
                              lambda value: torch.set_anomaly_enabled(*value)),
        "float32 matmul precision": _flag(torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
        "intra-op threads": _flag(torch.get_num_threads, torch.set_num_threads),
        "cudnn.enabled": _attribute(backends.cudnn, "enabled"),
        "cudnn.benchmark": _attribute(backends.cudnn, "benchmark"),
        "cudnn.deterministic": _attribute(backends.cudnn, "deterministic"),
        "cudnn.allow_tf32": _attribute(backends.cudnn, "allow_tf32"),
        "cuda.matmul.allow_tf32": _attribute(backends.cuda.matmul, "allow_tf32"),
        "cuda.matmul.allow_fp16_reduced_precision_reduction":
            _attribute(backends.cuda.matmul, "allow_fp16_reduced_precision_reduction"),
        "cuda.matmul.allow_bf16_reduced_precision_reduction":
            _attribute(backends.cuda.matmul, "allow_bf16_reduced_precision_reduction"),
        "mkldnn.enabled": _attribute(backends.mkldnn, "enabled"),
        "fill uninitialized memory": _attribute(torch.utils.deterministic, "fill_uninitialized_memory"),
    }
    return {name: flag for name, flag in flags.items() if flag is not None}


def config_modules() -> list[Any]:
    """The config modules whose values the engine patches (always through ``config.patch``) and reads."""
    import torch._dynamo.config
    import torch._functorch.config
    import torch._inductor.config

    return [torch._inductor.config, torch._dynamo.config, torch._functorch.config]


def tensors_of(objects: tuple[Any, ...]) -> tuple[list[torch.Tensor], list[torch.nn.Module]]:
    """Every tensor the caller handed over (in nested containers; a module's parameters and
    buffers), each once, and every module among them."""
    modules = [value for value in pytree.tree_leaves(objects) if isinstance(value, torch.nn.Module)]
    tensors = [value for value in pytree.tree_leaves(objects) if isinstance(value, torch.Tensor)]
    for module in modules:
        tensors += list(module.parameters()) + list(module.buffers())
    unique = {id(tensor): tensor for tensor in tensors}
    return list(unique.values()), modules


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of the tensor's bits (NaN payloads and signed zeros included)."""
    with torch.no_grad():
        return tensor.detach().clone()


def _same_bits(tensor: torch.Tensor, saved: torch.Tensor) -> bool:
    if tensor.shape != saved.shape or tensor.dtype != saved.dtype or tensor.layout != torch.strided:
        return tensor.shape == saved.shape and tensor.dtype == saved.dtype
    if tensor.device.type == "meta":
        return True
    return bool(torch.equal(_as_bytes(tensor), _as_bytes(saved)))


def _as_bytes(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().contiguous().reshape(-1).view(torch.uint8)


def save_tensors(tensors: list[torch.Tensor]) -> list[SavedTensor]:
    return [SavedTensor(tensor, _bits(tensor), tensor.grad, None if tensor.grad is None else _bits(tensor.grad),
                        tensor.requires_grad) for tensor in tensors]


def restore_tensors(saved: list[SavedTensor]) -> None:
    for entry in saved:
        tensor = entry.tensor
        if tensor.is_leaf and tensor.requires_grad != entry.requires_grad:
            tensor.requires_grad_(entry.requires_grad)
        if not _same_bits(tensor, entry.value):
            with torch.no_grad():
                tensor.copy_(entry.value)
        if tensor.grad is not entry.grad:
            tensor.grad = entry.grad
        if entry.grad is not None and entry.grad_value is not None and not _same_bits(entry.grad, entry.grad_value):
            with torch.no_grad():
                entry.grad.copy_(entry.grad_value)


def random_states() -> dict[str, Any]:
    states: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        states["numpy"] = numpy.random.get_state()
    return states


def restore_random_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch"])
    random.setstate(states["python"])
    if "cuda" in states:
        torch.cuda.set_rng_state_all(states["cuda"])
    if "numpy" in states:
        sys.modules["numpy"].random.set_state(states["numpy"])


def restore_config(module: Any, saved: dict[str, Any]) -> None:
    """Each key of a config module that differs from ``saved`` set back (keys added since are left)."""
    current = module.get_config_copy()
    for key, value in saved.items():
        if key in current and _differs(current[key], value):
            try:
                setattr(module, key, value)
            except Exception as error:  # noqa: BLE001 - said, and the other keys still restored
                log.warning("could not restore %s.%s to %r: %s", module.__name__, key, value, error)


def _differs(current: Any, saved: Any) -> bool:
    try:
        return bool(current != saved)
    except Exception:  # noqa: BLE001 - a value without equality (an object): compared by identity
        return current is not saved


@contextlib.contextmanager
def caller_state_kept(*objects: Any) -> Iterator[None]:
    """Run the block; then put back the state of ``objects`` (models, inputs) and of the process
    (random states, torch's flags and configs, environment variables, Dynamo's compiled code)."""
    tensors, modules = tensors_of(objects)
    saved = save_tensors(tensors)
    training = [(module, module.training) for root in modules for module in root.modules()]
    flags = global_flags()
    flag_values = {name: read() for name, (read, _write) in flags.items()}
    configs = [(module, module.get_config_copy()) for module in config_modules()]
    states = random_states()
    environment = dict(os.environ)
    try:
        with dynamo_caches_kept():
            yield
    finally:
        restore_tensors(saved)
        for module, mode in training:
            module.training = mode  # this module only: its children have their own entries
        for name, (read, write) in flags.items():
            if _differs(read(), flag_values[name]):
                write(flag_values[name])
        for config, values in configs:
            restore_config(config, values)
        restore_random_states(states)
        if dict(os.environ) != environment:
            os.environ.clear()
            os.environ.update(environment)
