"""Values moved to memory-mapped files while a step that needs room runs (issue 34).

Nothing reads a value while it waits, and every later reader reads it as it was. :func:`spill`
moves each storage onto a file written once and mapped back privately (``MAP_PRIVATE``): the same
tensor objects, the same bits, the same sharing between them (each storage moved once, every
tensor on it re-pointed with its offset, sizes and strides), read back page by page where a later
step reads them, and until then on disk, not in the process's memory (file pages, which the kernel
can drop and read again). The file is unlinked as soon as it is mapped: nothing to remove at the
end, nothing a killed run leaves; a moved tensor pickles, saves and copies as any other (not
through ``torch.multiprocessing``'s file-descriptor sharing, which nothing here uses). Never
moved: what the caller protects (tensors held by reference), storages under :data:`MIN_BYTES`,
tensors other than plain strided CPU ones; nothing at all where the folder is itself in memory
(tmpfs, ramfs). Callers, each before a run that
reads none of what it moves: the upstream gate's model-level check
(``localise/release.spill_run_values``: the graphs' values), the model-level check's fp64 reference run, noise
run and reruns (``localise/model_check._results_wait``: the runs' results), a departure listing's
fp64 and noise runs (``strategies/departures.find_departures``: the graph's values,
:func:`spill_graph_values`), the whole graph's judgement (``oracle.GraphContext``: the values it reads
none of, :func:`spill_unread`).

**When and where** (:class:`Offload`, the run's, set at its edge with :func:`using`): a caller
says what the step it is about to run will add (``need``, bytes, an estimate) and values move only
where that would not fit in the room the run's memory budget leaves (``load/memory.MemoryGuard.room``:
under ``--memory-budget``, above the memory the machine keeps free); with room to spare nothing is
written. They move into the output folder's private scratch (``OutputFolder.scratch``), else the
system's temporary folder (where the output folder is itself in memory or cannot take a folder). A
call outside a run's :func:`using` moves nothing (no budget to ask): the run's values stay where they are.
"""
from __future__ import annotations

import contextlib
import contextvars
import ctypes
import dataclasses
import logging
import os
import sys
import tempfile
import time
from typing import Any, Callable, Iterable, Iterator

import torch

from ..search import error_line
from . import fx_eval

log = logging.getLogger(__name__)

MIN_BYTES = 1 << 20  # smaller storages stay: the allocator would keep their pages anyway
IN_MEMORY = ("tmpfs", "ramfs")
MADV_PAGEOUT = 21  # linux/mman.h
PREFIX = "bisect-spill-"  # the files' names (unlinked once mapped: "(deleted)" in /proc/self/maps)
# An op adding at least this much is weighed against the room before it runs, whenever it comes;
# smaller ones at most every WATCH_EVERY_S (what they add shows in what is held by the next ask).
WATCH_BYTES = 16 << 20
WATCH_EVERY_S = 0.05
_WRITE_CHUNK = 1 << 22  # elements written to a disk copy at a time (32 MiB of fp64)


def tensors_in(roots: Iterable[Any], skip: tuple[type, ...] = ()) -> list[torch.Tensor]:
    """Every tensor reachable from ``roots`` through dataclasses (their instance attributes),
    dicts, lists, tuples and sets, each object visited once; ``skip``: types not entered."""
    found: list[torch.Tensor] = []
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, skip):
            continue
        seen.add(id(item))
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            attributes = getattr(item, "__dict__", None)  # fields, private ones and cached properties
            stack.extend(attributes.values() if attributes is not None
                         else [getattr(item, f.name, None) for f in dataclasses.fields(item)])
    return found


def _movable(tensor: torch.Tensor) -> bool:
    return (type(tensor) is torch.Tensor and tensor.layout == torch.strided and tensor.device.type == "cpu"
            and not tensor.is_quantized and not tensor.is_inference() and not tensor.requires_grad)


