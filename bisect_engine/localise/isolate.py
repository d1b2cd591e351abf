"""Compiled candidates judged in a child process: a run whose compiled code killed the tool's
process once (a native crash: abort, segfault, heap corruption) is run again with this evaluator.

The supervisor (``cli.entry``) starts every ``run`` as a child process; when that child dies by a
signal, it runs the command once more with ``errors.NATIVE_CRASH_RERUN`` in the environment, and the run's search
gets an :class:`Isolated` evaluator (an :class:`~bisect_engine.search.Ahead` that takes each
candidate synchronously): each graph candidate (the per-node check too, as its stitched subgraph)
is sent as a worker :class:`~bisect_engine.localise.workers.Job` to one spawned child (a fresh
interpreter: a forked one would inherit the OpenMP pool and hang), compiled and run there, and
judged here from the values it sends back. A child killed by a crash signal (a fresh child: a
crash in a reused one is judged again in a fresh one, as heap corruption an earlier candidate left
can abort a later one) is the candidate's ``CRASH`` verdict naming the signal (``NativeCrash: ...``): the crash halving of
``strategies/nodes.py`` then names the op that crashes alone, as for a compile that raises. The
next candidate gets a fresh child (one Inductor cache folder for them all). A child killed otherwise (SIGKILL: the OOM killer, a user) or
exiting by itself is our harness: :class:`~bisect_engine.errors.WorkerDied`, never a verdict.
"""
from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import pickle
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..environ import environ_set
from ..errors import ISOLATE_FOLDER_PREFIX, NativeCrash, WorkerDied, isolating  # noqa: F401 - isolating: the rerun's switch, read here
from ..load.model_file import load_model_spec
from ..verdict.candidate import Candidate, ModelCandidate, Switch
from ..verdict.compare import Outcome
from ..verdict.compiler import Compiler
from ..verdict.fx_eval import heap_checked
from ..verdict.judgement import Oracle
from ..verdict.oracle import SubgraphVerdict
from .model_check import check_model_level
from .workers import Job, JobResult, ProcessState, _apply, _op_name, _resolve, _start_worker, capability_probes, \
    main_not_rerun, model_file_path, prepare_job, run_job

log = logging.getLogger(__name__)

NATIVE_CRASH = NativeCrash.__name__  # the exception name a native crash's verdict carries
# Signals a crashing kernel dies by; any other (SIGKILL, SIGTERM) is not the compiled code's doing.
CRASH_SIGNALS = frozenset({signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE,
                           signal.SIGTRAP})


def native_crash_message(exit_code: int) -> str | None:
    """The verdict's error for a child that died with ``exit_code`` (a negative signal number), or
    None when that is no native crash of the compiled code."""
    if exit_code >= 0 or signal.Signals(-exit_code) not in CRASH_SIGNALS:
        return None
    name = signal.Signals(-exit_code).name
    return f"{NATIVE_CRASH}: the compiled code killed its process ({name}, exit {exit_code})"


@contextlib.contextmanager
def _heap_checked_children() -> Iterator[None]:
    """Children started here run under glibc's heap checker (``fx_eval.heap_checked``): an
    out-of-bounds store aborts the candidate that made it every time, not only where the heap's
    layout happened to put a chunk header in its way (else a window's minimisation would read a
    lucky run of a crashing kernel as a pass). ``spawn`` starts the child with this process's
    environment; restored once it has started."""
    checked = heap_checked(dict(os.environ))
    with environ_set({name: value for name, value in checked.items() if os.environ.get(name) != value}):
        yield


@dataclass(frozen=True)
class ModelJob:
    """A model candidate for the child: the model file (loaded there again: ``get_model()`` and
    ``get_inputs()`` make the same model), the run's judgement, seed and the switch (ops as text)."""

    path: str
    oracle: Oracle
    seed: int
    switch: tuple[Any, ...]
    state: ProcessState


@dataclass(frozen=True)
class ModelResult:
    verdict: SubgraphVerdict
    compiles: int
    seconds: float


def _serve(connection: Any, folder: str, model_path: str | None, probes: tuple[str, ...]) -> None:
    """The child: a worker's start, then one job after another until the tool closes the pipe."""
    _start_worker(folder, model_path, probes, cache=os.path.join(folder, "inductor-cache"))
    while True:
        try:
            blob = connection.recv_bytes()
        except EOFError:
            return
        job = pickle.loads(blob)
        result = _run_model_job(job) if isinstance(job, ModelJob) else run_job(blob)
        connection.send_bytes(pickle.dumps(result))


def _run_model_job(job: ModelJob) -> ModelResult:
    _apply(job.state)
    kind, name, patch, without, fallbacks = job.switch
    switch = Switch(kind, name, patch, frozenset(map(_resolve, without)), frozenset(map(_resolve, fallbacks)))
    compiler = Compiler()
    verdict = check_model_level(load_model_spec(job.path), compiler, job.oracle, job.seed, switch)
    return ModelResult(verdict, compiler.compiles, compiler.seconds)


def _model_job(judge: Any, candidate: ModelCandidate) -> bytes | None:
    """A model candidate as a pickled :class:`ModelJob`, or None where it stays in this process
    (a model not from a file, a model moved to a device, a switch that does not pickle)."""
    spec = judge.spec
    if spec is None or not getattr(spec, "path", None) or spec.compiled is not None:
        return None
    switch = candidate.switch
    try:
        ops = (tuple(_op_name(op) for op in sorted(switch.without, key=str)),
               tuple(_op_name(op) for op in sorted(switch.fallbacks, key=str)))
        return pickle.dumps(ModelJob(str(spec.path), judge.oracle, judge.seed,
                                     (switch.kind, switch.name, switch.patch, *ops), ProcessState.here()))
    except Exception as error:  # noqa: BLE001 - judged in this process instead
        log.debug("the model candidate stays in this process: %s: %s", type(error).__name__, error)
        return None


