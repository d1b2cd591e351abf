"""Memory: what a run may use, said before it starts and watched while it goes.

Admission (:func:`check_memory`): a run is refused up front (exit 2) only when the model's own
training step cannot fit: its parameters and inputs and what its step adds at its peak (activations,
gradients, temporaries), measured by a run of it on fake tensors (:func:`eager_step_bytes`; where it
cannot run so, its gradients: :data:`EAGER_COPIES`) beyond the memory available; what eager can run
starts. The same measure counts the activations of the model-level check's fp64 run
(``localise/model_check.fp64_activation_bytes``). While it runs, :class:`MemoryGuard` is asked with
the clock before every evaluation and compile (``search.Budget.memory``): past ``--memory-budget``
(what this process holds resident that only it can give back: anonymous pages, not the file pages of
values on disk), with less than :func:`reserve_bytes` left on the machine, or less than
:func:`device_reserve_bytes` on a CUDA device the run holds memory on, the run stops
there as a budget cut (exit 4, ``incomplete``, the report of what was learned), before the OOM
killer would. A step that adds much in one go (judging a graph, an fp64 copy of the model and its
run) says so first: values wait on disk where memory asks (:func:`run_offload`, the guard's
:meth:`MemoryGuard.room`), and where it still cannot fit the run stops before it the same way
(``search.Budget.require``), never in it.
"""
from __future__ import annotations

import contextlib
import copy
import ctypes
import logging
import os
import sys
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from ..errors import UsageError
from ..verdict.offload import Offload

# Parameters + gradients (1 + 1), their fp64 copies for the model-level reference (2 + 2), eager's
# and the compiled run's results (1 + 1): what the model-level check is said to need
# (``localise/release.model_check_need``); a run that cannot give it stops before that check (exit 4).
COPIES = 8
# The parameters and their gradients: what the user's own training step holds at the least
# (with its inputs, once); a run that cannot hold even this is refused before starting.
EAGER_COPIES = 2
GIB = 2**30
log = logging.getLogger(__name__)


def tensor_bytes(values: Any) -> int:
    return sum(v.numel() * v.element_size() for v in pytree.tree_leaves(values)
               if isinstance(v, torch.Tensor) and v.device.type == "cpu")


def _meminfo(key: str) -> int | None:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def available_bytes() -> int | None:
    """MemAvailable from /proc/meminfo (Linux); None elsewhere."""
    return _meminfo("MemAvailable")


def rss_bytes() -> int | None:
    """The memory this process holds that only it can give back (Linux; None elsewhere): its
    anonymous and shared-memory pages resident (``RssAnon`` + ``RssShmem``). Its file pages (values
    moved to disk and read back, an fp64 model on disk, its libraries) are the disk's: the kernel
    drops them as it needs, so they count against no budget."""
    try:
        with open("/proc/self/status") as status:
            fields = dict(line.split(":", 1) for line in status if line.startswith(("RssAnon:", "RssShmem:")))
        return sum(int(value.split()[0]) * 1024 for value in fields.values()) if fields else None
    except (OSError, ValueError, IndexError):
        return None


def peak_rss_bytes() -> int | None:
    """This process's peak resident set so far (``ru_maxrss``; KiB on Linux); None where unknown."""
    try:
        import resource
    except ImportError:  # not POSIX
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


M_MMAP_THRESHOLD = -3  # glibc's malloc.h


