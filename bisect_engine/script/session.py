"""Script mode: an unmodified program runs with every ``torch.compile`` checked against eager.

Two entry points share :func:`start_session`, both called when the program imports
``torch._dynamo``: :func:`bisect_engine.script.runner.run_script` (``bisect-accuracy run train.py
ARGS``: the file runs as ``__main__`` in this process) and :func:`start_from_environment`
(``BISECT_ACCURACY_LEVEL=<n> python train.py``, started by the start-up hook in
:mod:`bisect_engine.autostart`, ended at exit). While a session is active,
:func:`~bisect_engine.verdict.inductor_adapter.compiles_routed_through` wraps the backend of every
``torch.compile`` (Inductor with the user's ``mode``/``options``, a backend name, a callable) in a
:class:`CheckingBackend`. Per Dynamo graph it compiles with the user's backend and, on the checked
calls (the first by default, every N-th on request), runs the graph eagerly and in fp64 on the
same real inputs (:mod:`bisect_engine.script.call_check`). The program always gets the compiled result
and the random stream it would have had. The first divergence is localised by the engine
(capture the graph's aten graph, :func:`~bisect_engine.localise.pipeline.run_captured`) and written to
``OUT`` (``OUT/rank<r>`` under torchrun); the program goes on unless told to stop
(:class:`DivergenceStop`, exit 1). A failure of the tool itself never ends the program: it is
recorded in the report and ``OUT/internal-error.log``.
"""
from __future__ import annotations

import ast
import atexit
import contextlib
import copy
import io
import logging
import os
import sys
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.fx as fx

from ..errors import Interrupted, NativeCrash, isolating
from ..search import out_of_memory
from ..verdict.compare import Outcome
from ..verdict.fx_eval import clone_value
from ..verdict.judgement import Oracle
from .call_check import (CallVerdict, check_gradients, flat_values, grad_positions, judge_call, may_elide_cast,
                          reference_outputs, weighted_sum, without_hook_registrations)
from .flat_inputs import FlatInputs, flat_graph
from .state_check import NOTHING_COMPARED, call_arguments, not_checked_lines, settle, state_labels
from .reach import Suspect, Tracer, deferrable
from ..verdict.state import tensor_attributes
from ..verdict.inductor_adapter import (AOTI_ENTRY_POINTS, AotiPatches, compiled_autograd_off, compiles_routed_through,
                                        in_compiled_autograd, nondefault_inductor_config)
from . import aoti_check
from .levels import (MAX_RECORD_FILES_VARIABLE, MAX_RECORD_VARIABLE,
                     ROOT_PID_VARIABLE, Level, ScriptSettings, clear_environment,
                     settings_from_environment)
from ..progress import Progress
from ..output.folder import FolderBusy, OutputError, OutputFolder
from ..output.trace import emit_findings, note_trace, recording_trace
from ..output.wording import not_reproducible_cause, within
from .ranks import STATUS_FILE, SUMMARY_FILE, RankInfo, rank_dir, rank_from_environment, write_summary
from .messages import DivergenceStop, aoti_compiled, log_to_stderr
from .watch import EveryImport
from .processes import (cover, cover_root, process_lines, process_reports, process_started_at, should_cover_root,
                        written_since)

log = logging.getLogger(__name__)
# a graph whose compile in the program ran out of memory (an allocation failed: a device's, the host's)
COMPILE_OUT_OF_MEMORY = "its compile ran out of memory (the program saw that exception): not checked, no finding"
# An allocation that failed in the tool's own check of a call (its references, fp64 values, copies): our
# harness ran short, not the program or the compiler; the call is not checked, the run incomplete.
CHECK_OUT_OF_MEMORY = ("checking it ran out of memory (the tool's own work on a call: references, fp64 values, copies; "
                       "not the program's or the compiler's): not checked, no finding; more free memory (or smaller "
                       "inputs) for a complete answer")

INTERNAL_ERROR_LOG = "internal-error.log"
COMPILED_AUTOGRAD = ("a backward graph of compiled autograd (torch._dynamo.config.compiled_autograd) that reads its "
                     "list of inputs other than item by item, which script mode does not check yet; the backward of "
                     "each forward graph is checked through its gradients instead. To have the backward the program "
                     "runs checked, run with torch._dynamo.config.compiled_autograd = False")


@dataclass
class GraphRecord:
    """One Dynamo graph the program compiled, and what its checks found."""

    index: int
    graph_module: fx.GraphModule  # a copy taken before the backend compiled it
    backend: str
    inductor_options: dict[str, Any] | None  # None: not Inductor, so not localised
    calls: int = 0
    checks: int = 0
    outcome: str = "unchecked"  # match | mismatch | inconclusive_random | random_ok_as_data | error
    detail: dict[str, Any] | None = None
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. why eager, not fp64, was the reference
    compile_id: str | None = None  # the Dynamo compile that made it ("0/0")
    compiler: Any = None  # the backend that compiled it (a user's backend is localised inside it)
    live_state: dict[str, Any] = field(default_factory=dict)  # tensors it holds (get_attr), the live ones
    state_targets: list[str] | None = None  # those lifted to inputs (see state_check); None: not yet decided
    unlifted: fx.GraphModule | None = None  # the graph's own form while the lifting is tentative
    state_labels: dict[str, str] = field(default_factory=dict)  # lifted input -> the program's name for it
    tool_calls: int = 0  # calls made inside the tool's own work (never checked, never counted as the program's)
    skipped: str | None = None  # why the program's calls of it were not checked (the last reason seen)
    cache_hits: int = 0  # Inductor's FX-graph / AOT-autograd cache hits while the program compiled it
    # outputs the ulp rule alone fails and upstream's ``same`` passes: listed, never a divergence (issue 36)
    within_upstream: list[dict[str, Any]] = field(default_factory=list)
    # calls whose failing outputs only fed later checked calls that absorbed them (script/reach.py)
    absorbed: list[dict[str, Any]] = field(default_factory=list)
    # a graph taking a list (compiled autograd's backward): graph_module is its flat copy (script/flat_inputs.py)
    flat: FlatInputs | None = None
    cast_looked: bool = False  # a matching call of it was looked at for an elided cast (once per graph)
    departure_looked: bool = False  # a call whose gradients match yet depart from eager's was looked at (once)
    below_looked: bool = False  # a matching call clearly above eager's error was looked at (once; issue 36)

    @property
    def name(self) -> str:
        return f"graph_{self.index}"

    @property
    def checked(self) -> bool:
        """A call the program made was judged (or its compile crashed, which is a verdict too)."""
        if self.outcome in ("unchecked", "not_checked", "error", "inconclusive_random"):
            return False
        return self.checks > 0 or self.outcome in ("mismatch", "crash")

    def unseen_reason(self) -> str | None:
        """Why no call of this graph was judged; None when one was."""
        if self.checked:
            return None
        if self.outcome == "error" and CHECK_OUT_OF_MEMORY in self.notes:
            return f"{CHECK_OUT_OF_MEMORY} ({(self.detail or {}).get('error')})"
        if self.outcome == "error":
            return f"checking it failed ({(self.detail or {}).get('error')}): not checked, never a match"
        if self.outcome == "not_checked":
            return NOTHING_COMPARED
        if self.outcome == "inconclusive_random":
            return ("it draws random numbers, which differ between eager and compiled code, and it differed: level 2 "
                    "cannot tell (level 3 feeds eager's draws to both sides)")
        if self.calls == 0 and self.tool_calls:
            return ("called only inside the tool's own work (a gradient check of another graph), never by the "
                    "program itself")
        if self.calls == 0:
            return "compiled but never called by the program (a compile the program made and did not run)"
        return self.skipped or "not checked"

    def to_json(self) -> dict[str, Any]:
        # checked / not_checked_reason: added keys (every graph the program compiled is judged or says why not)
        return {"graph": self.name, "backend": self.backend, "calls": self.calls, "checks": self.checks,
                "outcome": self.outcome, "detail": self.detail, "files": self.files, "notes": self.notes,
                "checked": self.checked, "not_checked_reason": self.unseen_reason(),
                "within_upstream": self.within_upstream, "absorbed": self.absorbed}


@dataclass(frozen=True)
class Divergence:
    graph: str
    graph_call: int  # which call of that graph (1-based)
    call: int  # which compiled call of the whole program (1-based)
    wall_time: float
    verdict: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"graph": self.graph, "graph_call": self.graph_call, "call": self.call,
                "wall_time": self.wall_time, **{k: v for k, v in self.verdict.items() if k != "outcome"}}


