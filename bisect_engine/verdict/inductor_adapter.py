"""The one place that touches torch state no public hook reaches: forced aten fallbacks, and
routing every ``torch.compile`` through script mode's checking backend.

Inductor has no config or ``compile_fx`` argument to make one op fall back to its aten kernel, so
:func:`forced_fallbacks` registers a fallback lowering (``torch._inductor.lowering.make_fallback``)
and restores the lowering table, the fallback set and the realized-inputs set in ``finally``.
Everything else the engine changes goes through ``config.patch`` or ``compile_fx`` arguments;
the release-dependent ones (provenance tracking, the generated code a compile keeps) are read here.
A run in the caller's own process (``bisect_engine.check``) keeps the caller's compiled code
across the engine's Dynamo resets with :func:`dynamo_caches_kept` (Dynamo has no hook to reset only some code).
"""
from __future__ import annotations

import ast
import collections
import atexit
import contextlib
import contextvars
import copy
import functools
import importlib
import logging
import os
import sys
import threading
from typing import Any, Callable, Iterable, Iterator

import torch

from .kernels import OutputCode

log = logging.getLogger(__name__)


@contextlib.contextmanager
def forced_fallbacks(ops: Iterable[Any]) -> Iterator[None]:
    from torch._inductor import lowering

    ops = list(ops)
    saved_lowerings = {op: lowering.lowerings.get(op) for op in ops}
    saved_fallbacks = set(lowering.fallbacks)
    saved_realized = set(lowering.needs_realized_inputs)
    try:
        for op in ops:
            lowering.make_fallback(op, warn=False, override_decomp=True)
        yield
    finally:
        for op, saved in saved_lowerings.items():
            if saved is None:
                lowering.lowerings.pop(op, None)
            else:
                lowering.lowerings[op] = saved
        lowering.fallbacks.clear()
        lowering.fallbacks.update(saved_fallbacks)
        lowering.needs_realized_inputs.clear()
        lowering.needs_realized_inputs.update(saved_realized)


def default_decompositions() -> dict[Any, Any]:
    """A copy of the decomposition table Inductor compiles with under the current config."""
    from torch._inductor.decomposition import select_decomp_table

    return dict(select_decomp_table())


def is_lowered(op: Any) -> bool:
    from torch._inductor import lowering

    return isinstance(op, torch._ops.OpOverload) and op in lowering.lowerings


def nondefault_inductor_config() -> tuple[dict[str, Any], list[str]]:
    """The Inductor config the user's code set: (renderable as code, the other keys).

    Values that come from the environment or from import-time detection are left out: a fresh
    process in the same environment gets them anyway.
    """
    import torch._inductor.config as inductor_config
    from torch.utils._config_module import _UNSET_SENTINEL

    renderable: dict[str, Any] = {}
    other: list[str] = []
    current = inductor_config.get_config_copy()
    for key, entry in sorted(inductor_config._config.items()):  # type: ignore[attr-defined]  # no public list of entries
        override = entry.user_override
        override = override.get() if isinstance(override, contextvars.ContextVar) else override  # torch >= 2.12
        if override is _UNSET_SENTINEL or key.startswith("_") or key not in current:
            continue
        value = current[key]
        if value == entry.default:
            continue
        if _is_literal(value):
            renderable[key] = value
        else:
            other.append(key)
    return renderable, other


def provenance_patch() -> dict[str, Any]:
    """The ``compile_fx`` config patch that makes Inductor map each kernel it generates to the
    nodes it came from (``trace.provenance_tracking_level``, torch 2.9 and later); empty where the
    torch version has no such setting. It changes metadata only, never the generated code."""
    import torch._inductor.config as inductor_config

    return {"trace.provenance_tracking_level": 1} if hasattr(inductor_config.trace, "provenance_tracking_level") else {}


def output_code_of(compiled: Any) -> OutputCode:
    """What an inner compile generated: ``CompiledFxGraph.source_code`` and the provenance mapping
    it carries (attributes of some releases only: absent ones are empty)."""
    provenance = getattr(compiled, "inductor_provenance_mapping_str", None)
    return OutputCode(str(getattr(compiled, "source_code", "") or ""), provenance if isinstance(provenance, str) else None)


