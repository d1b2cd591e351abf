"""Model files with ``get_batches()``: scan first (batches, or training steps), then localise.

With ``get_optimizer`` (and ``loss_fn``) the training steps are scanned; otherwise the batches.
The core pipeline then runs on what the scan found: the failing samples of the failing batch
(all of it when samples are not independent), or the model as it was just before the failing
step, on that step's batch.
"""
from __future__ import annotations

import copy
import dataclasses
import time
from typing import Any, cast

import torch

from ..errors import ModelError, UsageError
from ..load.model_file import ModelSpec
from ..search import BudgetExhausted, memory_cuts
from .judge import RunSearch, judge_of
from .options import EngineOptions
from .pipeline import RunResult, budget_message, run
from .scans import BatchScan, StepScan, marked_dynamic, recompiled_dims, scan_batches, scan_steps, take_samples


# A scan compares whole-model runs, whose random draws (dropout) differ between eager and Inductor;
# the localisation that follows feeds eager's draws to both sides and has the last word.
CLEARED = ("{what} differed in the scan, but with eager's random draws fed to both sides no graph diverges: "
           "the difference was the draws (the model uses dropout or other random ops)")


def _batches(spec: ModelSpec) -> list[Any]:
    try:
        batches = list(spec.get_batches())  # type: ignore[misc]
    except Exception as error:
        raise ModelError(f"{spec.path.name}: get_batches() raised {type(error).__name__}: {error}") from error
    if not batches:
        raise UsageError(f"{spec.path.name}: get_batches() gave no batches: nothing to check")
    return batches


def run_scanned(spec: ModelSpec, options: EngineOptions, search: RunSearch, on_divergence: Any = None) -> RunResult:
    """Scan the batches (or training steps) through the run's search, then localise what failed
    with the same search; a budget cut during the scan leaves a clean record that says so."""
    started = time.perf_counter()
    search.stage = "scan"
    batches = _batches(spec)
    training = spec.get_optimizer is not None and spec.loss_fn is not None
    try:
        with memory_cuts():  # an allocation that failed where no step made it a cut
            if training:
                result = _steps(spec, batches, options, search, on_divergence)
            else:
                result = _batches_flow(spec, batches, options, search, on_divergence)
    except BudgetExhausted as exhausted:
        result = dataclasses.replace(_clean(spec, search, {}), budget=budget_message(exhausted, options, search))
    return dataclasses.replace(result, seconds=time.perf_counter() - started)


def _steps(spec: ModelSpec, batches: list[Any], options: EngineOptions, search: RunSearch,
           on_divergence: Any) -> RunResult:
    assert spec.loss_fn is not None  # run_scanned takes this path only with a loss_fn
    judge = judge_of(search)
    scan = StepScan(cast(torch.nn.Module, spec.model), batches, spec.loss_fn, spec.get_optimizer, judge.compiler,
                    options.judgement, options.seed)
    judge.scan = scan
    finding = scan_steps(search, scan)
    if finding is None:
        return _clean(spec, search, {"steps_scanned": len(batches)})
    model = cast(torch.nn.Module, copy.deepcopy(spec.model))  # training steps: get_model() is a Module
    model.load_state_dict(finding.state)
    dims = recompiled_dims(batches, finding.step) if spec.dynamic is not False else []  # see _batches_flow
    result = run(dataclasses.replace(spec, model=model, inputs=marked_dynamic(finding.batch, dims)), _known(options),
                 search, on_divergence)
    if result.finding is None and result.draws_random:
        return dataclasses.replace(result, scan={"step": None, "step_detail": {
            **finding.to_json(), "cleared": CLEARED.format(what=f"step {finding.step}")}})
    return dataclasses.replace(result, scan={"step": finding.step, "step_detail": finding.to_json()})


def _batches_flow(spec: ModelSpec, batches: list[Any], options: EngineOptions, search: RunSearch,
                  on_divergence: Any) -> RunResult:
    judge = judge_of(search)
    scan = BatchScan(spec.model, batches, judge.compiler, options.judgement, options.seed)
    judge.scan = scan
    finding = scan_batches(search, scan)
    if finding is None:
        return _clean(spec, search, {"batches_scanned": len(batches)})
    # Batches of several sizes: the job ran this one through Dynamo's symbolic recompile.
    dims = recompiled_dims(batches, finding.index) if spec.dynamic is not False else []
    inputs = take_samples(finding.batch, finding.samples) if finding.samples else finding.batch
    result = run(dataclasses.replace(spec, inputs=marked_dynamic(inputs, dims)), _known(options), search, on_divergence)
    if result.finding is None and finding.samples:  # the samples alone do not show it: whole batch
        result = run(dataclasses.replace(spec, inputs=marked_dynamic(finding.batch, dims)), _known(options), search,
                     on_divergence)
        finding = dataclasses.replace(finding, samples=None)
    if result.finding is None and result.draws_random:
        return dataclasses.replace(result, scan={"batch": None, "batch_detail": {
            **finding.to_json(), "cleared": CLEARED.format(what=f"batch {finding.index}")}})
    return dataclasses.replace(result, scan={"batch": finding.to_json()})


def _known(options: EngineOptions) -> EngineOptions:
    """The scan saw this batch or step diverge: every graph takes the per-node check first."""
    return dataclasses.replace(options, divergence_known=True)


def _clean(spec: ModelSpec, search: RunSearch, scan: dict[str, Any]) -> RunResult:
    """No batch or step failed (or the budget cut the scan). The record holds no search, as before
    the scans went through it (the report's ``stats.workers`` stays null: no graph was searched)."""
    return RunResult(spec, (), judge_of(search).compiler, 0.0, scan=scan)