def describe_backend(backend: Any) -> tuple[str, Callable[..., Any], dict[str, Any] | None]:
    """(name, the callable that compiles, the Inductor options or None when it is not Inductor)."""
    if isinstance(backend, str):
        return backend, torch._dynamo.lookup_backend(backend), ({} if backend == "inductor" else None)
    if isinstance(backend, torch._TorchCompileInductorWrapper):
        aot = type(backend).__name__ == "_TorchCompileAOTInductorWrapper"
        return backend.compiler_name, backend, None if aot else dict(backend.config)
    name = getattr(backend, "compiler_name", None) or getattr(backend, "__name__", type(backend).__name__)
    is_compile_fx = getattr(backend, "__module__", "") == "torch._inductor.compile_fx" and name == "compile_fx"
    return str(name), backend, {} if is_compile_fx else None


# What Dynamo reads from a backend besides calling it; copied, not forwarded by __getattr__
# (Dynamo's C frame evaluation crashes on a backend whose __getattr__ runs Python code).
_FORWARDED = ("get_compiler_config", "reset", "backend_ctx_ctor", "dynamic")


class CheckingBackend:
    """A ``torch.compile`` backend: the user's backend compiles, the session sees every call."""

    def __init__(self, session: "Session", backend: Any):
        self.session = session
        self.compiler_name, self.inner, self.inductor_options = describe_backend(backend)
        for name in _FORWARDED:
            if hasattr(self.inner, name):
                setattr(self, name, getattr(self.inner, name))

    def __call__(self, graph_module: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        reference = copy.deepcopy(graph_module)  # Inductor's pre-grad passes rewrite the graph in place
        live_state = tensor_attributes(graph_module)  # the live tensors (an optimizer's state), never written
        backward = in_compiled_autograd()  # compiled autograd's backward graph: its list input made flat
        flat = flat_graph(reference, example_inputs) if backward else None
        # recorded before the user's compile runs: a compile that raises is localised on this graph
        record = self.session.add_graph(flat.graph_module if flat else reference, self.compiler_name,
                                        self.inductor_options)
        record.live_state, record.flat = live_state, flat
        from ..load.capture import current_compile_id

        record.compile_id = current_compile_id()
        record.compiler = self.inner
        record.skipped = COMPILED_AUTOGRAD if backward and flat is None else None
        session = self.session
        hits_before = _cache_hits()
        try:
            compiled = self.inner(graph_module, example_inputs)
            record.cache_hits = _cache_hits() - hits_before
        except Exception as error:
            if _dynamo_control_flow(error):  # Dynamo restarts or skips this compile: no graph was made
                session.forget_graph(record)
            else:
                session.compile_crashed(record, error, example_inputs)
            raise  # the program sees the compiler's own exception, as it would without us

        probe = [isolating()]  # a rerun after a native crash: the first call runs in a child first

        def checked_call(*args: Any) -> Any:
            if probe and probe.pop():
                graph, values = (record.flat.graph_module, record.flat.flatten(args)) if record.flat else (reference, args)
                crash = session.native_crash(record, graph, values)
                if crash is not None:
                    raise crash
            if record.flat is not None:  # the program's call, judged on the flat graph's arguments
                flat_inputs = record.flat
                return session.call(record, lambda *flat: compiled(*flat_inputs.regroup(flat)),
                                    flat_inputs.flatten(args))
            return session.call(record, compiled, args)

        return checked_call


def _cache_hits() -> int:
    """Inductor's on-disk cache hits so far in this process (the FX-graph cache and AOT Autograd's):
    the evidence that a compiled artifact was served rather than compiled."""
    from torch._dynamo.utils import counters

    return int(counters["inductor"]["fxgraph_cache_hit"]) + int(counters["aot_autograd"]["autograd_cache_hit"])


def _dynamo_control_flow(error: Exception) -> bool:
    """Dynamo's own signals raised through a backend (restart the analysis, skip the frame), not a
    compiler failure: every Dynamo exception but ``BackendCompilerFailed`` (``InductorError``)."""
    exc = sys.modules.get("torch._dynamo.exc")
    if exc is None:
        return False
    return isinstance(error, exc.TorchDynamoException) and not isinstance(error, exc.BackendCompilerFailed)


def _renderable(value: Any) -> bool:
    try:
        return ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError):
        return False


def _trains(outputs: Any) -> bool:
    """The call is part of a training step: autograd will differentiate its outputs."""
    values = flat_values(outputs)
    return torch.is_grad_enabled() and any(isinstance(v, torch.Tensor) and v.requires_grad for v in values)


def _cuda_devices() -> list[int]:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return list(range(torch.cuda.device_count()))
    return []


@contextlib.contextmanager
def without_hook_environment() -> Iterator[None]:
    """The tool's own subprocesses (repro verification) must not start the hook."""
    removed = clear_environment(os.environ)
    try:
        yield
    finally:
        os.environ.update(removed)