def _is_literal(value: Any) -> bool:
    try:
        return ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError):
        return False


@contextlib.contextmanager
def compiled_autograd_off() -> Iterator[None]:
    """Compiled autograd (``torch._dynamo.config.compiled_autograd``) off for the tool's own
    gradient checks: they run inside the program's compiled frame, where it is on, and would
    otherwise compile backward graphs the program never runs (no public switch; restored on exit)."""
    module = sys.modules.get("torch._dynamo.compiled_autograd")
    disable = getattr(module, "_disable", None)
    with (disable() if callable(disable) else contextlib.nullcontext()):
        yield


def in_compiled_autograd() -> bool:
    """Compiled autograd is running a backward now (its graph is being compiled or called):
    ``torch._dynamo.compiled_autograd.in_compiled_autograd_region``, no public accessor."""
    module = sys.modules.get("torch._dynamo.compiled_autograd")
    return bool(getattr(module, "in_compiled_autograd_region", False))


@contextlib.contextmanager
def compiles_routed_through(wrap: Callable[[Any], Any]) -> Iterator[None]:
    """Every ``torch.compile`` made inside compiles with ``wrap(backend)`` instead of ``backend``.

    ``torch.compile`` turns the user's ``backend``, ``mode`` and ``options`` into one backend
    object (``torch._TorchCompileInductorWrapper`` for Inductor, ``torch._TorchCompileWrapper``
    around ``torch._dynamo.lookup_backend(name)`` otherwise) and hands it to
    ``torch._dynamo.optimize``. No public hook lets a tool wrap that object
    (``torch.compiler.set_stance(force_backend=...)`` replaces it and loses the user's options),
    so ``torch._dynamo.optimize`` is replaced while the block runs: the one patch point that sees
    ``torch.compile``, ``nn.Module.compile`` and direct ``torch._dynamo.optimize`` calls alike,
    after torch has resolved the user's choices. Restored in ``finally``.
    """
    dynamo = importlib.import_module("torch._dynamo")
    original = dynamo.optimize

    @functools.wraps(original)
    def optimize(*args: Any, **kwargs: Any) -> Any:
        if args:
            args = (wrap(args[0]), *args[1:])
        else:
            kwargs["backend"] = wrap(kwargs.get("backend", "inductor"))
        return original(*args, **kwargs)

    dynamo.optimize = optimize  # type: ignore[attr-defined]
    try:
        yield
    finally:
        dynamo.optimize = original  # type: ignore[attr-defined]


def check_cache_dir() -> None:
    """Inductor's on-disk cache must be writable, or every compile fails for a reason that has
    nothing to do with the model: say so before any work (``UsageError``, exit 2)."""
    import tempfile

    from ..errors import UsageError

    where = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or "Inductor's default cache folder"
    try:
        from torch._inductor.runtime.cache_dir_utils import cache_dir  # a light module: os and tempfile

        folder = cache_dir()
        where = folder
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".bisect-accuracy-probe-"):
            pass
    except OSError as error:
        raise UsageError(f"Inductor's cache folder {where} is not writable ({error.strerror or error}); "
                         "set TORCHINDUCTOR_CACHE_DIR to a writable folder") from None


def warm_cpu_isa() -> threading.Thread | None:
    """Start warming Inductor's C++ toolchain for this process in a background thread and return it
    (None: the machine has no idle CPU to give it).

    The first C++ compile of a process asks which ISAs the machine can build and load
    (``cpu_vec_isa.valid_vec_isa_list``: a small C++ file compiled per ISA the CPU flags allow,
    each loaded by a child interpreter), then precompiles Inductor's kernel header for the ISA it
    picks (``cpp_cache_precompile_headers``; a 150 MB header, seconds of g++ on an empty cache).
    Here both run beside the capture instead of inside the first compile (:func:`_warm_toolchain`).
    Only on a machine with idle CPUs now (:func:`_busy`): on a busy one there are none to take, and
    the builds only slow the capture's intra-op threads (on the shared 2-core machine at load 2 the
    per-node check was measured slower with it; niced builds made the first compile wait on them).
    The answers are the ones the first compile would get (the same functions, cached for the
    process; the cache folder's lock serialises each build, so a compile that gets there first
    waits and reuses it). An error here is left for that compile to meet and report. Joined at exit."""
    return None if _busy() else start_cpu_isa_detection()


