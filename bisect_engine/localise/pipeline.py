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
   confirm it alone → window; else the amplifying op;
2. with no finding: forward departures carried into the backward (one eager replay); the model
   through ``torch.compile`` (``clean`` vs ``not_reproducible``), then each graph's later calls;
   the user's backend and the model-level subsystem;
3. a finding's follow-up: the op inside a HOP culprit, the subsystem, the sizes a culprit in a
   symbolic graph fails at.

Every compile is a candidate judged through one :class:`~bisect_engine.search.Search` (cached,
counted, within ``--max-compiles``/``--timeout``); when the budget runs out, the
:class:`RunFinding` says which stage it cut, and holds what the completed steps learned.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

import torch

from ..errors import Interrupted, ModelError
from ..load.capture import BackendRun, capture, capture_through_backend
from ..load.model_file import ModelSpec, user_backend
from ..progress import Progress
from ..search import Budget, BudgetExhausted
from ..verdict.compiler import Compiler
from ..verdict.graphs import CapturedGraph
from .drive import SAME_DRAWS, Driver, model_candidate
from .judge import Judge, close_workers, new_search
from .options import EngineOptions
from .nothing_compiled import why_nothing_compiled
from .records import GraphFinding, RunFinding
from .run_steps import PRE_GRAD_PASSES, RUN_PLAN

log = logging.getLogger(__name__)


def new_compiler(options: EngineOptions, started_at: float | None = None) -> Compiler:
    """A compiler bounded by the run's budget (``started_at``: ``time.monotonic()`` at the start)."""
    return Compiler(budget=Budget(options.max_compiles, options.timeout_s, started_at=started_at))


def run(spec: ModelSpec, options: EngineOptions, progress: Progress, compiler: Compiler | None = None,
        on_divergence: Callable[[], None] | None = None) -> RunFinding:
    """Capture the model through torch.compile, then search the captured graphs."""
    started = time.perf_counter()
    torch.manual_seed(options.seed)
    with progress.step("capture"):
        captured, backend_run = _capture(spec, options.seed)
    if not captured:
        raise ModelError(why_nothing_compiled(spec, options.seed))
    return run_captured(spec, captured, options, progress, started, compiler=compiler, on_divergence=on_divergence,
                        backend_run=backend_run)


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


def run_captured(spec: ModelSpec, captured: list[CapturedGraph], options: EngineOptions, progress: Progress,
                 started: float | None = None, model_level_check: bool = True, compiler: Compiler | None = None,
                 on_divergence: Callable[[], None] | None = None, backend_run: BackendRun | None = None) -> RunFinding:
    """Search graphs captured elsewhere (a model file, or a running script's compiled graph).

    ``model_level_check=False`` skips recompiling ``spec.model`` through torch.compile (script
    mode: the user's own compiled frames must not be reset). ``on_divergence`` is called once a
    graph is found to diverge, before the search (the writer starts the repro's interpreters).
    """
    started = time.perf_counter() if started is None else started
    compiler = compiler or new_compiler(options)
    judge = Judge(compiler, options.judgement, options.seed, spec)
    finding = RunFinding(spec, (), compiler, 0.0, captured, search=new_search(judge, options.workers),
                         model_level_check=model_level_check, backend_run=backend_run)
    driver = Driver(finding, judge, options, progress, on_divergence)
    try:
        driver.run_plan(RUN_PLAN)
    except BudgetExhausted as exhausted:
        driver.note(budget=budget_message(exhausted, options, compiler))
    except Interrupted as interrupt:  # what was learned so far is the result; the caller re-raises
        driver.note(interrupted={"signal": interrupt.name, "signum": interrupt.signum, "stage": compiler.stage})
    finally:
        close_workers(driver.finding.search)
    driver.note(seconds=time.perf_counter() - started)
    return driver.finding


def budget_message(exhausted: BudgetExhausted, options: EngineOptions, compiler: Compiler) -> str:
    limit = (f"--max-compiles {options.max_compiles} reached ({compiler.compiles} compiles)"
             if exhausted.reason == "max_compiles" else f"--timeout {options.timeout_s:g} s reached")
    return f"{limit} during the {compiler.stage} stage; raise the limit for a complete answer"


# The names other modules import from here (records were GraphResult / RunResult before they froze).
GraphResult = GraphFinding
RunResult = RunFinding
__all__ = ["GraphFinding", "GraphResult", "PRE_GRAD_PASSES", "RunFinding", "RunResult", "SAME_DRAWS",
           "budget_message", "model_candidate", "new_compiler", "run", "run_captured"]
