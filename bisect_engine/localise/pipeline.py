"""The pipeline from a model to a finding: capture, then the run's plan of named steps.

:func:`run` captures the model through ``torch.compile`` (through the user's own backend when it
has one, :func:`_capture`); :func:`run_captured` searches the captured graphs by running
:data:`~bisect_engine.localise.run_steps.RUN_PLAN` with a :class:`~bisect_engine.localise.drive.Driver`:

1. *graphs*, in order (forward graphs in call order, then backward), until one has a finding
   (:data:`~bisect_engine.localise.graph_steps.GRAPH_PLAN`): the per-node check first where the
   whole compile is dearer or the program is known to diverge (``order.whole_first``; a headline
   culprit confirmed alone whose compiled value, replayed eagerly, fails the graph's outputs ends
   it with no whole-graph compile), else the whole graph (our recompile crashing: views as
   reshapes, or "harness" when the real compile works) → per-node (cached) → headline culprit →
   confirm it alone → window; else the amplifying op; a finding by the ulp rule alone is the
   headline only where the program's outputs (the model-level check, scope model) fail too, else
   it is listed (``localise/upstream.py``);
2. with no finding: forward departures carried into the backward (one eager replay); the model
   through ``torch.compile`` (``clean`` vs ``not_reproducible``), then each graph's later calls;
   the user's backend and the model-level subsystem;
3. a finding's follow-up: the op inside a HOP culprit, the subsystem, the sizes a culprit in a
   symbolic graph fails at.

Every compile is a candidate judged through the run's one :class:`~bisect_engine.search.Search`
(made once at the run's top, :func:`~bisect_engine.localise.judge.run_search`, and handed down:
cached, counted, within ``--max-compiles``/``--timeout``, the stage and progress on it); when the
budget runs out, the :class:`RunFinding` says which stage it cut, and holds what the completed
steps learned.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

import torch

from ..errors import Interrupted, ModelError
from ..load.capture import BackendRun, capture, capture_through_backend
from ..load.model_file import ModelSpec, user_backend
from ..load.memory import peak_rss_bytes, run_offload
from ..verdict import offload
from ..search import ALLOCATION_FAILED, BudgetExhausted, Reporter, memory_cuts
from ..verdict.compiler import Compiler
from ..verdict.graphs import CapturedGraph
from .drive import SAME_DRAWS, Driver, model_candidate
from .judge import RunSearch, begin_subject, close_workers, run_search
from .options import EngineOptions
from .nothing_compiled import why_nothing_compiled
from .records import GraphFinding, RunFinding
from .run_steps import PRE_GRAD_PASSES, RUN_PLAN

log = logging.getLogger(__name__)


def run(spec: ModelSpec, options: EngineOptions, search: RunSearch,
        on_divergence: Callable[[], None] | None = None) -> RunFinding:
    """Capture the model through torch.compile, then search the captured graphs with the run's search."""
    started = time.perf_counter()
    torch.manual_seed(options.seed)
    stage, search.stage = search.stage, "capture"
    try:
        with search.progress.step("capture"):
            captured, backend_run = _capture(spec, options.seed)
    except BudgetExhausted as exhausted:  # an allocation failed under our capture: exit 4 with a report, nothing judged
        return _stopped_at_capture(spec, options, search, exhausted, started)
    finally:
        search.stage = stage
    if not captured:
        raise ModelError(why_nothing_compiled(spec, options.seed))
    return run_captured(spec, captured, options, search.progress, started, on_divergence=on_divergence,
                        backend_run=backend_run, search=search)


def _stopped_at_capture(spec: ModelSpec, options: EngineOptions, search: RunSearch, exhausted: BudgetExhausted,
                        started: float) -> RunFinding:
    """The run's finding when its memory ran short while capturing: no graph captured or judged, the
    run ``incomplete`` with ``budget`` saying what failed where (never the model's error: eager runs it)."""
    judge = begin_subject(search, spec, options)
    driver = Driver(RunFinding(spec, (), judge.compiler, 0.0, [], search=search), judge, options, None)
    driver.note(budget=budget_message(exhausted, options, search), seconds=time.perf_counter() - started,
                peak_rss_bytes=peak_rss_bytes())
    return driver.finding


