"""Worker processes for independent candidates (``--workers N``): an :class:`~bisect_engine.search.Ahead`
evaluator behind the run's one search.

A strategy hands the search the candidates it is about to judge (``search.prefetch``,
``search.first``); :class:`WorkerPool` sends those it can take to spawned worker processes (never
forked: torch is imported) as picklable :class:`Job` values (the candidate's subgraph, its inputs,
the switch with its ops named as text, the Inductor config and thread count of this process), and
each comes back as a frozen :class:`JobResult` (the compiled outputs or the error text, the compiles
it made). The verdict is then formed here by the graph's own context (``GraphContext.verdict_from``)
when the search *judges* the candidate, in the serial order, after the serial budget check; its
compiles are added to the run's compiler then. So the report never depends on the worker count.
Candidates queue here and go to a worker only when one is ready (started, warmed up) and idle; a
queued candidate the search needs before that is judged in the tool's process, so a pool that is
still starting never makes the search wait (the tool's process is one more worker).

Each worker has its own Inductor cache folder inside the pool's temporary folder
(``TORCHINDUCTOR_CACHE_DIR``) and ``compile_threads = 1``; it runs the compiled code with this
process's intra-op thread count, so reductions split the same way. Taken: region compiles of one
graph (a subsystem switch, random inputs) with static sizes; left to the search's own evaluator:
the per-node check, symbolic compiles, compiles that keep Inductor's code, model candidates, and any
candidate whose job cannot be pickled (a user's custom pass in the config). A worker that dies is
:class:`~bisect_engine.errors.WorkerDied` naming the candidate it was compiling, never a verdict.
On a multi-GPU machine one worker per GPU would take its own ``CUDA_VISIBLE_DEVICES``: not done yet
(CPU and one-GPU runs only; see README).
"""
from __future__ import annotations

import ast
import logging
import multiprocessing
import os
import pickle
import shutil
import sys
import tempfile
import threading
import time
import types
from contextlib import contextmanager
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator

import torch

from ..errors import WorkerDied
from ..load.model_file import load_module
from ..search import default_key, out_of_memory
from ..verdict.candidate import NO_SWITCH, Candidate, GraphCandidate, Switch, compile_arguments
from ..verdict.compiler import Compiler, run_compiled
from ..verdict.graphs import reference_inputs
from ..verdict.oracle import RUNS, SubgraphVerdict, bitwise_equal
from ..verdict.recipes import input_recipes, random_inputs
from ..verdict.shapes import shape_signature

log = logging.getLogger(__name__)

MAX_WORKERS = 8
# Tests only: a worker compiling a candidate whose label contains this text kills itself.
DIE_ON = "BISECT_TESTING_WORKER_DIES_ON"
# Tests only: candidates go to the workers before they are ready (queued behind their start),
# instead of being judged in the tool's process while no worker is free: the workers surely judge some.
EAGER = "BISECT_TESTING_WORKERS_EAGER"
RUNNING = "running"  # in a worker's folder while it compiles: the label of the candidate