# Every module the warm-up's path imports, imported before its thread starts: a module first
# imported by that thread while the capture imports others (Dynamo imports lazily) can meet a
# partly initialised module there (seen: Dynamo's ModuleNotFoundError for
# torch.distributed.tensor.experimental._attention while the warm-up imported setuptools).
# tests/test_verify.py checks that the warm-up imports nothing beyond these.
WARM_IMPORTS = ("torch._inductor.cpu_vec_isa", "torch._inductor.codecache", "torch._inductor.cpp_builder",
                "torch.utils._filelock", "torch.utils.cpp_extension", "torch.utils.file_baton",
                "torch.utils._cpp_extension_versioner", "torch._appdirs")


def start_cpu_isa_detection() -> threading.Thread:
    """The warm-up of :func:`warm_cpu_isa` in a daemon thread, whatever the load."""
    for module in WARM_IMPORTS:
        importlib.import_module(module)
    thread = threading.Thread(target=_warm_toolchain, name="bisect-accuracy-cpu-isa", daemon=True)
    thread.start()
    _WARMING.append(thread)
    # Never left half-built at exit: a process that ends mid-build releases the folder's lock while
    # the compiler still writes, and a later process would take the partial library as an answer.
    atexit.register(thread.join)
    return thread


_WARMING: list[threading.Thread] = []  # this process's warm-ups


def toolchain_warming() -> bool:
    """Whether a warm-up of this process is still building (it took the cache folder's locks for
    the ISA checks first: another process sharing the folder waits for those builds, never makes
    them)."""
    return any(thread.is_alive() for thread in _WARMING)


def cpu_isa_detected() -> bool:
    """Whether this process has Inductor's CPU ISA answer already (its builds are then in the cache
    folder: another process sharing it only loads them, never builds them itself)."""
    from torch._inductor import cpu_vec_isa

    return cpu_vec_isa.valid_vec_isa_list.cache_info().currsize > 0


def _busy() -> bool:
    """Whether the CPUs are taken now: the tasks runnable at this instant (``/proc/loadavg``'s fourth
    field, this process's running thread less) where Linux says it, else the 1-minute load average,
    against half the CPUs. The instant count, not the average: a machine that just finished a long
    job is idle although its 1-minute average still says 1 or more."""
    try:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        return _runnable_now() >= cpus / 2
    except OSError:  # no load figures on this platform
        return False


def _runnable_now() -> float:
    try:
        with open("/proc/loadavg") as figures:
            running = figures.read().split()[3].split("/")[0]
        return max(int(running) - 1, 0)
    except (OSError, IndexError, ValueError):
        return os.getloadavg()[0]


# A kernel in the form Inductor's C++ codegen gives every CPU kernel (the same header, the same
# binding call): asking for it precompiles the header the first real kernel would. The binding's
# loader is never called, so the kernel itself is never built.
WARM_KERNEL = """#include <torch/csrc/inductor/cpp_prefix.h>
extern "C" void kernel(float* out_ptr0)
{
    out_ptr0[0] = 0.0f;
}
"""