def return_freed_memory(threshold: int = 128 << 10) -> bool:
    """glibc's malloc serves every block of ``threshold`` bytes or more from a mapping of its own,
    handed back to the system when freed; True where that was set. Left alone, glibc raises that
    threshold to the largest block freed so far (up to 32 MiB) and serves smaller blocks from its
    heaps, whose freed memory mostly stays with the process: a run's values let go once judged
    stayed resident (the activation series' 16 K-token step began its model-level check at 1,877 MB
    resident, 549 with this; its peak fell from 3,847 to 2,403 MB; GPT-2 small's clean step 5,221 ->
    4,740 MB). Its price is time: every large block is faulted in afresh (that GPT-2 step 208 -> 299 s;
    ``malloc_trim`` at the steps that let values go instead kept its 5,224 MB). For the CLI's own process
    without ``--memory-budget`` (the run's edge), never a user's: set once, it holds for the process's life."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc: its allocator keeps what it keeps
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, threshold))


def device_free_bytes() -> list[tuple[str, int, int]]:
    """``(device, free bytes, total bytes)`` of each CUDA device this process holds memory on: the
    driver's free memory plus what torch's caching allocator holds and does not use (it hands that out
    again before it asks the driver); empty without CUDA. A device this process never allocated on
    is not asked (asking would make a context there)."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return []
    devices = []
    for index in range(torch.cuda.device_count()):
        try:
            reserved = torch.cuda.memory_reserved(index)
            if reserved <= 0:
                continue
            free, total = torch.cuda.mem_get_info(index)
            devices.append((f"cuda:{index}", free + max(reserved - torch.cuda.memory_allocated(index), 0), total))
        except RuntimeError as error:  # a device in a bad state says so at its next use, not here
            log.debug("cuda:%d: no memory figures: %s", index, error)
    return devices


# Tests only (a GPU session's check of the host fallback on every CUDA case of the corpus): the MiB
# every device is said to have room for, whatever it has (0: no fp64 run fits a device).
DEVICE_ROOM_FOR_TESTS = "BISECT_TESTING_DEVICE_ROOM"


def device_room(device: torch.device,
                devices: Callable[[], list[tuple[str, int, int]]] = device_free_bytes) -> int | None:
    """Bytes ``device`` (a CUDA one) can still take before the memory kept free of it
    (:func:`device_reserve_bytes`); None where this process holds nothing there (not asked). A
    testing hook may set it (:data:`DEVICE_ROOM_FOR_TESTS`)."""
    forced = os.environ.get(DEVICE_ROOM_FOR_TESTS)
    if forced:
        return int(forced) << 20
    listed = devices()
    if not listed:
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    for name, free, total in listed:
        if name == f"{device.type}:{index}":
            return free - device_reserve_bytes(total)
    return None