class Session:
    """One program run: its compiled graphs, the checks made, the first divergence, the report."""

    def __init__(self, settings: ScriptSettings, script: Path, argv: Sequence[str], mode: str,
                 progress: Progress | None = None, rank: RankInfo | None = None,
                 folder: OutputFolder | None = None, child: bool = False):
        self.settings, self.script, self.argv, self.mode = settings, script, list(argv), mode
        self.progress = progress or Progress(enabled=False)
        self.rank = rank
        self.root = settings.out_dir.absolute()  # the program may change directory
        # A child process of a session (environment-variable mode) writes apart: OUT/pid<pid>.
        self.out_dir = self.root / f"pid{os.getpid()}" if child and rank is None else rank_dir(self.root, rank)
        self.folder = folder  # opened (locked, vetted) at the first write, unless given open
        self.folder_error: str | None = None
        self.recorded_bytes = 0
        self.recording_stopped: str | None = None
        self.interrupted: str | None = None  # the signal that ended the program, if one did
        self.ended_early: str | None = None  # "os._exit(N)": the program ended itself, skipping its exit
        self.graphs: list[GraphRecord] = []
        # level 1 under `record` / `compare SCRIPT`: what takes each graph's checked call instead of OUT/graphs
        self.on_record: Callable[[GraphRecord, Sequence[Any]], None] | None = None
        # The judgement every checked call is held to: the default policy, or --oracle bitwise (the
        # CLI refuses the other --oracle values, --rng, --seed and --random-inputs for scripts: the
        # program's own draws and seed are used).
        self.oracle = Oracle(kind=settings.oracle)
        self.calls = 0
        self.calls_checked = 0
        self.divergence: Divergence | None = None
        self.tracer = Tracer()  # interior errors followed through later graphs (issue 36)
        self.report: dict[str, Any] | None = None
        # the report of a cast the compiled code skipped in a matching call (a listed difference): the
        # run's report at its end unless a divergence's report replaces it
        self.listed_report: dict[str, Any] | None = None
        self.localised = False
        self.stopped = False
        self.exit_code: int | None = None
        self.internal_error: str | None = None
        self.not_localised: str | None = None  # why a divergence was not localised
        self.engine_compiles = 0  # Inductor compiles the engine made (localising, random graphs)
        # A gradient divergence localised again on the graphs Inductor's own compile hands
        # compile_fx_inner (report ``script.recaptured``): the graph, whether that named the op, why not
        self.recaptured: dict[str, Any] | None = None
        self.tool_seconds = 0.0  # time spent in the tool's own work (not the program's)
        self._busy = False
        self.closed = False  # the session's backend wrapping has ended (a later fork is not ours)
        self._started = time.perf_counter()
        # a report written in OUT since this process started is another program's, running beside it
        self.started_at = process_started_at(time.time())
        self.trace_recording = contextlib.ExitStack()  # --trace: closed (the trace kept) by finish()
        self.aoti_packages: list[Any] = []  # the AOTInductor packages this process compiled (paths, buffers)
        self.aoti_records: list[tuple[Any, GraphRecord, Any]] = []  # (package, its graph's record, ExportedProgram)
        self.aoti_loaded: list[aoti_check.LoadedPackage] = []  # those the program loaded: their calls are checked
        self.exported: list[dict[str, Any]] = []  # each package's dynamic dims and second-size check

    # -- compiling and calling -------------------------------------------------------------

    def wrap_backend(self, backend: Any) -> Any:
        if self._busy or isinstance(backend, CheckingBackend) or self.settings.level is Level.OFF:
            return backend
        return CheckingBackend(self, backend)

    def add_graph(self, graph_module: fx.GraphModule, backend: str, options: dict[str, Any] | None) -> GraphRecord:
        record = GraphRecord(len(self.graphs), graph_module, backend, options)
        self.graphs.append(record)
        log.info("compiled %s with %s", record.name, backend)
        return record

    def forget_graph(self, record: GraphRecord) -> None:
        """A graph whose compile Dynamo abandoned (it restarts the analysis and compiles another)."""
        if record in self.graphs:
            self.graphs.remove(record)
            for index, kept in enumerate(self.graphs):
                kept.index = index

    def call(self, record: GraphRecord, compiled: Callable[..., Any], args: Sequence[Any]) -> Any:
        if self._busy:  # the tool's own work (a gradient check: compiled autograd's backward): not the program's
            record.tool_calls += 1
            return compiled(*args)
        if _on_fake_values(args):  # Dynamo's own shape propagation (DDPOptimizer runs its pieces on fakes)
            return compiled(*args)
        record.calls += 1
        self.calls += 1
        if self.calls == 1:
            _import_writer()
        if self.divergence is not None or not self.settings.checks_call(record.calls) or record.skipped == COMPILED_AUTOGRAD:
            record.skipped = record.skipped if record.checks else self._skip_reason(record)
            return compiled(*args)
        if self.settings.level is Level.RECORD:
            write = self.on_record or self._write_graph  # record/compare SCRIPT: the graph's aten capture
            self._guarded(record, lambda: write(record, args))
            return compiled(*args)
        return self._checked_call(record, compiled, args)

    def _skip_reason(self, record: GraphRecord) -> str | None:
        if record.skipped == COMPILED_AUTOGRAD:
            return record.skipped
        if self.divergence is not None:
            return "called only after the program's first divergence (checks stop there)"
        return record.skipped

    def _checked_call(self, record: GraphRecord, compiled: Callable[..., Any], args: Sequence[Any]) -> Any:
        """Reference runs first (the compiled call may write to its inputs), then the real call."""
        arguments = call_arguments(record, args)  # a graph's tensors written in place are judged as inputs
        pristine = self._guarded(record, lambda: clone_value(arguments))
        references = self._guarded(record, lambda: settle(record, reference_outputs(record.graph_module, pristine),
                                                          len(args)))
        outputs = compiled(*args)
        if references is None:
            return outputs
        if references.fp64_error and references.fp64_error not in record.notes:
            record.notes.append(references.fp64_error)
        arguments, pristine = (arguments, pristine) if record.state_targets else (list(args), pristine[:len(args)])
        below = self._below_look_wanted(record) and not references.random
        verdict = self._guarded(record, lambda: judge_call(record.graph_module, references, outputs, arguments,
                                                           self.oracle, labels=state_labels(record), below=below))
        if verdict is not None and not references.random and not record.state_targets:
            traced = self._guarded(record, lambda: self._traced(record, verdict, references, pristine, arguments,
                                                                outputs))
            verdict, reached = traced if traced is not None else (None, None)
            if reached is not None:
                self._suspect_diverged(reached, f"{record.name} call {record.calls}")
        if verdict is not None:
            trains = _trains(outputs) and not references.random and not record.state_targets
            positions = grad_positions(args) if trains else []
            self._judged(record, compiled, verdict, references.random, pristine, positions)
            if verdict.outcome is Outcome.MATCH and not record.state_targets:
                self._elided_cast_look(record, references, outputs, pristine)
        return outputs

    def _elided_cast_look(self, record: GraphRecord, references: Any, outputs: Any, pristine: list[Any]) -> None:
        """A matching call whose compiled outputs still differ from eager's, in a graph that narrows
        a float with a cast the program wrote (``call_check.may_elide_cast``; once per graph): the
        engine asks whether compiled skipped that cast's rounding, as it does for a model file
        (``departures.elided_cast``, exact: within the end-to-end tolerance), and checks
        ``emulate_precision_casts``. Found, its report (clean, the cast listed) is the run's unless
        a divergence comes; not found, nothing is written. A failure here is logged, never a verdict."""
        if record.cast_looked or not self._may_list(record) or not may_elide_cast(record.graph_module, references, outputs):
            return
        record.cast_looked = True
        self._listing_look(record, "an elided cast",
                           lambda: self._localise(record, pristine, stop_after="localise", cast_elision=True),
                           lambda result: any(g.cast_elision_explains for g in result.graphs))

    def _departure_look(self, record: GraphRecord, pristine: list[Any], positions: list[int]) -> None:
        """A training call whose gradients match (compiled at least as close to fp64 as eager) yet
        differ from eager's materially (``CallVerdict.departing``; once per graph): the engine, on
        its forward and backward graphs, lists the value the compiled forward computes otherwise and
        the gradient it flips (``departures.saved_value_consequence``: a bf16 hinge's saved mask,
        pytorch#185517), as for a model file. Found, its report (clean, the departure under
        ``differences``) is the run's unless a divergence comes; not found, nothing is written."""
        if record.departure_looked or not self._may_list(record):
            return
        record.departure_looked = True
        self._listing_look(record, "a departure",
                           lambda: self._localise(record, pristine, positions, stop_after="localise", departure=True),
                           lambda result: any(g.consequence is not None for g in result.graphs))

    def _may_list(self, record: GraphRecord) -> bool:
        """A matching call may still be looked at for a listed difference (one per run, before any divergence)."""
        return not (self.divergence is not None or self.listed_report is not None or self.settings.level < Level.LOCALISE
                    or record.inductor_options is None or record.flat is not None)

    def _listing_look(self, record: GraphRecord, what: str, localise: Callable[[], Any],
                      listed: Callable[[Any], bool]) -> None:
        """The engine on a matching call (``localise``); where it found no finding (a graph finding
        the matching call's end-to-end rule passed is not the run's: its report would be a clean one
        naming a culprit) and ``listed`` holds of its result, the report (clean, what it found
        listed) is written and becomes the run's unless a divergence comes. A failure here is
        logged, never a verdict: the call's match stands."""
        try:
            with self._tool_work():
                result = localise()
                if result.finding is not None or not listed(result):
                    return
                folder = self.output_folder()
                if folder is None:
                    return
                from ..output.writer import OutputOptions, write_outputs

                with without_hook_environment():
                    self.listed_report = write_outputs(result, OutputOptions(out_dir=self.out_dir), folder, False,
                                                       self.progress)
        except (KeyboardInterrupt, Interrupted):
            raise
        except Exception as error:  # noqa: BLE001 - an optional look: the call's match stands
            log.warning("looking for %s in %s failed: %s: %s", what, record.name, type(error).__name__, error)
            log.debug("%s", traceback.format_exc())

    def _traced(self, record: GraphRecord, verdict: CallVerdict, references: Any, pristine: list[Any],
                arguments: list[Any], outputs: Any) -> tuple[CallVerdict, Suspect | None]:
        """Interior errors (``script/reach.py``): a call that reads an earlier suspect's outputs is
        judged on the suspect's eager and fp64 values too (its error reached here: the suspect
        diverges); a call failing by rounding-sized amounts becomes a suspect itself (judged a match
        until a later call or the program's end says otherwise)."""
        flat = flat_values(outputs)
        shadows = self.tracer.shadows(arguments)  # the program's own tensors, by identity
        if shadows:
            eager_inputs, fp64_inputs = self.tracer.traced_inputs(pristine, shadows)
            traced = reference_outputs(record.graph_module, eager_inputs, fp64_inputs)
            suspects = self.tracer.read(record.name, shadows)
            along = judge_call(record.graph_module, traced, outputs, arguments, self.oracle)
            if verdict.outcome is Outcome.MATCH and along.outcome is not Outcome.MATCH:
                return verdict, suspects[0]
            self.tracer.carry(suspects, traced, flat)
        positions = deferrable(verdict, references, flat) if verdict.outcome is not Outcome.MATCH else []
        if positions and self.tracer.full:  # the oldest suspect is the first divergence (see reach.CAPACITY)
            return verdict, self.tracer.suspects[0]
        if not positions:
            return verdict, None
        self.tracer.suspect(Suspect(record, verdict, pristine, record.calls, self.calls,
                                    {f"output {i}" for i in positions}), positions, references, flat)
        return CallVerdict(Outcome.MATCH, {name: v if v.outcome is Outcome.MATCH else replace(v, outcome=Outcome.MATCH)
                                           for name, v in verdict.outputs.items()}), None

    def _suspect_diverged(self, suspect: Suspect, reached: str | None, at_exit: bool = False) -> None:
        """A suspect's error reached what the program keeps: its own call is the first divergence."""
        self.tracer.resolve(suspect)
        if self.divergence is not None:
            return
        suspect.record.notes.append(f"its call {suspect.graph_call}'s error reached "
                                    f"{reached or 'what the program kept (no later checked call read it)'}")
        self._diverged(suspect.record, suspect.verdict, suspect.pristine, at=(suspect.graph_call, suspect.call),
                       stop=not at_exit)

    def settle_suspects(self) -> None:
        """At the program's end: a suspect no later checked call fully read diverges; the rest
        are listed as absorbed on their graphs."""
        for suspect in self.tracer.unresolved():
            self._suspect_diverged(suspect, None, at_exit=True)
        for suspect in self.tracer.absorbed():
            suspect.record.absorbed.append({**suspect.to_json(), "ops": self._ops_wrong_alone(suspect.record,
                                                                                              suspect.pristine)})
        self.tracer = Tracer()

    def _below_look_wanted(self, record: GraphRecord) -> bool:
        """Whether a matching call of ``record`` clearly above eager's error is worth the
        below-tolerance look (issue 36, item 3: a model file lists such a graph's ops wrong alone
        under a clean verdict; a script's call lists them as the call's listing): once per graph,
        at level 3 and above, an Inductor graph whose inputs the program does not hold as state."""
        return not record.below_looked and self.settings.level >= Level.LOCALISE \
            and record.inductor_options is not None and not record.state_targets

    def _ops_wrong_alone(self, record: GraphRecord, pristine: list[Any]) -> list[str] | None:
        """The ops a listed call's graph gets wrong (an absorbed suspect's, or one upstream's
        ``same`` passes), each judged alone (the engine's per-node check, stopped after localising:
        as ``localise/below_tolerance.py`` names a model file's below-tolerance ops); None below
        level 3 or for a backend that is not Inductor."""
        if self.settings.level < Level.LOCALISE or record.inductor_options is None:
            return None
        from ..verdict.graphs import op_name

        result = self._guarded(record, lambda: self._localise(record, pristine, stop_after="localise"))
        finding = result.finding if result is not None else None
        if finding is None:
            return []
        return [op_name(finding.context.view.nodes[name]) for name in finding.culprit_nodes]

    def check_external(self, record: GraphRecord, run: Callable[[list[Any]], Any], inputs: list[Any],
                       counted: bool = True) -> None:
        """A call compiled outside ``torch.compile`` (an AOTInductor package), checked as a compiled
        call of ``record``'s graph: ``run`` on a copy of ``inputs`` against eager and fp64."""
        if counted:
            record.calls += 1
            self.calls += 1
        if self.divergence is not None or self.settings.level is Level.RECORD:
            return
        pristine = self._guarded(record, lambda: clone_value(inputs))
        references = self._guarded(record, lambda: reference_outputs(record.graph_module, pristine))
        arguments = self._guarded(record, lambda: clone_value(inputs))
        outputs = self._guarded(record, lambda: run(arguments))
        if references is None or outputs is None:
            return
        verdict = self._guarded(record, lambda: judge_call(record.graph_module, references, outputs, arguments,
                                                           self.oracle))
        if verdict is not None:
            self._judged(record, run, verdict, references.random, pristine, [])

    @property
    def busy(self) -> bool:
        return self._busy

    def guarded(self, record: GraphRecord, work: Callable[[], Any]) -> Any:
        return self._guarded(record, work)

    def tool_work(self) -> Any:
        return self._tool_work()

    def _judged(self, record: GraphRecord, compiled: Callable[..., Any], verdict: CallVerdict, random: bool,
                pristine: list[Any], positions: list[int]) -> None:
        """Act on a checked call's verdict; in a training step, check its gradients too. A call
        that compared nothing (no output, no tensor written) is not checked, never a match."""
        if not verdict.outputs:
            record.outcome = "not_checked" if record.outcome == "unchecked" else record.outcome
            if NOTHING_COMPARED not in record.notes:
                record.notes.append(NOTHING_COMPARED)
            return
        record.checks += 1
        self.calls_checked += 1
        listed = {item["output"] for item in record.within_upstream}  # each output once: its first call
        new = [{"call": record.calls, "output": name, **v.to_json()}
               for name, v in verdict.within_upstream().items() if name not in listed]
        below = [{"call": record.calls, "output": name, **verdict.outputs[name].to_json()}
                 for name in verdict.below_tolerance or () if name not in listed]
        record.below_looked = record.below_looked or verdict.below_tolerance is not None  # its noise run made
        if (new or below) and not random:  # the engine once for both listings
            ops = self._ops_wrong_alone(record, pristine)
            # the op named, as a model file's listing names it (pytorch#198183: erf); a below-tolerance
            # output listed only where the engine names an op wrong alone
            new = [{**item, "ops": ops} for item in new] + ([{**item, "ops": ops} for item in below] if ops else [])
        record.within_upstream += new
        if verdict.outcome is not Outcome.MATCH:
            if random:
                self._random_mismatch(record, verdict, pristine)
            else:
                self._diverged(record, verdict, pristine)
            return
        record.outcome = "match" if record.outcome == "unchecked" else record.outcome
        if positions:
            gradients = self._guarded(record, lambda: check_gradients(record.graph_module, compiled, pristine,
                                                                      positions, self.oracle))
            if gradients is not None and gradients.outcome is not Outcome.MATCH:
                self._diverged(record, gradients, pristine, positions=positions)
            elif gradients is not None and gradients.departing and not random:
                self._departure_look(record, pristine, positions)

    @contextlib.contextmanager
    def _tool_work(self) -> Iterator[None]:
        """The tool's own work: not checked, and the program's random stream left as it was; never
        under compiled autograd (on inside the program's compiled frames: the tool's gradient checks
        and captures differentiate each graph through its own backward)."""
        self._busy = True
        started = time.perf_counter()
        try:
            with torch.random.fork_rng(devices=_cuda_devices()), compiled_autograd_off():
                yield
        finally:
            self._busy = False
            self.tool_seconds += time.perf_counter() - started

    def _guarded(self, record: GraphRecord, work: Callable[[], Any]) -> Any:
        """Run the tool's work on a call; a failure is recorded on the graph, never raised into
        the program (the tool must not end the job it watches)."""
        try:
            with self._tool_work():
                return work()
        except Exception as error:  # noqa: BLE001 - recorded in the report and the log
            record.outcome = "error"
            record.detail = {"error": f"{type(error).__name__}: {error}"}
            if out_of_memory(error) and CHECK_OUT_OF_MEMORY not in record.notes:  # our memory, named as such
                record.notes.append(CHECK_OUT_OF_MEMORY)
            log.warning("checking %s failed: %s: %s", record.name, type(error).__name__, error)
            log.debug("%s", traceback.format_exc())
            return None

    # -- findings ------------------------------------------------------------------------

    def _random_mismatch(self, record: GraphRecord, verdict: CallVerdict, pristine: list[Any]) -> None:
        """A graph with random ops differs from eager: its draws differ. The engine, which feeds
        eager's draws to both sides, decides (levels 3-4); level 2 cannot tell."""
        record.detail = {"direct_check": verdict.to_json()}
        if self.settings.level < Level.LOCALISE or record.inductor_options is None:
            record.outcome = "inconclusive_random"
            return
        result = self._guarded(record, lambda: self._localise(record, pristine))
        if result is not None and result.finding is not None:
            self._diverged(record, verdict, pristine, result)
        elif result is not None:
            record.outcome = "random_ok_as_data"
            record.detail["engine"] = "no node diverges once eager's random draws are fed to both sides"

    def _diverged(self, record: GraphRecord, verdict: CallVerdict, pristine: list[Any], result: Any = None,
                  positions: list[int] | None = None, at: tuple[int, int] | None = None, stop: bool = True) -> None:
        """The first divergence: written (and localised, levels 3-4) at once. ``positions``: the
        gradients diverged, for the inputs there; the backward graph is captured too. The first
        divergence stands (a suspect's, decided during this call, comes first)."""
        if self.divergence is not None:
            return
        record.outcome, record.detail = "mismatch", verdict.to_json()
        graph_call, call = at if at is not None else (record.calls, self.calls)
        self.divergence = Divergence(record.name, graph_call, call, time.time(), verdict.to_json())
        with contextlib.suppress(OutputError):
            self.output_folder()  # where this process writes (OUT/pid<N> beside another program) is decided here
        log.warning("%s differs from eager on its call %d (%s: %s); looking into it, writing %s",
                    record.name, record.calls, verdict.failing, record.detail.get("reason"), self.out_dir)
        try:
            self._write_status(final=False)
            with self._tool_work():
                self._write_graph(record, pristine)
                self.report = self._divergence_report(record, pristine, result, positions)
                self._save_report()
                if self.report.get("verdict") == "clean" and cast_elided(self.report):
                    log.warning("%s: explained: the compiled code skips a cast the program wrote (emulate_precision_casts "
                                "makes it follow eager, checked): listed under differences, not a divergence", record.name)
            self._write_status(final=False)
        except (KeyboardInterrupt, Interrupted) as interrupt:  # the program's own signal: report, then go on
            self.interrupted = interrupt.name if isinstance(interrupt, Interrupted) else "SIGINT"
            self.report = self._plain_report("interrupted")
            with contextlib.suppress(Exception):
                self._save_report()
            raise
        except Exception as error:  # noqa: BLE001 - the program goes on; the log says why
            self._internal_error(error, f"writing the report of {record.name}")
        if self.settings.stop_on_divergence and stop:
            self.stopped = True
            log.warning("stopping the program at its first divergence (exit status 1)")
            raise DivergenceStop()

    def _divergence_report(self, record: GraphRecord, pristine: list[Any], result: Any,
                           positions: list[int] | None = None) -> dict[str, Any]:
        if self.settings.level < Level.LOCALISE:
            self.not_localised = "level 2 checks only; level 3 localises"
            return self._plain_report("divergent")
        try:
            if record.inductor_options is None:
                # a backend of the user's: localised in the graphs it hands Inductor, if it does
                result = self._localise_inside_backend(record, pristine)
                if result is None and str(record.backend).startswith("aot_"):
                    # it traces as our capture does: is what it traced already wrong (no compile)?
                    result = self._localise(record, pristine, capture_only=True)
                    result = result if result.pre_grad is not None else None
                if result is None:
                    self.not_localised = (f"the backend is {record.backend}, and it hands Inductor no graph; "
                                          "localisation compiles with Inductor")
                    return self._plain_report("divergent")
            result = result if result is not None else self._localise(record, pristine, positions)
            if positions and record.inductor_options is not None and not result.names_an_op:
                result = self._localise_through_inductor(record, pristine, positions, result) or result
            from ..output.writer import OutputOptions, write_outputs

            folder = self.output_folder()
            if folder is None:
                self.not_localised = f"localised, but not written: {self.folder_error}"
                return self._plain_report("divergent")
            output = OutputOptions(out_dir=self.out_dir, verify_runs=self.settings.verify_runs)
            with without_hook_environment():
                report = write_outputs(result, output, folder, self.settings.stage == "repro", self.progress)
            self.localised = result.finding is not None
            return report
        except Exception as error:  # noqa: BLE001 - the program goes on; the report says so
            self._internal_error(error, f"localising {record.name}")
            return self._plain_report("divergent")

    def native_crash(self, record: GraphRecord, graph_module: fx.GraphModule, args: Sequence[Any]) -> NativeCrash | None:
        """After a native crash (the supervisor's rerun): the graph compiled and run on the call's
        inputs in a child process; a child the compiled code kills is the program's crash,
        localised as a compile that raises is (the caller raises it into the program)."""
        from ..localise.isolate import Isolated  # imports Inductor: only in a rerun after a native crash

        isolated = Isolated(None)
        try:
            with self._tool_work():
                message = isolated.native_crash(graph_module, clone_value(list(args)), record.name)
        finally:
            isolated.close()
        if message is None:
            return None
        error = NativeCrash(message.split(": ", 1)[1])
        self.compile_crashed(record, error, args)
        return error

    def compile_crashed(self, record: GraphRecord, error: Exception, example_inputs: Sequence[Any]) -> None:
        """The user's compile of ``record``'s graph raised: the first finding is a crash, localised
        (levels 3-4, Inductor) on the graph's example inputs as the model-file search does (the
        nodes that crash alone); the caller re-raises ``error`` into the program."""
        if out_of_memory(error):  # the program's compile ran out of memory: its exception, never a compiler crash
            record.outcome, record.detail = "not_checked", {"error": _one_line(error)}
            record.notes.append(COMPILE_OUT_OF_MEMORY)
            log.warning("compiling %s with %s ran out of memory: %s", record.name, record.backend, record.detail["error"])
            return
        record.outcome, record.detail = "crash", {"error": _one_line(error)}
        log.warning("compiling %s with %s raised %s", record.name, record.backend, record.detail["error"])
        if self._busy:  # compiled inside the tool's own work: no verdict of the program's, never a match
            record.outcome = "error"
            return
        if self.divergence is not None or self.settings.level is Level.RECORD:
            return
        self.divergence = Divergence(record.name, 0, self.calls, time.time(),
                                     {"outcome": "crash", "kind": "crash", "error": record.detail["error"]})
        with contextlib.suppress(OutputError):
            self.output_folder()
        try:
            with self._tool_work():
                inputs = clone_value(list(example_inputs))
                self._write_graph(record, inputs)
                self.report = self._crash_report(record, inputs)
                self._save_report()
        except (KeyboardInterrupt, Interrupted):
            raise
        except Exception as failure:  # noqa: BLE001 - the program goes on to see its own exception
            self._internal_error(failure, f"localising the crash of {record.name}")

    def _crash_report(self, record: GraphRecord, inputs: list[Any]) -> dict[str, Any]:
        """The engine's crash localisation; a plain ``crash`` report where it cannot run, or finds
        no crash of its own (the report names the user's compile's exception either way)."""
        error = (record.detail or {}).get("error")
        if self.settings.level < Level.LOCALISE or record.inductor_options is None:
            self.not_localised = ("level 2 checks only; level 3 localises" if self.settings.level < Level.LOCALISE
                                  else f"the backend is {record.backend}; localisation compiles with Inductor")
            return {**self._plain_report("crash"), "crash": {"graph": record.name, "error": error}}
        report = self._divergence_report(record, inputs, None)
        if report.get("verdict") != "crash":
            found = report.get("verdict")
            self.not_localised = (f"the program's compile of {record.name} raised {error}; a fresh compile of its "
                                  f"graph gave {found!r}")
            report = {**report, "verdict": "crash", "crash": {"graph": record.name, "error": error, "engine": found}}
        return report

    def _internal_error(self, error: Exception, what: str) -> None:
        """The tool failed: kept for the report and ``OUT/internal-error.log``, never raised."""
        self.internal_error = f"{what}: {type(error).__name__}: {error}"
        log.error("%s failed (%s: %s); see %s", what, type(error).__name__, error,
                  self.out_dir / INTERNAL_ERROR_LOG)
        with contextlib.suppress(OutputError):
            text = "".join(traceback.format_exception(error))
            folder = self.output_folder()
            if folder is not None:
                folder.write_text(INTERNAL_ERROR_LOG, text)

    def _localise(self, record: GraphRecord, pristine: list[Any], positions: list[int] | None = None,
                  stop_after: str | None = None, cast_elision: bool = False, departure: bool = False,
                  capture_only: bool = False) -> Any:
        """The engine on this graph's aten graphs (the backward one too when ``positions`` names
        the differentiated inputs), under the user's Inductor options. ``cast_elision``: a call
        that matched, looked at for a skipped cast only (``EngineOptions.cast_elision_exact``; the
        graph judged whole first, as a model file's); ``departure``: a call whose gradients matched,
        looked at for a departure the backward turns into other gradients (``_departure_look``);
        ``capture_only``: nothing compiled, the captured graph judged against Dynamo's eagerly (a
        backend of the user's that traces through AOT Autograd without Inductor: aot_eager)."""
        from torch._inductor import config as inductor_config

        from ..load.capture import capture_graph_module, capture_graph_module_with_backward
        from ..localise.options import EngineOptions
        from ..localise.pipeline import run_captured

        spec = self._spec(record, pristine)
        options = EngineOptions(max_compiles=self.settings.max_compiles, timeout_s=self.settings.timeout_s,
                                stop_after=stop_after or self.settings.stage,  # type: ignore[arg-type]
                                divergence_known=not (cast_elision or departure), cast_elision_exact=cast_elision,
                                capture_only=capture_only, oracle=self.settings.oracle)  # type: ignore[arg-type]
        with inductor_config.patch(record.inductor_options or {}):
            if positions:
                captured = capture_graph_module_with_backward(record.graph_module, pristine, positions, weighted_sum,
                                                              compile_id=record.compile_id)
            else:
                # a forward alone: its hook registrations act only in the backward (captured under no_grad)
                captured = capture_graph_module(without_hook_registrations(record.graph_module), clone_value(pristine),
                                                record.compile_id)
            result = run_captured(spec, captured, options, self.progress, model_level_check=False)
        self.engine_compiles += result.compiler.compiles
        return result

    def _localise_through_inductor(self, record: GraphRecord, pristine: list[Any], positions: list[int],
                                   first: Any) -> Any:
        """A call whose gradients differ while our capture's forward and backward graphs each match
        compiled alone (``first``: that result): the engine on the graphs Inductor's own compile of
        this graph hands ``compile_fx_inner`` (its decompositions and partition applied: a value the
        real backward recomputes rather than reads, pytorch#186799), recaptured through that entry
        point (each graph recorded and run eagerly; the forward compiled too, one compile, so the
        backward's inputs get the layouts the compiled forward saves them in), under what is left of
        the budget. Its result where it names the op; else None (``first``
        stands: our recapture failing is never a verdict)."""
        from torch._inductor import config as inductor_config

        from ..load.capture import capture_graph_module_through_inductor
        from ..localise.options import EngineOptions
        from ..localise.pipeline import run_captured

        if any(g.cast_elision_explains for g in first.graphs):
            return None  # explained: a cast the compiled code skipped (listed, as the report says)
        budget = self.settings.max_compiles
        left = None if budget is None else budget - first.compiler.compiles - 1
        if left is not None and left <= 0:
            return None
        noted: dict[str, Any] = {"graph": record.name, "entry": "compile_fx_inner", "named": False, "error": None}
        self.recaptured = noted
        try:
            with inductor_config.patch(record.inductor_options or {}):
                captured = capture_graph_module_through_inductor(record.graph_module, pristine, positions, weighted_sum,
                                                                 record.compile_id)
                self.engine_compiles += sum(g.kind == "forward" for g in captured)
                if not captured:
                    return None
                options = EngineOptions(max_compiles=left, timeout_s=self.settings.timeout_s,
                                        stop_after=self.settings.stage, divergence_known=True,  # type: ignore[arg-type]
                                        oracle=self.settings.oracle)  # type: ignore[arg-type]
                result = run_captured(self._spec(record, pristine), captured, options, self.progress,
                                      model_level_check=False)
        except Exception as error:  # noqa: BLE001 - our recapture, never a verdict: the first result stands
            log.warning("recapturing %s through Inductor's compile_fx_inner failed (%s: %s)", record.name,
                        type(error).__name__, error)
            noted["error"] = f"{type(error).__name__}: {error}"
            return None
        self.engine_compiles += result.compiler.compiles
        noted["named"] = result.names_an_op
        return result if result.names_an_op else None

    def _localise_inside_backend(self, record: GraphRecord, pristine: list[Any]) -> Any:
        """The engine on the graphs the user's backend hands Inductor (``compile_fx``,
        ``standalone_compile``, ``compile_fx_inner``), captured by running the backend on this
        graph again with those entry points recording instead of compiling; None when it hands
        Inductor nothing (or cannot be run again)."""
        from ..errors import ModelError
        from ..load.capture import capture_graph_module_through_backend
        from ..localise.options import EngineOptions
        from ..localise.pipeline import run_captured

        if record.compiler is None or self.settings.level < Level.LOCALISE:
            return None
        try:
            captured, backend_run = capture_graph_module_through_backend(
                record.graph_module, clone_value(pristine), record.compiler, record.backend, record.compile_id)
        except ModelError as error:
            log.warning("could not capture inside the backend %s: %s", record.backend, error)
            return None
        if not captured:
            return None
        options = EngineOptions(max_compiles=self.settings.max_compiles, timeout_s=self.settings.timeout_s,
                                stop_after=self.settings.stage, divergence_known=True,  # type: ignore[arg-type]
                                oracle=self.settings.oracle)  # type: ignore[arg-type]
        result = run_captured(self._spec(record, pristine), captured, options, self.progress, model_level_check=False,
                              backend_run=backend_run)
        self.engine_compiles += result.compiler.compiles
        return result

    def _spec(self, record: GraphRecord | None, inputs: list[Any]) -> Any:
        from ..load.model_file import ModelSpec

        config, unrenderable = nondefault_inductor_config()
        for key, value in ((record.inductor_options if record else None) or {}).items():
            if _renderable(value):
                config[key] = value
            else:
                unrenderable.append(key)
        model = record.graph_module if record else _no_model
        return ModelSpec(path=self.script, model=model, inputs=tuple(inputs), loss_fn=None, get_batches=None,
                         inductor_config=config, unrenderable_config=unrenderable,
                         aot_inductor=record is not None and record.backend == aoti_check.BACKEND)

    # -- output ----------------------------------------------------------------------------

    def output_folder(self) -> OutputFolder | None:
        """The folder this process writes to, opened at its first write: locked, vetted, earlier
        runs kept. In environment-variable mode a folder another process holds is left to it and
        this process writes to ``OUT/pid<pid>``; a folder that cannot be used is reported once
        and nothing is written (the program goes on)."""
        if self.folder is not None or self.folder_error is not None:
            return self.folder
        if self.mode == "environment" and self.out_dir == self.root and written_since(self.root, self.started_at):
            self.out_dir = self.root / f"pid{os.getpid()}"  # a program running beside this one wrote OUT
        try:
            self.folder = OutputFolder(self.out_dir, self.settings.force, os.environ.get(ROOT_PID_VARIABLE)).open()
        except FolderBusy:
            if self.mode != "environment" or self.out_dir != self.root:
                raise
            self.out_dir = self.root / f"pid{os.getpid()}"
            return self.output_folder()
        except OutputError as error:
            self.folder_error = str(error)
            log.error("%s; no report is written", error)
        return self.folder

    def _write_graph(self, record: GraphRecord, inputs: Sequence[Any]) -> None:
        """The graph's code (once) and the real inputs of this call, under ``OUT/graphs``; saving
        inputs stops past ``max_record_mb`` (and the report says so)."""
        folder = self.output_folder()
        if folder is None:
            return
        code = f"graphs/{record.name}.py"
        if code not in folder.files:
            record.files.append(str(folder.write_text(code, record.graph_module.print_readable(print_output=False))))
        if self.recording_stopped:
            return
        buffer = io.BytesIO()
        torch.save(clone_value(list(inputs)), buffer)
        saved = sum(1 for name in folder.files if name.startswith("graphs/") and name.endswith(".pt"))
        over_count = saved >= self.settings.max_record_files
        if over_count or self.recorded_bytes + buffer.tell() > self.settings.max_record_mb * 2**20:
            self.recording_stopped = (f"inputs no longer saved after {self.recorded_bytes / 2**20:.1f} MB in {saved} "
                                      f"file(s) (limits {self.settings.max_record_mb:g} MB: {MAX_RECORD_VARIABLE}, "
                                      f"{self.settings.max_record_files} files: {MAX_RECORD_FILES_VARIABLE})")
            log.warning("%s", self.recording_stopped)
            return
        self.recorded_bytes += buffer.tell()
        record.files.append(str(folder.write_bytes(f"graphs/{record.name}_call_{record.calls}.pt", buffer.getvalue())))

    def _plain_report(self, verdict: str) -> dict[str, Any]:
        """A report with no engine run behind it (clean, recorded, or a divergence not localised)."""
        seconds = time.perf_counter() - self._started
        try:
            from ..output.report import bare_report

            return bare_report(self.script, verdict, seconds)
        except Exception as error:  # noqa: BLE001 - at interpreter exit no import may work; the verdict must
            log.debug("the full report could not be built: %s", error)
            return {"schema": 1, "verdict": verdict, "model": str(self.script), "culprit": None, "nan": None,
                    "stats": {"compiles": self.engine_compiles, "seconds": round(seconds, 2)}}

    def script_json(self) -> dict[str, Any]:
        return {
            "path": str(self.script), "argv": self.argv, "mode": self.mode,
            "level": int(self.settings.level), "level_name": self.settings.level.label,
            "check_every": self.settings.check_every, "stop_on_divergence": self.settings.stop_on_divergence,
            "graphs_compiled": len(self.graphs), "graphs_checked": sum(1 for g in self.graphs if g.checks),
            "graphs_not_checked": [g.name for g in self.graphs if g.outcome == "not_checked"],
            # added key: every graph no call of which was judged, with why (a run with one is never clean)
            "graphs_unseen": {g.name: g.unseen_reason() for g in self.graphs if not g.checked},
            "calls": self.calls, "calls_checked": self.calls_checked, "engine_compiles": self.engine_compiles,
            "recaptured": self.recaptured,
            "tool_seconds": round(self.tool_seconds, 3),
            "first_divergence_call": self.divergence.to_json() if self.divergence else None,
            "localised": self.localised, "not_localised": self.not_localised,
            "stopped": self.stopped, "exit_code": self.exit_code,
            # Through the CLI, the script's own status passes through; 1-4 are also the tool's codes.
            "exit_code_collides": self.mode == "cli" and self.exit_code in (1, 2, 3, 4) and not self.stopped,
            "rank": None if self.rank is None else vars(self.rank),
            "internal_error": self.internal_error,
            "recording_stopped": self.recording_stopped,
            "interrupted": self.interrupted,
            "ended_early": self.ended_early,
            "processes": self.other_processes(),
            "graphs": [g.to_json() for g in self.graphs],
            # torch.export + AOTInductor ran: compiled by Inductor, never seen by script mode
            "aot_inductor": aoti_compiled(),
        }

    def _served_from_cache(self, graph: str) -> bool:
        return any(record.name == graph and record.cache_hits > 0 for record in self.graphs)

    def _save_report(self) -> None:
        assert self.report is not None
        own = (self.report.get("script") or {}).get("own_verdict")
        self.report["verdict"] = own or self.report["verdict"]  # the processes are covered again below
        self.report["script"] = self.script_json()
        if self.divergence is not None and self.report["verdict"] == "clean" and cast_elided(self.report):
            # one story: the call that failed the end-to-end rule is explained, not a divergence
            self.report["script"]["first_divergence_call"] = {**self.report["script"]["first_divergence_call"],
                                                              "explained_by": "cast_elided"}
        if self.divergence is not None and self.report["verdict"] == "clean" and not cast_elided(self.report):
            self.report["verdict"] = "not_reproducible"  # diverged in the program, not on its own
            # The program's compiled code diverged, a fresh compile of the same graph does not. Only
            # where the program's artifact was served from Inductor's on-disk cache (whose key does
            # not see a patched lowering or codegen; the engine's own compiles bypass it) is a stale
            # artifact a cause worth naming: without a cache hit, no such note.
            cached = self._served_from_cache(self.divergence.graph)
            if cached:
                self.report["stale_artifact"] = STALE_ARTIFACT
            self.report["not_reproducible_cause"] = not_reproducible_cause(self.report, cached)
        folder = self.output_folder()
        self.report["exported"] = self.exported or self.report.get("exported")  # AOTInductor packages' dynamic dims
        if self.out_dir == self.root and self.rank is None:  # the top level: one verdict for every process
            self.report = cover(self.report, process_reports(self.root))
        if folder is not None:
            from ..output.views import add_view_paths, write_views  # torch-free: fine at exit too

            add_view_paths(self.report, folder.path)
            traced = "trace" not in self.report  # a localised report went into the trace when written
            if traced:
                note_trace(self.report)
            folder.write_report(self.report)
            if traced:
                emit_findings(self.report)
            write_views(self.report, folder)

    def _write_status(self, final: bool) -> None:
        folder = self.output_folder() if self.rank is not None else None
        if folder is None or self.rank is None:
            return
        folder.write_json(STATUS_FILE, {
            "rank": self.rank.rank, "pid": os.getpid(), "final": final,
            "verdict": self.report["verdict"] if self.report else None,
            "divergence": self.divergence.to_json() if self.divergence else None,
            "graphs_checked": sum(1 for g in self.graphs if g.checks), "calls_checked": self.calls_checked,
            "report": str(self.out_dir / "report.json") if self.report else None,
        })

    def _verdict_without_finding(self) -> str:
        """``clean`` only when something was checked: a program that compiled nothing, or was
        interrupted first, or only recorded, says so."""
        if self.interrupted:
            return "interrupted"
        if self.divergence is not None:  # seen, but the report of it was never completed
            return "crash" if self.divergence.verdict.get("outcome") == "crash" else "divergent"
        if self.settings.level is Level.RECORD:
            return "incomplete" if any(g.outcome == "not_checked" for g in self.graphs) else "unchecked"
        # every graph the program compiled is judged on a call it made, or the run is incomplete (exit 4)
        if any(not g.checked for g in self.graphs) or (self.graphs and not self.calls_checked):
            return "incomplete"
        return "clean" if self.calls_checked else "unchecked"

    def forked(self) -> None:
        """This process is a fork of the session's (multiprocessing's fork start method): it checks
        its own calls from here on and writes apart, ``OUT/pid<pid>`` (at its divergence: a forked
        worker ends by ``os._exit``), never into the parent's open folder."""
        if self.closed or self.rank is not None:
            return
        if self.folder is not None:
            self.folder.close()  # this process's copy of the lock's descriptor; the parent keeps the lock
        self.out_dir, self.folder, self.folder_error = self.root / f"pid{os.getpid()}", None, None
        self.divergence, self.report, self.localised, self.stopped = None, None, False, False
        self.listed_report = None
        self.trace_recording = contextlib.ExitStack()  # the parent's trace stays the parent's

    def other_processes(self) -> list[dict[str, Any]]:
        """The reports other processes of this session wrote (``OUT/pid<pid>``), for the root's report."""
        return process_reports(self.root) if self.out_dir == self.root else []

    def finish(self, exit_code: int | None) -> dict[str, Any]:
        """Write the final report (and, under torchrun, the status; rank 0 the summary)."""
        self.exit_code = exit_code
        if self.report is None and self.divergence is None:
            self.settle_suspects()
        with self._tool_work():
            if self.report is None and self.listed_report is not None:  # a skipped cast listed, nothing diverged
                self.report = {**self.listed_report, "verdict": self._verdict_without_finding()}
            if self.report is None:
                self.report = self._plain_report(self._verdict_without_finding())
            try:
                self._save_report()
            finally:
                self.trace_recording.close()
            self._write_status(final=True)
            if self.rank is not None and self.rank.rank == 0:
                summary = write_summary(self.root, self.rank.world_size, self.settings.summary_wait_s)
                log.warning("all ranks: %s (ranks diverged: %s, first: %s); summary: %s", summary["verdict"],
                            summary["diverged"] or "none", summary["first"], self.root / SUMMARY_FILE)
        if self.folder is not None:
            self.folder.close()
        return self.report