def _warm_toolchain() -> None:
    """The ISA checks, each ISA's at once (they are independent builds; about 5.5 s one after the
    other and 3 s at once on 2 idle cores, cold), then the answer as Inductor asks it, then one
    tiny kernel asked of Inductor's own C++ binding cache, which precompiles the kernel header for
    the picked ISA and the compile flags in force (the first real kernel finds it built). Building
    that header beside the checks, for the ISA they would most likely pick, was measured slower on
    2 cores (16.9-17.5 s against 15.7-16.0 s to a verified repro on resmlp600): the capture beside
    it took 6.2 s instead of 4.0 s. So was niceness for the checks (18.3-18.6 s: the per-node check
    then waited on them)."""
    try:
        from torch._inductor import cpu_vec_isa
        from torch._inductor.codecache import CppPythonBindingsCodeCache

        checks = [threading.Thread(target=bool, args=(isa,), daemon=True) for isa in _candidate_isas(cpu_vec_isa)]
        for check in checks:
            check.start()
        for check in checks:
            check.join()
        cpu_vec_isa.valid_vec_isa_list()
        CppPythonBindingsCodeCache.load_pybinding_async(["float*"], WARM_KERNEL)  # never called: no kernel built
    except Exception:  # noqa: BLE001 - a warm-up only: the first compile does it all again
        log.debug("C++ toolchain warm-up failed; the first compile does it", exc_info=True)


def _candidate_isas(cpu_vec_isa: Any) -> list[Any]:
    """The ISAs whose check ``valid_vec_isa_list`` builds on this x86 machine (its own filter: the
    CPU's flags); elsewhere none (the detection itself runs next)."""
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        return []
    flags = cpu_vec_isa.x86_isa_checker()
    return [isa for isa in cpu_vec_isa.supported_vec_isa_list if all(flag in flags for flag in str(isa).split())]


def pre_grad_passes(graph_module: torch.fx.GraphModule, example_inputs: list[Any]) -> torch.fx.GraphModule:
    """Inductor's pre-grad (torch-level) passes applied to a copy of a Dynamo graph, as
    ``compile_fx`` applies them (the user's ``pre_grad_custom_pass`` included); no compile."""
    import copy

    from torch._inductor.compile_fx import _recursive_pre_grad_passes

    with torch.no_grad():
        return _recursive_pre_grad_passes(copy.deepcopy(graph_module), example_inputs)