@dataclass
class Isolated:
    """The search's evaluator of compiled candidates in one child process (see the module
    docstring). ``judge``: the run's :class:`~bisect_engine.localise.judge.Judge`."""

    judge: Any
    judged: int = 0  # candidates judged in a child
    crashes: int = 0  # of those, children that died by a crash signal
    _process: Any = None
    _connection: Any = None
    # named with this process's pid: the next run sweeps it if a kill -9 left it (``supervise.py``)
    _folder: str = field(default_factory=lambda: tempfile.mkdtemp(prefix=f"{ISOLATE_FOLDER_PREFIX}{os.getpid()}-"))

    def submit(self, candidates: Any) -> None:
        """Nothing ahead: each candidate is judged when the search asks for it."""

    def discard(self) -> None:
        """Nothing is held ahead."""

    def take(self, candidate: Candidate) -> SubgraphVerdict | None:
        if isinstance(candidate, ModelCandidate):
            return self._model(candidate)
        prepared = prepare_job(self.judge, candidate, isolating=True)
        if prepared is None:
            return None  # judged in the tool's process (a model candidate, a symbolic compile)
        blob, label, subgraph, inputs, own_inputs = prepared
        result, error = self._run(blob, label)
        self.judged += 1
        context = self.judge.contexts[candidate.graph]  # type: ignore[union-attr]
        if result is None:
            self.crashes += 1
            return context.verdict_from(subgraph, inputs, None, own_inputs, error)
        if result.unavailable:  # the child could not start as the tool did: our harness, never a crash verdict
            raise WorkerDied(f"the child process judging {label} could not start: {result.unavailable}")
        self._count(result)
        outputs = list(result.outputs) if result.outputs is not None else None
        return context.verdict_from(subgraph, inputs, outputs, own_inputs, result.error)

    def native_crash(self, graph_module: Any, inputs: list[Any], label: str) -> str | None:
        """Whether ``graph_module`` (a script's Dynamo graph), compiled as the program's config has
        it and run on ``inputs`` in the child, kills it: the native crash's message, else None."""
        job = Job(label, graph_module, tuple(inputs), ("none", "", (), (), ()), 0, ProcessState.here())
        try:
            blob = pickle.dumps(job)
        except Exception as error:  # noqa: BLE001 - the call runs as it would without the check
            log.warning("%s cannot be run in a child process (%s: %s)", label, type(error).__name__, error)
            return None
        result, message = self._run(blob, label)
        return message if result is None else None

    def _model(self, candidate: ModelCandidate) -> SubgraphVerdict | None:
        blob = _model_job(self.judge, candidate)
        if blob is None:
            return None
        result, error = self._run(blob, "the model")
        self.judged += 1
        if result is None:
            self.crashes += 1
            return SubgraphVerdict(Outcome.CRASH, error=error)
        assert isinstance(result, ModelResult)
        self.judge.compiler.count(result.compiles, "an isolated model candidate")
        self.judge.compiler.seconds += result.seconds
        return result.verdict

    def _run(self, blob: bytes, label: str) -> tuple[Any, str]:
        """The job's result, or None and the native crash that killed the child. A crash counts
        only in a fresh child: heap corruption an earlier candidate left in a reused child (an
        out-of-bounds store that did not abort at once) can abort it during a later, innocent
        one, so a crash in a child that had served other jobs is judged again in a fresh one."""
        reused = self._process is not None and self._process.is_alive()
        result, message = self._run_once(blob, label)
        if result is None and reused:
            log.warning("%s: the crash came in a child that had judged other candidates; judging it again "
                        "in a fresh child", label)
            result, message = self._run_once(blob, label)
        return result, message

    def _run_once(self, blob: bytes, label: str) -> tuple[Any, str]:
        process, connection = self._child()
        connection.send_bytes(blob)
        while process.is_alive() or connection.poll(0):
            if connection.poll(0.2):
                try:
                    return pickle.loads(connection.recv_bytes()), ""
                except EOFError:  # the child died with the pipe open: its exit status says how
                    break
        process.join()
        self._process = self._connection = None
        message = native_crash_message(process.exitcode)
        if message is None:
            raise WorkerDied(f"the child process judging {label} ended with exit {process.exitcode} "
                             f"(killed or out of memory, not a crash signal): no verdict was taken from it")
        log.warning("%s: %s", label, message)
        return None, message

    def _child(self) -> tuple[Any, Any]:
        if self._process is None or not self._process.is_alive():
            context = multiprocessing.get_context("spawn")
            ours, theirs = context.Pipe()
            model_path = model_file_path(getattr(self.judge, "spec", None))
            self._process = context.Process(target=_serve, args=(theirs, self._folder, model_path,
                                                                 capability_probes()), daemon=True)
            with main_not_rerun(), _heap_checked_children():
                self._process.start()
            theirs.close()
            self._connection = ours
        return self._process, self._connection

    def _count(self, result: JobResult) -> None:
        compiler = self.judge.compiler
        compiler.count(result.compiles, "an isolated candidate")
        compiler.seconds += result.seconds
        compiler.symbolic_compiles += result.symbolic_compiles
        compiler.static_fallbacks.extend(result.static_fallbacks)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
        if self._process is not None:
            self._process.join(timeout=5)
            if self._process.is_alive():
                self._process.kill()
        self._process = self._connection = None
        shutil.rmtree(self._folder, ignore_errors=True)

    def stats(self) -> dict[str, Any]:
        return {"isolated": self.judged, "native_crashes": self.crashes}