def _on_fake_values(args: Sequence[Any]) -> bool:
    """A call on fake tensors is the compiler's, never the program's: Dynamo's DDPOptimizer compiles
    each bucket's piece of a graph as it propagates fake inputs through the split graph, calling
    the compiled piece on them. Nothing there has a value to check."""
    from torch._subclasses.fake_tensor import is_fake

    return any(isinstance(arg, torch.Tensor) and is_fake(arg) for arg in args)


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:500]


def _import_writer() -> None:
    """Import what writing a report needs while the program runs normally: the session starts
    inside the program's import of ``torch._dynamo`` (too early for Inductor's modules), and at
    interpreter exit importing them fails (they register threads' exit hooks)."""
    with contextlib.suppress(Exception):
        import importlib

        importlib.import_module("bisect_engine.output.writer")


def _no_model(*_args: Any) -> None:
    """Stands in for a model in reports of runs that localised nothing."""


def within_upstream_lines(script: dict[str, Any]) -> list[str]:
    """A line per graph output listed by the upstream gate: beyond the tool's ulp rule, within
    ``torch._dynamo.utils.same``'s tolerance, so no divergence (issue 36)."""
    return [f"  listed:  {graph['graph']} call {item['call']} {item['output']}{_ops(item)}: {item['compiled_rms_ulps']} "
            f"ulps RMS (eager {item['eager_rms_ulps']}), {within(item)}: not a divergence"
            for graph in script.get("graphs") or [] for item in graph.get("within_upstream") or []] + [
        f"  listed:  {graph['graph']} call {item['call']} ({', '.join(item.get('ops') or []) or 'op not named'}): "
        f"its error was absorbed by {', '.join(item['read_by'])} and never reached what the program kept"
        for graph in script.get("graphs") or [] for item in graph.get("absorbed") or []]