def _capture(spec: ModelSpec, seed: int) -> tuple[list[CapturedGraph], BackendRun | None]:
    """The graphs to search: those the user's own backend hands Inductor, captured inside it
    (its ``BackendRun``); else, or when it hands Inductor none or cannot be captured inside (our
    harness: said in the report, never a verdict), the Dynamo graphs captured the plain way."""
    backend = user_backend(spec.compiled) if spec.custom_backend else None
    if backend is None:
        return capture(spec.model, spec.inputs, spec.loss_fn, spec.dynamic)[0], None
    name = spec.backend or type(backend).__name__
    try:
        captured, _output, backend_run = capture_through_backend(spec.model, spec.inputs, spec.loss_fn, backend, name, spec.dynamic)
        if captured:
            return captured, backend_run
        note = "it hands Inductor no graph"
    except ModelError as error:
        log.warning("capturing inside the backend %s failed: %s", name, error)
        note = f"capturing inside it failed ({(str(error).splitlines() or [''])[0][:200]})"
    torch.manual_seed(seed)
    return capture(spec.model, spec.inputs, spec.loss_fn, spec.dynamic)[0], BackendRun(name, note=note)


def run_captured(spec: ModelSpec, captured: list[CapturedGraph], options: EngineOptions, progress: Reporter,
                 started: float | None = None, model_level_check: bool = True, compiler: Compiler | None = None,
                 on_divergence: Callable[[], None] | None = None, backend_run: BackendRun | None = None,
                 search: RunSearch | None = None) -> RunFinding:
    """Search graphs captured elsewhere (a model file, or a running script's compiled graph).

    ``search``: the run's search (its workers are the caller's to close); None: a search of this
    call's own, around ``compiler`` (or a new one within ``options``' budget), closed on return.
    ``model_level_check=False`` skips recompiling ``spec.model`` through torch.compile (script
    mode: the user's own compiled frames must not be reset). ``on_divergence`` is called once a
    graph is found to diverge, before the search, or as a per-node check that goes first starts
    (a large graph, whose compile outlasts the imports of the repro's interpreters the writer starts).
    """
    started = time.perf_counter() if started is None else started
    own = search is None
    search = search if search is not None else run_search(options, progress, compiler=compiler)
    judge = begin_subject(search, spec, options)
    judge.hold(captured)
    finding = RunFinding(spec, (), judge.compiler, 0.0, captured, search=search,
                         model_level_check=model_level_check, backend_run=backend_run)
    driver = Driver(finding, judge, options, on_divergence)
    # values wait on disk only when memory asks: the caller's policy (api: the output folder's
    # scratch), else one of this run's own in the system's temporary folder (script mode)
    policy = offload.running() or run_offload(options.memory_budget_bytes, None, "no output folder given to the engine",
                                              judge.compiler.budget.require)
    try:
        with offload.using(policy), memory_cuts():  # an allocation that failed where no step made it a cut
            driver.run_plan(RUN_PLAN)
    except BudgetExhausted as exhausted:
        driver.note(budget=budget_message(exhausted, options, search))
    except Interrupted as interrupt:  # what was learned so far is the result; the caller re-raises
        driver.note(interrupted={"signal": interrupt.name, "signum": interrupt.signum, "stage": search.stage})
    finally:
        if own:
            close_workers(search)
    driver.note(seconds=time.perf_counter() - started, peak_rss_bytes=peak_rss_bytes(), offload=policy.to_json())
    return driver.finding


def budget_message(exhausted: BudgetExhausted, options: EngineOptions, search: RunSearch) -> str:
    """The report's ``budget``: which limit cut the run, and during which stage."""
    if exhausted.reason == "max_compiles":
        limit = f"--max-compiles {options.max_compiles} reached ({search.spent} compiles)"
    elif exhausted.reason == "timeout":
        limit = f"--timeout {options.timeout_s:g} s reached"
    else:  # memory: what ran short, in the guard's words
        limit = str(exhausted)
    advice = ("more free memory (or smaller inputs)" if exhausted.reason == "memory" and limit.startswith(ALLOCATION_FAILED)
              else "raise the limit")
    return f"{limit} during the {search.stage} stage; {advice} for a complete answer"


# The names other modules import from here (records were GraphResult / RunResult before they froze).
GraphResult = GraphFinding
RunResult = RunFinding
__all__ = ["GraphFinding", "GraphResult", "PRE_GRAD_PASSES", "RunFinding", "RunResult", "SAME_DRAWS",
           "budget_message", "model_candidate", "run", "run_captured"]