def device_reserve_bytes(total: int) -> int:
    """Memory kept free of ``total`` bytes (the machine's, a device's: a compiled kernel's workspace,
    cuBLAS's, autotuning's trial runs there): 5 % of it, between 512 MiB and 2 GiB."""
    return min(max(total // 20, 512 << 20), 2 * GIB)


def reserve_bytes() -> int:
    """Memory kept free on the machine (:func:`device_reserve_bytes` of its total)."""
    return device_reserve_bytes(_meminfo("MemTotal") or 0)


@dataclass
class MemoryGuard:
    """Why memory is too short to go on, or None: this process past ``budget`` bytes of RSS
    (``--memory-budget``), or the machine's available memory below ``reserve`` bytes."""

    budget: int | None = None
    reserve: int = field(default_factory=reserve_bytes)
    available: Callable[[], int | None] = available_bytes
    rss: Callable[[], int | None] = rss_bytes
    # the CUDA devices the run holds memory on (:func:`device_free_bytes`), each kept
    # :func:`device_reserve_bytes` free: what stops the run before a device's allocator fails (an
    # allocation that fails all the same is the run's memory cut too: ``search.out_of_memory``)
    devices: Callable[[], list[tuple[str, int, int]]] = device_free_bytes

    def room(self) -> int | None:
        """Bytes the run may still take: under ``budget`` (past this process's RSS) and above
        ``reserve`` (of the machine's available memory), the smaller; None where neither is known.
        What ``verdict/offload.Offload`` asks before moving values to disk."""
        held, free = self.rss(), self.available()
        rooms = [r for r in ((self.budget - held) if self.budget is not None and held is not None else None,
                             (free - self.reserve) if free is not None else None) if r is not None]
        return min(rooms) if rooms else None

    def __call__(self) -> str | None:
        held = self.rss()
        if self.budget is not None and held is not None and held > self.budget:
            return (f"memory: the run holds {held / GIB:.2f} GiB, past --memory-budget {self.budget / GIB:.2f} GiB")
        free = self.available()
        if free is not None and free < self.reserve:
            return (f"memory: {free / GIB:.2f} GiB left on the machine, under the {self.reserve / GIB:.2f} GiB kept "
                    "free (stopped before the OOM killer would)")
        for device, device_free, total in self.devices():
            kept = device_reserve_bytes(total)
            if device_free < kept:
                return (f"memory: {device_free / GIB:.2f} GiB left on {device}, under the {kept / GIB:.2f} GiB kept "
                        "free (stopped before its allocator would fail)")
        return None


def check_memory(model: Any, inputs: Any, available: Callable[[], int | None] | None = None,
                 budget: int | None = None, step: int | None = None) -> None:
    """Refuse (``UsageError``) a run whose model's own step cannot fit: its parameters and inputs
    and what its step adds at its peak (``step``: :func:`eager_step_bytes`, its activations,
    gradients and temporaries; where not known, its gradients: :data:`EAGER_COPIES` times its
    parameters) beyond the memory available (or ``budget``, ``--memory-budget``). What fits that
    starts; its later steps that cannot fit stop it then (exit 4, a report)."""
    parameters = list(model.parameters()) if isinstance(model, torch.nn.Module) else []
    held = tensor_bytes(parameters) + tensor_bytes(inputs)
    footprint = held + (step if step is not None else (EAGER_COPIES - 1) * tensor_bytes(parameters))
    free = (available or available_bytes)()
    room = min(x for x in (free, budget) if x is not None) if (free, budget) != (None, None) else None
    if room is None or footprint <= room:
        return
    what = ("the model's parameters, their gradients and its inputs take" if step is None else
            f"the model's parameters and inputs ({held / GIB:.2f} GiB) and what its own step adds at its peak "
            f"(activations, gradients: {step / GIB:.2f} GiB, from a run of it on fake tensors) take")
    raise UsageError(f"{what} {footprint / GIB:.2f} GiB, "
                     f"more than the model's own training step can have: {room / GIB:.2f} GiB is available"
                     f"{' under --memory-budget' if budget is not None and room == budget else ''}: refused before "
                     "starting; use smaller inputs (a smaller batch or sequence) in get_inputs() or a smaller model")


class _LiveBytes(TorchDispatchMode):
    """The bytes of the storages the ops inside it made that are still alive, and their peak: each
    new storage counted once (a view of one counts nothing), let go when its last tensor is."""

    def __init__(self, given: list[torch.Tensor]) -> None:
        super().__init__()
        self.live = self.peak = 0
        self.counted: dict[int, int] = {id(t.untyped_storage()): 0 for t in given}  # held already: not the step's

    def _count(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        key = id(storage)
        if key in self.counted:
            return
        size = self.counted[key] = storage.nbytes()
        self.live += size
        self.peak = max(self.peak, self.live)
        weakref.finalize(storage, self._gone, key, size)

    def _gone(self, key: int, size: int) -> None:
        if self.counted.pop(key, None) is not None:
            self.live -= size

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for value in pytree.tree_leaves(out):
            if isinstance(value, torch.Tensor):
                self._count(value)
        return out


def step_peak_bytes(model: Any, inputs: tuple[Any, ...], loss_fn: Callable[[Any], Any] | None,
                    values: dict[str, torch.Tensor] | None = None) -> int:
    """The peak bytes ``model``'s step adds beside its parameters, buffers and inputs: its forward
    and, with ``loss_fn``, the loss and the gradients of every parameter that takes one (activations
    kept for the backward, gradients, temporaries), counted as the ops make and free them.
    ``values``: the parameters and buffers to run it with, by name (``functional_call``; None: its
    own); :func:`eager_step_bytes` gives fake twins."""
    module = isinstance(model, torch.nn.Module)
    if values is None:
        values = dict([*model.named_parameters(), *model.named_buffers()]) if module else {}
    parameters = {name for name, _ in model.named_parameters()} if module else set()
    live = _LiveBytes([*values.values(), *(v for v in pytree.tree_leaves(inputs) if isinstance(v, torch.Tensor))])
    with live:
        output = torch.func.functional_call(model, values, inputs) if module else model(*inputs)
        if loss_fn is not None:
            loss = loss_fn(output)
            del output
            wanted = [value for name, value in values.items() if name in parameters and value.requires_grad]
            if wanted and isinstance(loss, torch.Tensor) and loss.requires_grad:
                grads = torch.autograd.grad(loss, wanted, allow_unused=True)
                del grads
            del loss
    return live.peak


def eager_step_bytes(model: Any, inputs: tuple[Any, ...], loss_fn: Callable[[Any], Any] | None) -> int | None:
    """What the model's own step adds at its peak (:func:`step_peak_bytes`), from a run of it on fake
    tensors (``FakeTensorMode``: shapes and dtypes only, no memory, no kernel; about a second for
    GPT-2 small): its parameters, buffers and inputs are swapped for fake twins for the call
    (``torch.func.functional_call``: the model's own are put back), torch's random state is kept,
    and a part the program compiled runs eagerly (``set_stance("force_eager")``: nothing compiled).
    None where it cannot run so (a CPU model only; a step that reads a value, ``.item()``, or raises):
    admission then counts its gradients only."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    if not isinstance(model, torch.nn.Module):
        return None
    values = dict([*model.named_parameters(), *model.named_buffers()])
    if any(t.device.type != "cpu" for t in [*values.values(), *pytree.tree_leaves(inputs)] if isinstance(t, torch.Tensor)):
        return None
    try:
        with torch.random.fork_rng(devices=[]), _attributes_kept(model):
            mode = FakeTensorMode(allow_non_fake_inputs=True)  # a tensor the step reads from elsewhere (a loss target)
            fake = {name: mode.from_tensor(value) for name, value in values.items()}  # requires_grad kept
            fake_inputs = pytree.tree_map(lambda v: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v, inputs)
            with mode, torch.compiler.set_stance("force_eager"):  # a compiled part runs eagerly: no compile
                return step_peak_bytes(model, tuple(fake_inputs), loss_fn, fake)
    except Exception as error:  # noqa: BLE001 - any failure: not known, the old rule applies
        log.debug("the step's memory could not be estimated on fake tensors: %s: %s", type(error).__name__, error)
        return None


@contextlib.contextmanager
def _attributes_kept(model: torch.nn.Module) -> Iterator[None]:
    """Every submodule's attributes put back as they were after the block: a forward that keeps a
    value on itself (a cache, a step counter, a list it appends to) keeps none of the fake run's
    (the attribute itself, and a list's, dict's or set's items, one level down)."""
    saved = []
    for module in model.modules():
        attributes = dict(module.__dict__)
        contents = {name: copy.copy(value) for name, value in attributes.items() if type(value) in (list, dict, set)}
        saved.append((module, attributes, contents))
    try:
        yield
    finally:
        for module, attributes, contents in saved:
            for name in [name for name in module.__dict__ if name not in attributes]:
                del module.__dict__[name]
            module.__dict__.update(attributes)
            for name, value in contents.items():  # the same container, its items as they were
                held = attributes[name]
                held.clear()
                held.extend(value) if isinstance(held, list) else held.update(value)


def run_offload(budget: int | None, folder: str | None, fallback: str | None = None,
                require: Callable[[int, str], None] | None = None) -> Offload:
    """The run's offload policy (``verdict/offload.py``): values move to ``folder`` (the output
    folder's scratch; None: the system's temporary folder, ``fallback`` says why). Under
    ``--memory-budget`` (``budget``) only when a step would not fit in the room it and the machine's
    free memory leave; without one at every spill point, so that the run stays near 3x eager's peak
    whatever the machine has free (GPT-2 small's clean step: 3.2x held in memory, 3.0-3.1x with them moved)."""
    return Offload(room=MemoryGuard(budget).room if budget is not None else (lambda: 0), folder=folder, fallback=fallback,
                   require=require, memory_room=MemoryGuard(budget).room, device_room=device_room)