def _ops(item: dict[str, Any]) -> str:
    """`` (aten.erf.default)``: the ops a listed call's graph gets wrong alone, where named."""
    return f" ({', '.join(item['ops'])})" if item.get("ops") else ""


def unseen_lines(script: dict[str, Any]) -> list[str]:
    """A line per graph no call of which was judged, other than those that compared nothing
    (:func:`~bisect_engine.script.state_check.not_checked_lines` names those)."""
    unseen = script.get("graphs_unseen") or {}
    return [f"  not checked: {name}: {reason}" for name, reason in unseen.items() if reason != NOTHING_COMPARED]


def script_summary(report: dict[str, Any]) -> str:
    """A few lines for stderr: the engine's summary when it localised, the script's counts."""
    from ..output.amplified import differences_lines
    from ..output.summary import summary

    script = report["script"]
    counts = (f"{script['graphs_compiled']} graph(s) compiled, {script['graphs_checked']} checked, "
              f"{script['calls_checked']} of {script['calls']} call(s) checked")
    if report["verdict"] in ("clean", "unchecked", "incomplete"):
        what = {"unchecked": "recorded", "incomplete": "not every graph checked"}.get(report["verdict"], "clean")
        if report.get("verdict_from") == "processes" and report["verdict"] == "incomplete":
            what = "not every process checked"
        return "\n".join([f"bisect-accuracy: {what} ({counts}); report: {report['report_path']}",
                          *process_lines(script), *aoti_check.summary_lines(report), *unseen_lines(script),
                          # what a listing look found: a skipped cast, a departure the gradients show
                          *differences_lines([d for d in report.get("differences") or []
                                              if d.get("cast_elided") or d.get("backward")]),
                          *within_upstream_lines(script)]
                         ) + not_checked_lines(script)
    lines = [summary(report)]
    if report.get("verdict_from") == "processes":
        lines.append(f"  from:    another process of the program (this one: {script.get('own_verdict')})")
    first = script["first_divergence_call"]
    if first and first.get("kind") == "crash":
        lines.append(f"  crashed: compiling {first['graph']} (after {first['call']} program call(s)): {first.get('error')}; "
                     "the program saw that exception")
    elif first:
        lines.append(f"  diverged: {first['graph']} on its call {first['graph_call']} (program call {first['call']}):"
                     f" {first.get('output')}, {first.get('reason')}")
    recaptured = script.get("recaptured")
    if recaptured:
        how = ("the op is named in those graphs" if recaptured.get("named") else
               f"failed: {recaptured['error']}" if recaptured.get("error") else "no op named there either")
        lines.append(f"  recaptured: {recaptured['graph']} as Inductor's compile hands {recaptured['entry']} its graphs "
                     f"(our capture's graphs each matched): {how}")
    if script.get("not_localised"):
        lines.append(f"  not localised: {script['not_localised']}")
    if script.get("internal_error"):
        lines.append(f"  internal error: {script['internal_error']}")
    lines.append(f"  script:  {counts}")
    lines += aoti_check.summary_lines(report)
    lines += process_lines(script)
    lines.append(f"  report:  {report['report_path']}")
    return "\n".join(lines)