@contextlib.contextmanager
def graphs_reaching_inductor(torch_level: Callable[[Any, list[Any]], Any] | None,
                             aten_level: Callable[[Any, list[Any], bool], Any], compile_forward: bool = False) -> Iterator[None]:
    """While a user's backend runs, every graph it hands Inductor goes to ``torch_level`` (what
    ``compile_fx`` receives, ``standalone_compile``'s included: a torch-level graph, before the
    pre-grad passes) or ``aten_level`` (what ``compile_fx_inner`` receives from the user's own AOT
    Autograd), whose callable replaces the compiled one. Inductor has no hook for the graphs its
    entry points receive, and the user's module holds its own reference to ``compile_fx``: the
    functions those entry points call are swapped here, and restored in ``finally``. ``torch_level``
    None: ``compile_fx`` runs as it is (its pre-grad passes, decompositions and partition), and only
    what it hands ``compile_fx_inner`` is recorded (Inductor's own compile recaptured).
    ``compile_forward``: a forward graph is compiled too (``compile_fx_inner`` as it is; the code
    is not run): the layouts it gives what it saves are reported to AOT Autograd, which hands the
    backward's example inputs those strides, as in the program."""
    from torch._inductor import compile_fx as module

    saved = module._maybe_wrap_and_compile_fx_main, module._compile_fx_inner

    def torch_level_entry(model: Any, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
        assert torch_level is not None
        if isinstance(model, torch.fx.GraphModule) and not module.graph_returns_tuple(model):
            # a piece of a split graph returning one value: made to return a tuple, as compile_fx does
            return module.make_graph_return_tuple(model, list(example_inputs), torch_level)  # type: ignore[call-arg]
        return torch_level(model, list(example_inputs))

    def aten_level_entry(graph_module: Any, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
        is_backward = bool(kwargs.get("is_backward"))
        if compile_forward and not is_backward:
            recorded = copy.deepcopy(graph_module)  # compile_fx_inner may rewrite the graph it compiles
            saved[1](graph_module, list(example_inputs), *args, **kwargs)
            return aten_level(recorded, list(example_inputs), False)
        return aten_level(graph_module, list(example_inputs), is_backward)

    if torch_level is not None:
        module._maybe_wrap_and_compile_fx_main = torch_level_entry  # type: ignore[assignment]
    module._compile_fx_inner = aten_level_entry  # type: ignore[assignment]
    try:
        yield
    finally:
        module._maybe_wrap_and_compile_fx_main, module._compile_fx_inner = saved



# AOTInductor's entry points, each read by torch at call time from the module that defines it (so a
# script's own early ``from torch._inductor import aoti_compile_and_package`` still goes through
# them): the package compile (``aoti_compile_and_package`` calls ``debug.aot_inductor_minifier_wrapper``
# with the ExportedProgram), the package load (``aoti_load_package`` calls ``package.load_package``)
# and the shared-library compile (``aot_compile`` calls ``compile_fx.compile_fx_aot``).
AOTI_ENTRY_POINTS = {"torch._inductor.debug": "aot_inductor_minifier_wrapper",
                     "torch._inductor.package": "load_package",
                     "torch._inductor.compile_fx": "compile_fx_aot"}


class AotiPatches:
    """Observers of AOTInductor's entry points. AOTInductor has no hook for the programs it
    compiles or loads (its one observer, the whole-graph minifier, is driven by config and re-runs
    the compile), so each entry point is wrapped in the module that defines it, once that module
    is imported (:meth:`patch`, called by the script session's import watcher), and restored when
    the block ends (a context manager: ``finally``). After each package compile,
    ``compiled(exported_program, package_path, inductor_configs)``; each load returns
    ``loaded(path, model)``; a shared library compiled outside a package compile,
    ``made_library(graph_module, result)``; a loaded package's every call, ``called(model, args,
    kwargs, call)`` (its class's ``__call__`` wrapped, so the program keeps the object it was given;
    ``call(model, *args, **kwargs)`` is the real call)."""

    def __init__(self, compiled: Callable[[Any, Any, dict[str, Any]], None], loaded: Callable[[Any, Any], Any],
                 made_library: Callable[[Any, Any], None],
                 called: Callable[[Any, tuple[Any, ...], dict[str, Any], Callable[..., Any]], Any] | None = None):
        self.compiled, self.loaded, self.made_library, self.called = compiled, loaded, made_library, called
        self.saved: dict[str, tuple[Any, Any]] = {}
        self.classes: dict[type, Any] = {}  # a loaded package's class -> its own __call__
        self.packaging: list[bool] = []  # inside a package compile (its own aot_compile and loads are its)

    def __enter__(self) -> "AotiPatches":
        return self

    def __exit__(self, *exc: Any) -> None:
        for module, original in self.saved.values():
            setattr(module, AOTI_ENTRY_POINTS[module.__name__], original)
        for cls, call in self.classes.items():
            cls.__call__ = call  # type: ignore[method-assign]
        self.saved.clear()
        self.classes.clear()

    def patch(self, module: Any) -> None:
        name = getattr(module, "__name__", "")
        attribute = AOTI_ENTRY_POINTS.get(name)
        original = getattr(module, attribute, None) if attribute else None
        if attribute is None or original is None or name in self.saved:
            return  # not one of ours, already wrapped, or a module still being imported
        wrap = {"torch._inductor.debug": self._package_compile, "torch._inductor.package": self._package_load,
                "torch._inductor.compile_fx": self._library_compile}[name]
        self.saved[name] = (module, original)
        setattr(module, attribute, functools.wraps(original)(wrap(original)))

    def _package_compile(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(func: Any, exported_program: Any, *args: Any, **kwargs: Any) -> Any:
            self.packaging.append(True)
            try:
                path = original(func, exported_program, *args, **kwargs)
            finally:
                self.packaging.pop()
            self.compiled(exported_program, path, dict(kwargs.get("inductor_configs") or {}))
            return path
        return wrapper

    def _package_load(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(path: Any, *args: Any, **kwargs: Any) -> Any:
            model = original(path, *args, **kwargs)
            if self.packaging:
                return model
            self._watch_calls(type(model))
            return self.loaded(path, model)
        return wrapper

    def _watch_calls(self, cls: type) -> None:
        if self.called is None or cls in self.classes or not callable(getattr(cls, "__call__", None)):
            return
        call, called = cls.__call__, self.called

        def __call__(model: Any, *args: Any, **kwargs: Any) -> Any:
            return called(model, args, kwargs, call)

        self.classes[cls] = call
        cls.__call__ = functools.wraps(call)(__call__)  # type: ignore[method-assign]

    def _library_compile(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(graph_module: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(graph_module, *args, **kwargs)
            if not self.packaging:
                self.made_library(graph_module, result)
            return result
        return wrapper


def aoti_load_package(path: Any) -> Any:
    """Load an AOTInductor package (a buffer read from its start)."""
    from torch._inductor.package import load_package

    if hasattr(path, "seek"):
        path.seek(0)
    return load_package(path)


@contextlib.contextmanager
def dynamo_caches_kept() -> Iterator[None]:
    """The caller's compiled code kept across a run in the caller's process (``bisect_engine.check``).

    The engine resets Dynamo (``torch._dynamo.reset``) around its captures and model checks, which
    drops the compiled code of *every* function Dynamo knows. Dynamo has no hook to keep some: its
    reset clears the code objects listed in ``convert_frame``'s trackers, so the caller's entries are
    taken out of those trackers (and of the tables the reset clears) for the run, and put back after a
    last reset that drops the run's own. A code object the run compiles too (the model's ``forward``)
    is listed again by the run and reset with it: its compiled code is dropped, and recompiles on its
    next call, as after ``torch._dynamo.reset``; every other compiled function keeps its code."""
    from torch._dynamo import convert_frame, eval_frame, resume_execution
    from torch._dynamo.code_context import code_context

    trackers = (convert_frame.input_codes, convert_frame.output_codes)
    tables: list[Any] = [getattr(convert_frame, "orig_code_map", None), getattr(code_context, "code_context", None),
                         resume_execution.ContinueExecutionCache.cache, eval_frame.cached_backends]
    weak_tables = [table for table in tables if hasattr(table, "refs")]  # Dynamo's ExactWeakKeyDictionary
    dicts: list[dict[Any, Any]] = [table for table in tables if isinstance(table, dict)]
    saved_codes = [[ref for ref in tracker.seen] for tracker in trackers]
    saved_tables = [[(ref, table.values[key]) for key, ref in table.refs.items() if key in table.values]
                    for table in weak_tables]
    saved_dicts = [dict(table) for table in dicts]
    counters = (convert_frame.FRAME_COUNTER, collections.Counter(convert_frame.FRAME_COMPILE_COUNTER))
    for tracker in trackers:
        tracker.seen, tracker.seen_ids = [], _Forgiving()  # a caller's code dying meanwhile: no KeyError
    for table in weak_tables:
        table.clear()
    for table in dicts:
        table.clear()
    try:
        yield
    finally:
        torch._dynamo.reset()  # what the run compiled, and only that (the caller's codes are not listed)
        for tracker, refs in zip(trackers, saved_codes):
            tracker.seen = [ref for ref in refs if ref() is not None]
            tracker.seen_ids = {id(ref()) for ref in tracker.seen}
        for table, items in zip(weak_tables, saved_tables):
            for ref, value in items:
                key = ref()
                if key is not None:
                    table[key] = value
        for table, saved in zip(dicts, saved_dicts):
            table.update(saved)
        convert_frame.FRAME_COUNTER = max(convert_frame.FRAME_COUNTER, counters[0])
        convert_frame.FRAME_COMPILE_COUNTER.update(counters[1])


class _Forgiving(set):  # type: ignore[type-arg]
    """A tracker's id set while the caller's codes are set aside: their weakref callbacks remove ids
    that are not in it."""

    def remove(self, item: Any) -> None:
        self.discard(item)