def scratch_on_disk(folder: str) -> bool:
    """Whether ``folder`` lies on a file system whose pages are not memory (its mount's type)."""
    path, best, fstype = os.path.realpath(folder), "", ""
    try:
        with open("/proc/self/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                mount = fields[1].replace("\\040", " ")
                inside = path == mount or path.startswith(mount.rstrip("/") + "/")
                if inside and len(mount) >= len(best):
                    best, fstype = mount, fields[2]
    except OSError:  # no mount table to read: assume the worst (nothing moved)
        return False
    return bool(best) and fstype not in IN_MEMORY


def _spilled_ranges() -> list[tuple[int, int]]:
    """The address ranges of this process's mappings of moved values (their files' prefix)."""
    ranges = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if PREFIX in line:
                    start, end = line.split(maxsplit=1)[0].split("-")
                    ranges.append((int(start, 16), int(end, 16)))
    except OSError:
        pass
    return ranges


def _to_file(chunks: Iterable[memoryview], nbytes: int, folder: str) -> torch.UntypedStorage:
    """``chunks`` (``nbytes`` in all) written to a new file in ``folder``, mapped back privately, the
    file unlinked: every file this module makes."""
    handle, path = tempfile.mkstemp(prefix=PREFIX, dir=folder)
    try:
        with os.fdopen(handle, "wb") as file:
            for chunk in chunks:
                file.write(chunk)
        return torch.UntypedStorage.from_file(path, shared=False, nbytes=nbytes)
    finally:
        os.unlink(path)


def spill(tensors: Iterable[torch.Tensor], protected: Iterable[torch.Tensor], folder: str | None = None) -> int:
    """Move the storages of ``tensors`` (none shared with ``protected``) onto memory-mapped files in
    ``folder`` (the system's temporary folder by default); returns the bytes moved. Every tensor on
    a moved storage keeps its identity, bits, offset, sizes and strides (its version counter moves
    by one); a storage any of whose tensors cannot be re-pointed stays where it is."""
    folder = folder or tempfile.gettempdir()
    if not scratch_on_disk(folder):
        log.debug("offload: %s is in memory; nothing moved", folder)
        return 0
    kept = {t.untyped_storage().data_ptr() for t in protected
            if isinstance(t, torch.Tensor) and t.layout == torch.strided}
    moved_before = _spilled_ranges()  # a storage moved by an earlier call stays where it is
    groups: dict[int, list[torch.Tensor]] = {}
    for tensor in tensors:
        if tensor.layout != torch.strided or tensor.device.type != "cpu":
            continue
        groups.setdefault(tensor.untyped_storage().data_ptr(), []).append(tensor)
    # one moved before and read back since (judged) is in memory again: its pages leave once more
    _page_out([(start, end) for start, end in moved_before
               if any(start <= pointer < end for pointer in groups if pointer not in kept)])
    moved = 0
    for pointer, group in groups.items():
        storage = group[0].untyped_storage()
        if pointer == 0 or pointer in kept or storage.nbytes() < MIN_BYTES or not all(map(_movable, group)) \
                or any(start <= pointer < end for start, end in moved_before):
            continue
        try:
            mapped = _to_file([memoryview(torch.empty(0, dtype=torch.uint8).set_(storage).numpy())], storage.nbytes(),
                              folder)
        except OSError as error:  # the folder full or unwritable: what is left stays in memory (never a crash)
            log.info("offload: stopped moving values to %s: %s", folder, error)
            break
        done: list[torch.Tensor] = []
        try:
            with torch.no_grad():
                for tensor in group:
                    tensor.set_(mapped, tensor.storage_offset(), tensor.size(), tensor.stride())
                    done.append(tensor)
        except RuntimeError as error:  # put back: the group keeps sharing one storage
            log.debug("offload: a storage stays in memory: %s", error)
            with torch.no_grad():
                for tensor in done:
                    tensor.set_(storage, tensor.storage_offset(), tensor.size(), tensor.stride())
            continue
        moved += storage.nbytes()
    if moved:
        _trim()
    return moved


class PagedOut:
    """Gives the pages of moved values back after a read (a report's digests read each value
    once, in turn): :meth:`__call__` with the tensors just read pages out the mappings they lie on.
    The mappings are read once, at construction (nothing moves while it is used)."""

    def __init__(self) -> None:
        self.ranges = _spilled_ranges()

    def __call__(self, *tensors: Any) -> None:
        if not self.ranges:
            return
        pointers = [t.untyped_storage().data_ptr() for t in tensors
                    if isinstance(t, torch.Tensor) and t.layout == torch.strided and t.device.type == "cpu"]
        _page_out([(start, end) for start, end in self.ranges if any(start <= p < end for p in pointers)])


def _page_out(ranges: list[tuple[int, int]]) -> None:
    """The pages of moved values that a read brought back into memory leave it again
    (``madvise(MADV_PAGEOUT)``, Linux 5.4+): an unwritten page is the file's, dropped and read
    again from it on the next read; a page written since the move is the process's own and stays
    (no swap: nothing is lost). Elsewhere nothing happens."""
    if not ranges or not sys.platform.startswith("linux"):
        return
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for start, end in ranges:
        madvise(start, end - start, MADV_PAGEOUT)  # refused (an older kernel): the pages stay, as before


def _trim() -> None:
    """Hand the memory the moved storages freed back to the system (glibc's ``malloc_trim``): a
    freed block amid the heap otherwise stays resident beside the file pages read back later."""
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc: its allocator keeps what it keeps
        return
    trim(0)


def storage_bytes(tensors: Iterable[Any]) -> int:
    """The bytes of the distinct CPU storages under ``tensors`` (each storage counted once)."""
    seen: dict[int, int] = {}
    for tensor in tensors:
        if isinstance(tensor, torch.Tensor) and tensor.layout == torch.strided and tensor.device.type == "cpu":
            storage = tensor.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


@dataclasses.dataclass
class Offload:
    """When the run's values leave memory and where they go: ``room`` (bytes the run may still take
    before its memory budget or the machine's reserve; None: nothing known, nothing moves) against
    what the next step will add; ``folder``: where the files go (None: the system's temporary
    folder), ``fallback``: why not the output folder's scratch. Counts what it moved (the report's
    ``stats.offload``)."""

    room: Callable[[], int | None] = lambda: None
    # bytes the run may still hold in memory (``MemoryGuard.room``; None: not known): what
    # :meth:`fits` weighs a step against, whatever :attr:`room` says about moving values
    memory_room: Callable[[], int | None] = lambda: None
    folder: str | None = None
    fallback: str | None = None
    # the run's stop for a step that cannot fit even once values moved (``search.Budget.require``;
    # None: no stop, outside a run's search)
    require: Callable[[int, str], None] | None = None
    moved: int = 0  # bytes moved, every call
    moves: int = 0  # calls that moved something
    asked: int = 0  # calls made (moves or not)
    disk_copies: int = 0  # tensors copied straight to disk (an fp64 model on disk: :meth:`disk_copy`)
    # bytes a device can still take before its reserve (``load/memory.device_room``; None: not known,
    # not asked): what :meth:`watch` weighs an op of an fp64 run on that device against
    device_room: Callable[[torch.device], int | None] = lambda device: None
    to_host: int = 0  # fp64 or noise runs moved to the host because their device could not take an op
    watched_at: float = float("-inf")  # when :meth:`watch` last asked :attr:`require`

    def wanted(self, need: int) -> bool:
        """Whether a step adding ``need`` bytes would pass the room left."""
        room = self.room()
        return room is not None and need > room

    def spill(self, tensors: Iterable[torch.Tensor], protected: Iterable[torch.Tensor], need: int,
              what: str | None = None) -> int:
        """:func:`spill` of ``tensors`` into :attr:`folder` where :meth:`wanted` (``need``); else 0.
        ``what`` names the step: where it still cannot fit once they moved, :attr:`require` stops
        the run before it (a budget cut, never the OOM killer)."""
        self.asked += 1
        moved = self.move(tensors, protected) if self.wanted(need) else 0
        if what is not None and self.require is not None:
            self.require(need, what)
        return moved

    def fits(self, need: int) -> bool:
        """Whether a step adding ``need`` bytes fits in memory (:attr:`memory_room`; True where not known)."""
        room = self.memory_room()
        return room is None or need <= room

    def on_disk(self) -> bool:
        """Whether values can go to a file here (:attr:`folder` is on a disk, not in memory)."""
        return scratch_on_disk(self.folder or tempfile.gettempdir())

    def weigh_on(self, device: torch.device | None, need: int, what: str, need_on_disk: int | None = None,
                 what_on_disk: str = "") -> tuple[bool, bool]:
        """A step adding ``need`` bytes on ``device`` (a CUDA one; None: the host), as :meth:`weigh`:
        on the device where its room (:attr:`device_room`) takes it (the guard's stops asked), else on
        the host, weighed there by :meth:`weigh` (in memory or on disk; the run stops before it
        where neither fits). ``(on the host, on disk)``."""
        if fx_eval.off_host(device):
            room = self.device_room(device)
            if room is None or need <= room:
                if self.require is not None:
                    self.require(0, what)
                return False, False
            where = f" on the host ({device} has {max(room, 0) >> 20} MiB left)"
            return True, self.weigh(need, what + where, need_on_disk, what_on_disk + where)
        return False, self.weigh(need, what, need_on_disk, what_on_disk)

    def weigh(self, need: int, what: str, need_on_disk: int | None = None, what_on_disk: str = "") -> bool:
        """A step adding ``need`` bytes in memory (``what``), or ``need_on_disk`` with its large values
        on disk instead (``what_on_disk``; None: it has no such way), weighed by :attr:`require`: in
        memory where that fits or no disk can take the files, else on disk; the run stops before it
        where the way taken does not fit. Whether it goes on disk (never outside a run's search)."""
        if self.require is None:
            return False
        if need_on_disk is None or self.fits(need) or not self.on_disk():
            self.require(need, what)
            return False
        self.require(need_on_disk, what_on_disk)
        return True

    def disk_copy(self, tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
        """A contiguous copy of ``tensor`` in ``dtype`` that lives in a memory-mapped file (written a
        chunk at a time, so never whole in memory; mapped back privately and never written, so its
        pages are the file's: read in as used, dropped by the kernel as it needs), counted as moved;
        None where the folder cannot take it (in memory, full, unwritable)."""
        if tensor.device.type != "cpu" or not self.on_disk():
            return None
        flat = tensor.detach().reshape(-1)
        nbytes = flat.numel() * torch.empty(0, dtype=dtype).element_size()
        chunks = (memoryview(flat[start:start + _WRITE_CHUNK].to(dtype).numpy())
                  for start in range(0, flat.numel(), _WRITE_CHUNK))
        try:
            mapped = _to_file(chunks, nbytes, self.folder or tempfile.gettempdir())
        except OSError as error:
            log.info("offload: no copy on disk in %s: %s", self.folder, error)
            return None
        self.moved += nbytes
        self.moves += 1
        self.disk_copies += 1
        return torch.empty(0, dtype=dtype).set_(mapped, 0, tensor.shape)

    def move(self, tensors: Iterable[torch.Tensor], protected: Iterable[torch.Tensor] = ()) -> int:
        """:func:`spill` of ``tensors`` (none shared with ``protected``) into :attr:`folder` whatever
        the room (:meth:`spill` where memory asks; a step that put its values on disk,
        :meth:`disk_copy`, moves its results too), counted."""
        moved = spill(tensors, protected, self.folder)
        self.moved += moved
        self.moves += bool(moved)
        return moved

    def watch(self, node: Any, need: int, device: torch.device | None = None,
              failed: BaseException | None = None) -> bool:
        """Before an op of an fp64 or noise run (``fx_eval.watch_op``): :attr:`require` asked whether
        its ``need`` still fits, so that a run stops before the op that cannot fit (exit 4, with what
        it learned), never in it by the OOM killer. An op on a device (``device``, a CUDA one) is
        weighed against that device's room (:attr:`device_room`) instead: where it cannot take the op
        and the host can, the answer is True and the run goes on on the host (an fp64 reference too
        large for the device computed on the host, counted in :attr:`to_host`; its caller asks the
        host again with what it moves); where neither can, the run stops. Ops under
        :data:`WATCH_BYTES` are let through for :data:`WATCH_EVERY_S` after the last ask (each ask
        reads /proc: ~0.1 ms). ``failed``: the allocation error an op the watch let run on the
        device met there all the same (a workspace, fragmentation): the host alone is asked (True
        where it takes the op; the run stops where it cannot)."""
        if self.require is None:
            return False
        now = time.monotonic()
        if failed is None and need < WATCH_BYTES and now - self.watched_at < WATCH_EVERY_S:
            return False
        self.watched_at = now
        what = f"evaluating node {node.name} ({node.target})"
        if failed is not None and fx_eval.off_host(device):
            self.weigh(need, f"{what} on the host (its allocation on {device} failed: {error_line(failed, 200)})")
            host = True
        else:
            host, _ = self.weigh_on(device, need, what)
        if host:
            self.to_host += 1
            log.info("offload: %s needs %d MiB and %s cannot take it: the fp64 run goes on on the host",
                     what, need >> 20, device)
        return host

    def to_json(self) -> dict[str, Any]:
        return {"moved_mb": self.moved >> 20, "moves": self.moves, "asked": self.asked,
                **({"disk_copies": self.disk_copies} if self.disk_copies else {}),
                **({"fp64_on_host": self.to_host} if self.to_host else {}),
                "folder": "system_temp" if self.folder is None else "output_scratch",
                **({"fallback": self.fallback} if self.fallback else {})}


_RUN: contextvars.ContextVar[Offload | None] = contextvars.ContextVar("bisect_offload", default=None)


@contextlib.contextmanager
def using(policy: Offload) -> Iterator[Offload]:
    """``policy`` decides every move made inside the block (the run's edge sets it), and watches
    every op the fp64 and noise runs inside it evaluate (:meth:`Offload.watch`)."""
    token = _RUN.set(policy)
    try:
        with fx_eval.watching(policy.watch if policy.require is not None else None):
            yield policy
    finally:
        _RUN.reset(token)


def running() -> Offload | None:
    """The policy a run's edge set (:func:`using`), if any."""
    return _RUN.get()


def current() -> Offload:
    """The run's policy; outside a run, one that moves nothing."""
    return _RUN.get() or Offload()


def offload(tensors: Iterable[torch.Tensor], protected: Iterable[torch.Tensor], need: int,
            what: str | None = None) -> int:
    """:meth:`Offload.spill` under the run's policy (:func:`current`)."""
    return current().spill(tensors, protected, need, what)


def page_out(*tensors: Any) -> None:
    """The pages of ``tensors`` that lie in files (moved values, disk copies) leave memory now
    (:class:`PagedOut`); a tensor in memory is left as it is."""
    PagedOut()(*tensors)


def attributes_of(graph_module: Any) -> list[torch.Tensor]:
    """The tensors a graph reads as attributes (its ``get_attr`` constants): the graph's own, never moved."""
    found = []
    for node in graph_module.graph.nodes:
        if node.op == "get_attr":
            value = graph_module
            for part in str(node.target).split("."):
                value = getattr(value, part, None)
            if isinstance(value, torch.Tensor):
                found.append(value)
    return found


def spill_graph_values(context: Any, *others: Any) -> int:
    """:func:`offload` of what a graph's context holds (its eager values, its replays) and ``others``
    (compiled values, fp64 references), its captured graph's inputs and constants never moved: for
    a run of the graph from its captured inputs that reads none of them (an fp64 run or the noise
    model's, each needing about twice the graph's eager values: their fp64 live set)."""
    held = tensors_in([context.eager_values, context._replays, *others])
    return offload(held, _graphs_own(context.captured), need=_fp64_run_need(context),
                   what=f"an fp64 run of graph {context.name}")


def _graphs_own(captured: Any, *read: Any) -> list[torch.Tensor]:
    """What a spill of a graph's values never moves: its captured inputs (parameters held by
    reference among them), its constants, and the tensors in ``read`` (what the run reads)."""
    return [*tensors_in([captured.inputs, captured.shared, *read]), *attributes_of(captured.graph_module)]


def _fp64_run_need(context: Any) -> int:
    """About what an fp64 run of a graph adds: twice its eager values (their fp64 live set)."""
    return 2 * storage_bytes(tensors_in([context.eager_values]))


def spill_unread(context: Any, read: Iterable[str]) -> int:
    """:func:`offload` of the eager values of a graph's context that a run reading only the values
    named ``read`` leaves alone: the whole graph's judgement (its compiled and fp64 runs read the
    captured inputs, and each output is judged beside eager's and compiled's) holds the graph's
    outputs and inputs, and every value computed in between (a backward's activation gradients,
    a per-node check's inputs if it comes to that) waits on disk meanwhile, paged back in where a
    later step reads it. A value read back since an earlier move leaves memory again. Never moved:
    the storages of the values read, the captured inputs and the graph's constants. Where it
    cannot fit even so, the op-by-op watch inside the run says so (nothing is stopped here)."""
    values, named = context.eager_values, set(read)
    held = tensors_in([[v for n, v in values.items() if n not in named]])
    return offload(held, _graphs_own(context.captured, [v for n, v in values.items() if n in named]),
                   need=_fp64_run_need(context))