# -- starting and ending a session ------------------------------------------------------------


@dataclass
class ActiveSession:
    """A session whose backend wrapping is in force until :meth:`close`."""

    session: Session
    stack: contextlib.ExitStack

    def close(self) -> None:
        self.stack.close()
        self.session.closed = True


def start_session(settings: ScriptSettings, script: Path, argv: Sequence[str], mode: str,
                  progress: Progress | None = None, rank: RankInfo | None = None,
                  folder: OutputFolder | None = None, child: bool = False) -> ActiveSession:
    """A session, and every ``torch.compile`` from now on routed through its checking backend."""
    session = Session(settings, script, argv, mode, progress, rank, folder, child)
    os.register_at_fork(after_in_child=session.forked)
    stack = contextlib.ExitStack()
    stack.enter_context(compiles_routed_through(session.wrap_backend))
    _watch_aot_inductor(session, stack)
    if folder is not None:  # --trace (the CLI opens the folder first), kept when the session finishes
        session.trace_recording.enter_context(recording_trace(folder, settings.trace))
    return ActiveSession(session, stack)


def _watch_aot_inductor(session: Session, stack: contextlib.ExitStack) -> None:
    """AOTInductor's entry points observed (:mod:`bisect_engine.script.aoti_check`): wrapped in
    the modules already imported, and in the others once the program imports them."""
    def never_raises(observe: Callable[..., Any], fallback: Callable[..., Any]) -> Callable[..., Any]:
        def observed(*args: Any) -> Any:
            try:
                return observe(session, *args)
            except Exception as error:  # noqa: BLE001 - the tool's failure never ends the program
                session._internal_error(error, f"checking an AOTInductor {observe.__name__}")
                return fallback(*args)
        return observed

    patches = stack.enter_context(AotiPatches(never_raises(aoti_check.package_compiled, lambda *args: None),
                                              never_raises(aoti_check.package_loaded, lambda path, model: model),
                                              never_raises(aoti_check.library_made, lambda *args: None),
                                              lambda *args: aoti_check.package_called(session, *args)))
    for name in AOTI_ENTRY_POINTS:
        if name in sys.modules:
            patches.patch(sys.modules[name])
    finder = EveryImport(AOTI_ENTRY_POINTS, patches.patch)
    sys.meta_path.insert(0, finder)
    stack.callback(_remove_finder, finder)