def default_workers() -> int:
    """What the machine has: one worker per two CPUs (the tool's own process and the compiled
    code's threads need the rest), at most ``MAX_WORKERS``; 1 (no workers) up to 3 CPUs, where
    workers were measured slower (benchmarks/workers.py)."""
    return max(1, min((os.cpu_count() or 1) // 2, MAX_WORKERS))


@dataclass(frozen=True)
class ProcessState:
    """What a compile depends on beyond its arguments: Inductor's and functorch's config as this
    process has them (non-default keys), intra-op threads, the float32 matmul precision."""

    inductor: dict[str, Any]
    functorch: dict[str, Any]
    threads: int
    matmul_precision: str

    @classmethod
    def here(cls) -> "ProcessState":
        import torch._functorch.config as functorch_config
        import torch._inductor.config as inductor_config

        # ConfigModule's export of the keys set away from their defaults (env overrides included)
        changed = {module: getattr(module, "_get_dict")(skip_default=True) for module in (inductor_config, functorch_config)}
        return cls(changed[inductor_config], changed[functorch_config], torch.get_num_threads(),
                   torch.get_float32_matmul_precision())


@dataclass(frozen=True)
class Job:
    label: str
    graph_module: Any  # fx.GraphModule (pickled as its code and attributes)
    inputs: tuple[Any, ...]
    switch: tuple[str, str, tuple[tuple[str, Any], ...], tuple[str, ...], tuple[str, ...]]  # ops as text
    seed: int
    state: ProcessState


@dataclass(frozen=True)
class JobResult:
    outputs: tuple[Any, ...] | None  # None: the compile or the run raised (``error``)
    error: str
    compiles: int
    seconds: float
    symbolic_compiles: int = 0
    static_fallbacks: tuple[str, ...] = ()
    unavailable: str = ""  # the worker could not import the model file: judged in the tool's process
    # more runs on the same inputs, made only where a second run differs from the first bit for bit
    # (then ``oracle.RUNS`` runs in all): a mismatch is decided over runs, as in this process
    reruns: tuple[tuple[Any, ...], ...] = ()


# --- in the worker process ---------------------------------------------------------------------

_FOLDER = ""
_BASE: dict[str, dict[str, Any]] = {}
_UNAVAILABLE = ""


def _guards_main(path: str) -> bool:
    """Whether the script at ``path`` keeps its program under ``if __name__ == "__main__":``
    (what a spawned child's import of it runs is then only its definitions)."""
    try:
        tree = ast.parse(Path(path).read_text())
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        test = node.test if isinstance(node, ast.If) else None
        if isinstance(test, ast.Compare) and len(test.comparators) == 1 and isinstance(test.ops[0], ast.Eq) and \
                {ast.unparse(test.left), ast.unparse(test.comparators[0])} == {"__name__", "'__main__'"}:
            return True
    return False


@contextmanager
def main_not_rerun() -> Iterator[None]:
    """Start spawned children (workers, the isolated evaluator) without running the user's program
    again in them: ``spawn`` imports the parent's ``__main__`` file in each child, and in script
    mode that is the user's script (``runpy`` runs it as ``__main__``); one without a
    ``__name__ == "__main__"`` guard would run whole in every child (its compiles, prints, and a
    native crash that killed the tool). While a child starts, such a script's ``__main__`` is a stub
    without a file; a guarded script keeps it (the child imports its definitions, which pickled
    jobs may name). Restored when the child has started."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or getattr(main, "__spec__", None) is not None or not path or _guards_main(path):
        yield
        return
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def model_file_path(spec: Any) -> str | None:
    """The file a worker imports as the tool did (what it registers in Inductor at import): a
    model file's path; None for a plain script (script mode's spec names the user's program, whose
    top level *is* the program: importing it would run it again, its compiles and a native crash
    included; pytorch#196681's isolated children all failed so, and every candidate read as a
    crash with no text) or a spec without a file."""
    from ..load.contract import defines_model_contract

    path = getattr(spec, "path", None) if spec is not None else None
    if not path or not defines_model_contract(Path(path)):
        return None
    return str(path)


def _start_worker(folder: str, model_path: str | None, probes: tuple[str, ...] = (), cache: str | None = None) -> None:
    """Each worker: its own Inductor cache folder (seeded with the tool's CPU-capability probes),
    one compile thread, dies with the tool; it imports the model file as the tool did, so what the
    file registers or patches in Inductor at import (a lowering, a pass, a config) holds in the
    worker too."""
    global _FOLDER, _UNAVAILABLE
    _FOLDER = tempfile.mkdtemp(prefix="worker-", dir=folder)
    # ``cache``: one folder for a series of children (``localise/isolate.py``: each crash ends one)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache or os.path.join(_FOLDER, "inductor-cache")
    seed_cache(Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]), probes)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    except Exception:  # noqa: BLE001 - not Linux: the pool's shutdown still ends it
        pass
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    if model_path is not None:
        try:
            load_module(Path(model_path))
        except BaseException as error:  # noqa: BLE001 - its candidates are judged in the tool's process
            _UNAVAILABLE = f"importing {model_path} in a worker raised {type(error).__name__}: {error}"
    _BASE["inductor"] = inductor_config.get_config_copy()
    _BASE["functorch"] = functorch_config.get_config_copy()
    _warm_up()


def capability_probes(folder: str | Path | None = None) -> tuple[str, ...]:
    """The files of the CPU-capability probes Inductor compiled in an Inductor cache ``folder``
    (default: this process's) to learn which vector ISA builds and runs: small C++ files named by
    the hash of their own source and what was built from them. Never a graph's kernel (every kernel
    includes Inductor's prefix header), so a cache seeded with them serves no compiled graph: only
    the toolchain checks it would otherwise repeat (about 4 CPU-seconds in an empty folder)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    found: list[str] = []
    for source in sorted(Path(folder if folder is not None else cache_dir()).glob("*/*.cpp")):
        try:
            if "cpp_prefix.h" in source.read_text(errors="replace"):
                continue
        except OSError:
            continue
        found += [str(made) for made in source.parent.glob(source.stem + ".*") if made.is_file()]
    return tuple(found)


def seed_cache(cache: Path, probes: tuple[str, ...]) -> None:
    """Copy the probes into ``cache`` under their own two-level names (a file that cannot be
    copied is built again by Inductor, as in an empty folder)."""
    for made in map(Path, probes):
        try:
            (cache / made.parent.name).mkdir(parents=True, exist_ok=True)
            shutil.copy2(made, cache / made.parent.name / made.name)
        except OSError:
            continue


def _warm_up() -> None:
    """One tiny compile, so the worker's first candidate does not pay the toolchain's start (the
    C++ prefix header built into the worker's own cache: about 12 s on a loaded 2-core machine)."""
    from torch._inductor.compile_fx import compile_fx

    def tiny(x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) + 1

    try:
        with torch._inductor.config.patch(compile_threads=1, fx_graph_cache=False):
            compile_fx(torch.fx.symbolic_trace(tiny), [torch.ones(4)])
    except Exception as error:  # noqa: BLE001 - the first candidate then pays it, and says why it fails
        log.debug("worker warm-up compile failed: %s: %s", type(error).__name__, error)


def _ready() -> None:
    """A no-op task: submitting one per worker starts them all."""


def _apply(state: ProcessState) -> None:
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    inductor_config.load_config({**_BASE["inductor"], **state.inductor, "compile_threads": 1})
    functorch_config.load_config({**_BASE["functorch"], **state.functorch})
    torch.set_num_threads(state.threads)
    torch.set_float32_matmul_precision(state.matmul_precision)


def run_job(blob: bytes) -> JobResult:
    """Compile and run one candidate (in a worker): what ``GraphContext.judge`` does before judging."""
    if _UNAVAILABLE:
        return JobResult(None, "", 0, 0.0, unavailable=_UNAVAILABLE)
    job: Job = pickle.loads(blob)
    marker = Path(_FOLDER) / RUNNING
    marker.write_text(job.label)
    try:
        _apply(job.state)
        if os.environ.get(DIE_ON) and os.environ[DIE_ON] in job.label:
            os.kill(os.getpid(), 9)
        return _compile_and_run(job)
    finally:
        marker.unlink(missing_ok=True)


def _compile_and_run(job: Job) -> JobResult:
    kind, name, patch, without, fallbacks = job.switch
    switch = Switch(kind, name, patch, frozenset(map(_resolve, without)), frozenset(map(_resolve, fallbacks)))  # type: ignore[arg-type]
    patches, decompositions, forced = compile_arguments(switch)
    compiler = Compiler()
    inputs = list(job.inputs)
    try:
        compiled = compiler.compile(job.graph_module, inputs, label=job.label, config_patches=patches,
                                    decompositions=decompositions, fallbacks=forced)
        torch.manual_seed(job.seed)
        first = tuple(run_compiled(compiled, inputs))
        reruns = _reruns(lambda: tuple(run_compiled(compiled, inputs)), job.seed, first)
        outputs: tuple[Any, ...] | None = first
        error = ""
    except Exception as raised:  # the verdict says so, as GraphContext.judge's does
        outputs, reruns, error = None, (), f"{type(raised).__name__}: {raised}"
    return JobResult(outputs, error, compiler.compiles, compiler.seconds, compiler.symbolic_compiles,
                     tuple(compiler.static_fallbacks), reruns=reruns)


def _reruns(run: Callable[[], tuple[Any, ...]], seed: int, first: tuple[Any, ...]) -> tuple[tuple[Any, ...], ...]:
    """One more run; where it differs from ``first`` bit for bit, ``RUNS`` runs in all (no compile)."""
    torch.manual_seed(seed)
    runs = [run()]
    if bitwise_equal(first, runs[0]):
        return ()
    while len(runs) < RUNS - 1:
        torch.manual_seed(seed)
        runs.append(run())
    return tuple(runs)


def _resolve(name: str) -> Any:
    value: Any = torch.ops
    for part in name.split("."):
        value = getattr(value, part)
    return value


def _op_name(op: Any) -> str:
    """An op as text a worker resolves back to the same op (``aten.relu.default``)."""
    name = str(op)
    if _resolve(name) is not op:
        raise ValueError(f"{op!r} does not round-trip through its name")
    return name


# --- in the tool's process ---------------------------------------------------------------------


@dataclass
class _Pending:
    future: Future[JobResult] | None  # None: queued here, not yet handed to a worker
    blob: bytes
    label: str
    subgraph: Any
    inputs: list[Any]
    own_inputs: bool


@dataclass
class WorkerPool:
    """The :class:`~bisect_engine.search.Ahead` evaluator of a run with ``--workers N`` (N > 1).
    ``judge``: the run's :class:`~bisect_engine.localise.judge.Judge` (its graph contexts and compiler)."""

    judge: Any
    workers: int
    submitted: int = 0  # candidates sent to a worker
    adopted: int = 0  # of those, judged by the search (the others were not needed: discarded)
    waited_s: float = 0.0  # the search's time blocked on a worker's verdict
    ready_s: float | None = None  # from start() until every worker had started (imports, warm-up)
    judged_here: int = 0  # queued, but no worker was free when the search needed it
    _ready_workers: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pending: dict[Hashable, _Pending] = field(default_factory=dict)
    _abandoned: list[Future[JobResult]] = field(default_factory=list)
    _executor: ProcessPoolExecutor | None = None
    _folder: str | None = None
    closed: bool = False

    def submit(self, candidates: Any) -> None:
        """Queue the candidates; each goes to a worker as soon as one is ready and idle."""
        if self.closed:
            return
        self.start()
        for candidate in candidates:
            key = default_key(candidate)
            if key in self._pending:
                continue
            prepared = self._prepare(candidate)
            if prepared is not None:
                self._pending[key] = _Pending(None, *prepared)
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand queued candidates, in submission order, to the workers that are ready and idle."""
        busy = sum(1 for p in self._pending.values() if p.future is not None and not p.future.done()) + \
            sum(1 for future in self._abandoned if not future.done())
        with self._lock:
            idle = (self.workers if os.environ.get(EAGER) else self._ready_workers) - busy
        for pending in self._pending.values():
            if idle <= 0:
                break
            if pending.future is None:
                with main_not_rerun():
                    pending.future = self._pool().submit(run_job, pending.blob)
                self.submitted += 1
                idle -= 1

    def start(self) -> None:
        """Start the workers now (their imports and warm-up overlap the search's own compiles)."""
        if not self.closed and self._executor is None:
            started = time.perf_counter()

            def ready(_future: Future[None]) -> None:  # in the executor's thread
                with self._lock:
                    self._ready_workers += 1
                    self.ready_s = max(self.ready_s or 0.0, time.perf_counter() - started)

            for _ in range(self.workers):
                with main_not_rerun():
                    self._pool().submit(_ready).add_done_callback(ready)

    def take(self, candidate: Candidate) -> SubgraphVerdict | None:
        pending = self._pending.pop(default_key(candidate), None)
        if pending is None:
            return None
        self._dispatch()  # the next ones to the idle workers, while this one is judged or awaited
        if pending.future is None:  # no worker was free: the search judges it itself, now
            self.judged_here += 1
            return None
        waiting = time.perf_counter()
        try:
            result = pending.future.result()
        except BrokenProcessPool as error:
            raise WorkerDied(self._died(pending.label)) from error
        finally:
            self.waited_s += time.perf_counter() - waiting
        if result.unavailable:
            log.warning("%s: judged in this process (%s)", pending.label, result.unavailable)
            return None
        self._count(result)
        if result.error and out_of_memory(result.error):  # the worker's memory, not the code's crash
            log.warning("%s: judged in this process (the worker ran out of memory: %s)", pending.label,
                        result.error.splitlines()[0][:200])
            return None
        self.adopted += 1
        context = self.judge.contexts[candidate.graph]  # type: ignore[union-attr]
        outputs = list(result.outputs) if result.outputs is not None else None
        return context.verdict_from(pending.subgraph, pending.inputs, outputs, pending.own_inputs, result.error,
                                    reruns=result.reruns)

    def discard(self) -> None:
        for pending in self._pending.values():
            if pending.future is not None and not pending.future.cancel():  # running: nobody waits for it
                self._abandoned.append(pending.future)
        self._pending.clear()

    def close(self) -> None:
        self.discard()
        self.closed = True
        if self._executor is not None:
            with self._lock:
                starting = self._ready_workers < self.workers
            if starting or any(not future.done() for future in self._abandoned):
                # do not wait for a worker's start or a compile nobody needs (the kill may leave
                # a "leaked semaphore" warning from multiprocessing's resource tracker: harmless)
                for process in list((getattr(self._executor, "_processes", None) or {}).values()):
                    process.kill()
            self._executor.shutdown(wait=True, cancel_futures=True)
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    def stats(self) -> dict[str, Any]:
        return {"workers": self.workers, "evaluated_ahead": self.submitted, "adopted": self.adopted,
                "judged_here": self.judged_here,
                "waited_seconds": round(self.waited_s, 2),
                "start_seconds": None if self.ready_s is None else round(self.ready_s, 2)}

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._folder = tempfile.mkdtemp(prefix="bisect-workers-")
            self._executor = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                                 initializer=_start_worker,
                                                 initargs=(self._folder, self._model_path(), capability_probes()))
        return self._executor

    def _model_path(self) -> str | None:
        return model_file_path(getattr(self.judge, "spec", None))

    def _count(self, result: JobResult) -> None:
        """The worker's compiles join the run's, under the stage the search judges them in."""
        compiler: Compiler = self.judge.compiler
        compiler.count(result.compiles, "a worker's candidate")
        compiler.seconds += result.seconds
        compiler.symbolic_compiles += result.symbolic_compiles
        compiler.static_fallbacks.extend(result.static_fallbacks)

    def _died(self, label: str) -> str:
        running = sorted(path.read_text() for path in Path(self._folder or ".").glob(f"*/{RUNNING}"))
        return (f"a worker process died (killed, out of memory or crashed) while compiling "
                f"{', '.join(running) or label}: no verdict was taken from it (rerun with --workers 1)")

    def _prepare(self, candidate: Any) -> tuple[bytes, str, Any, list[Any], bool] | None:
        """The candidate as a pickled :class:`Job`, or None where the search's own evaluator must
        judge it (see the module docstring)."""
        return prepare_job(self.judge, candidate)


def prepare_job(judge: Any, candidate: Any, isolating: bool = False) -> tuple[bytes, str, Any, list[Any], bool] | None:
    """``candidate`` as a pickled :class:`Job` with its label, subgraph, inputs and whether they
    are its own (random), or None where it must be judged in the tool's process. ``isolating``
    (``localise/isolate.py``): the per-node check too, compiled as its stitched subgraph (the same
    values, one compile of it), and a compile that keeps Inductor's code (its code not kept)."""
    if not isinstance(candidate, GraphCandidate) or (candidate.keep_code and not isolating) \
            or candidate.graph not in judge.contexts:
        return None
    if not isolating and candidate.isolated and candidate.switch == NO_SWITCH and candidate.inputs == "reference" \
            and candidate.shapes == "as_captured":
        return None  # the per-node check (copies by signature, in this process)
    context = judge.contexts[candidate.graph]
    subgraph = context.subgraph(sorted(candidate.nodes, key=context.view.position.__getitem__),
                                isolate=candidate.isolated)
    if not subgraph.node_names or (candidate.shapes == "as_captured" and shape_signature(subgraph.graph_module)):
        return None
    own_inputs = candidate.inputs == "random"
    inputs = reference_inputs(subgraph, context.eager_values)
    if own_inputs:
        inputs = random_inputs(input_recipes(inputs), context.seed)
    label = f"{context.name}:{candidate.purpose or 'candidate'}"
    switch = candidate.switch
    try:
        ops = (tuple(_op_name(op) for op in sorted(switch.without, key=str)),
               tuple(_op_name(op) for op in sorted(switch.fallbacks, key=str)))
        job = Job(label, subgraph.graph_module, tuple(inputs), (switch.kind, switch.name, switch.patch, *ops),
                  context.seed, ProcessState.here())
        return pickle.dumps(job), label, subgraph, inputs, own_inputs
    except Exception as error:  # noqa: BLE001 - judged in this process instead
        log.debug("%s stays in this process: %s: %s", label, type(error).__name__, error)
        return None