def _remove_finder(finder: EveryImport) -> None:
    if finder in sys.meta_path:
        sys.meta_path.remove(finder)


# -- BISECT_ACCURACY_LEVEL=<n> python train.py -----------------------------------------------

_ACTIVE: list[ActiveSession] = []


def start_from_environment() -> Session | None:
    """Start a session from ``BISECT_ACCURACY_*`` (called by the start-up hook once torch._dynamo
    is imported); it ends, and writes its report, at interpreter exit."""
    if _ACTIVE:
        return _ACTIVE[0].session
    log_to_stderr()
    try:
        settings = settings_from_environment()
    except ValueError as error:
        log.warning("%s; the hook stays off", error)
        return None
    if settings.level is Level.OFF:
        return None
    script = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else Path("<interactive>")
    root = os.environ.setdefault(ROOT_PID_VARIABLE, str(os.getpid()))  # children inherit it
    active = start_session(settings, script, sys.argv[1:], "environment", Progress(enabled=True),
                           rank_from_environment(), child=root != str(os.getpid()))
    _ACTIVE.append(active)
    atexit.register(_finish_at_exit, active)
    return active.session


STALE_ARTIFACT = ("the program's compiled graph diverged but a fresh compile of it does not: the program's compiled "
                  "artifact may be stale (served from Inductor's on-disk cache, whose key does not see patched "
                  "lowerings or codegen); rerun with a fresh TORCHINDUCTOR_CACHE_DIR to tell")


def _finish_at_exit(active: ActiveSession) -> None:
    active.close()
    session = active.session
    if not session.graphs and not session.other_processes():  # compiled nothing (a launcher, a worker)
        if session.rank is None:
            return
        # a rank of the program compiled nothing: said, and in its status, so rank 0's summary covers it
        log.warning("rank %d compiled nothing (no graph reached torch.compile's backend): nothing was checked",
                    session.rank.rank)
    try:
        session.output_folder()  # an earlier run's folders are set aside before this one's are listed
        session.finish(None)  # a launcher that compiled nothing: its report's verdict is its children's
        report = session.report or {}
        log.warning("%s; report: %s", report.get("script", {}).get("own_verdict") or report.get("verdict", "?"),
                    session.out_dir / "report.json")
        for other in session.other_processes():
            log.warning("process %s: %s; report: %s", other["pid"], other["verdict"], other["report"])
        if report.get("verdict_from") == "processes":
            log.warning("all processes: %s; report: %s", report["verdict"], session.out_dir / "report.json")
        if session.out_dir != session.root and session.rank is None and should_cover_root(session.root):
            if cover_root(session.root):
                log.warning("all processes: see %s", session.root / "report.json")
    except Exception:  # noqa: BLE001 - at exit, the log is all that is left
        log.exception("writing the report failed")


def cast_elided(report: dict[str, Any]) -> bool:
    """The program diverged because its compiled code skipped a ``.to(bf16)``/``.to(fp16)`` round
    trip the user wrote (Inductor's intended behaviour unless ``emulate_precision_casts``), and
    that setting, checked, makes compiled follow eager: a listed difference beside ``clean``."""
    return any(d.get("cast_elided") and (d.get("setting") or {}).get("follows_eager")
               for d in report.get("differences") or [])
