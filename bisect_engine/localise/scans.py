"""Scans over data batches and training steps: find *when* compiled and eager first part ways.

Each scan runs three copies side by side, eager in the model's dtype, eager in fp64 and compiled
(one Inductor compile, reused for every batch of the same shape), judges every batch or step
with the same oracle as the graph search, and stops at the first that diverges or turns
non-finite. Each batch or step is a candidate (:class:`~bisect_engine.verdict.candidate.ScanCandidate`)
judged through the run's search: its verdict cached and recorded in the search's history, its
compiles counted against the budget as they happen (a batch Dynamo does not recompile costs
none), its progress reported through the search. :class:`BatchScan` and :class:`StepScan` are the
evaluators (the run's judge hands them the scan's candidates); :func:`scan_batches` and
:func:`scan_steps` propose the candidates in order. The op is then found by the core pipeline on
that batch (only its failing samples, when samples are independent) or on the model state saved
just before that step.
"""
from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import torch
import torch.utils._pytree as pytree

from ..search import Search, stop_if_out_of_memory
from ..verdict.candidate import ScanCandidate
from ..verdict.compare import Outcome, TensorVerdict
from ..verdict.judgement import SCAN, Oracle, OutputFacts, judge_outputs, with_run_floors
from ..verdict.noise import model_floors
from ..errors import ModelError, UsageError
from ..verdict.compiler import Compiler
from ..verdict.fx_eval import fresh_inputs, to_fp64
from ..verdict.model_state import ModelRuns
from ..verdict.oracle import SubgraphVerdict, over_runs
from ..verdict.precision import allowed_units

ScanSearch = Search[Any, SubgraphVerdict]  # the run's search (a RunSearch), as the scans use it

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Check:
    diverged: bool
    nonfinite: bool
    verdicts: tuple[TensorVerdict, ...] = ()

    @property
    def failed(self) -> bool:
        return self.diverged or self.nonfinite


def _tensors(value: Any) -> list[torch.Tensor]:
    return [v.detach().clone() for v in pytree.tree_leaves(value) if isinstance(v, torch.Tensor)]


def judge(eager: list[Any], fp64: list[Any], compiled: list[Any], oracle: Oracle,
          unit: float | None = None, spreads: Sequence[float] = (), floors: Sequence[float] = ()) -> Check:
    """``unit``: the coarsest precision the user allowed to an op of the compiled model (TF32),
    which every output downstream of it carries (see :func:`allowed_units`); ``spreads``: per
    output, how far the compiled values lie apart run to run (:func:`decided`); ``floors``: per
    output, the scale its rounding lives at where it cancelled (the noise model, :func:`noise_floors`)."""
    floors = list(floors) if len(floors) == len(eager) else [0.0] * len(eager)
    facts = with_run_floors([OutputFacts(unit=unit, scale_floor=floor) for floor in floors], spreads, eager)
    verdicts = judge_outputs(oracle, SCAN, eager, fp64, compiled, facts)
    nonfinite = any(t.is_floating_point() and not bool(torch.isfinite(t).all()) for t in [*eager, *compiled])
    return Check(any(v.outcome is not Outcome.MATCH for v in verdicts), nonfinite, tuple(verdicts))


def scan_verdict(checks: dict[str, Check], runs: tuple[int, ...] = (), side: str = "") -> SubgraphVerdict:
    """A batch's or step's verdict in the search: MISMATCH when a part diverged or turned
    non-finite, each output's verdict named by its part ("output 0", "gradients 3"); ``runs``:
    (runs that failed, runs) where values changed run to run, ``side`` whose (:func:`decided`)."""
    outputs = {f"{part} {i}": v for part, check in checks.items() for i, v in enumerate(check.verdicts)}
    failed = any(check.failed for check in checks.values())
    return SubgraphVerdict(Outcome.MISMATCH if failed else Outcome.MATCH, outputs, runs=runs, nondeterministic=side)


Parts = dict[str, list[torch.Tensor]]


def noise_floors(checks: dict[str, Check], noisy_run: Callable[[], Parts], fp64: Parts | Callable[[], Parts],
                 eager: Parts) -> dict[str, list[float]]:
    """Where a batch or step diverged (not by a non-finite value), each part's noise floors: the
    fp64 run once more with every op's result rounded at random, as the model-level check does
    (:func:`~bisect_engine.verdict.noise.model_floors`), so an output that cancels to ~0 (a sum of
    what a normalisation centred, a pooled total minus its rows' total) is judged where its
    rounding lives; {} where nothing diverged (no run made). ``fp64``: the fp64 run's parts, or
    the run that makes them (made only where something diverged)."""
    if not any(check.diverged for check in checks.values()) or any(check.nonfinite for check in checks.values()):
        return {}
    fp64 = fp64() if callable(fp64) else fp64
    names = [name for name in fp64 if name in eager]
    flat_fp64 = [value for name in names for value in fp64[name]]
    flat_eager = [value for name in names for value in eager[name]]
    floors = model_floors(lambda: [value for name, values in noisy_run().items() if name in names for value in values],
                          flat_fp64, flat_eager)
    return _split(floors, fp64, names)


def _split(values: Sequence[Any], like: Parts, names: Sequence[str]) -> dict[str, list[Any]]:
    """A flat list (the values of ``like``'s parts ``names``, in order) back into those parts."""
    parts, start = {}, 0
    for name in names:
        parts[name] = list(values[start:start + len(like[name])])
        start += len(like[name])
    return parts


def decided(checks: dict[str, Check], compiled: Parts, rerun: Callable[[], Parts],
            judge_parts: Callable[[Parts, dict[str, Sequence[float]]], dict[str, Check]],
            seed: int, eager: tuple[Parts, Callable[[], Parts]] | None = None,
            ) -> tuple[dict[str, Check], tuple[int, ...], str]:
    """A batch or step that diverged, decided over runs where the compiled copy, or eager
    (``eager``: its parts and the run that makes them again), gives other values run to run on the
    same batch (a duplicate-index sum's atomics; issue 36): the one decision every judged
    candidate takes (:func:`~bisect_engine.verdict.oracle.over_runs`: judged against the union of
    both sides' spread, then by most runs), so run-to-run noise never picks a batch or a step.
    Only a divergence is decided so (a non-finite value stands as it is); ``rerun``: the compiled
    side once more on the same inputs and state. The checks that decide, (failed, runs) and the
    side whose values changed ("": none)."""
    if not any(check.diverged for check in checks.values()) or any(check.nonfinite for check in checks.values()):
        return checks, (), ""
    names = list(compiled)

    def flat(parts: Parts) -> list[Any]:
        return [value for name in names for value in parts[name]]

    def split(values: Sequence[Any]) -> dict[str, Any]:
        return _split(values, compiled, names)

    eager_runs = None if eager is None else (flat(eager[0]), lambda: flat(eager[1]()))
    outcome = over_runs(checks, flat(compiled), lambda: flat(rerun()),
                        lambda values, spreads: judge_parts(split(values), split(spreads)),
                        lambda judged: any(check.failed for check in judged.values()), seed, eager=eager_runs)
    if outcome is None:
        return checks, (), ""
    log.info("scan: %s values change run to run; %d of %d compiled runs diverge", outcome[2], *outcome[1])
    return outcome[0], outcome[1], outcome[2]


def compiled_copy(model: Callable[..., Any], compiler: Compiler, allowed: list[float] | None = None) -> Callable[..., Any]:
    """``torch.compile`` through Inductor's entry point, compiles counted; ``allowed`` collects the
    reduced precisions the user allowed to ops of the graphs it compiles."""
    def backend(graph_module: torch.fx.GraphModule, example: list[Any]) -> Any:
        if allowed is not None:
            allowed.extend(allowed_units(graph_module))
        return compiler.compile(graph_module, example, label="scan", aten_graph=False)

    return torch.compile(model, backend=backend)


def fp64_copy(model: Callable[..., Any]) -> Callable[..., Any]:
    return copy.deepcopy(model).to(torch.float64) if isinstance(model, torch.nn.Module) else model


# ---- batches -------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchFinding:
    index: int
    batch: tuple[Any, ...]
    samples: tuple[int, ...] | None  # failing samples, when the model treats samples independently
    independent: bool
    scanned: int
    nonfinite: bool
    crashed: str = ""  # the compiled copy raised on this batch (the error)
    runs: tuple[int, ...] = ()  # values changed run to run: (compiled runs that diverged, compiled runs)
    side: str = ""  # whose values changed run to run: "compiled", "eager" or "both"

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "samples": list(self.samples) if self.samples is not None else None,
                "independent": self.independent, "batches_scanned": self.scanned, "nonfinite": self.nonfinite,
                "crashed": self.crashed or None, "nondeterministic": list(self.runs) or None,
                "nondeterministic_side": self.side or None}


@dataclass(frozen=True)
class BatchLook:
    """What the batch scan saw on one batch (the last one only: the failing one's samples)."""

    index: int
    batch: tuple[Any, ...]
    eager: list[torch.Tensor]
    fp64: list[torch.Tensor]
    compiled: list[torch.Tensor]
    unit: float | None
    check: Check
    spreads: tuple[float, ...] = ()  # per output, the run-to-run spread it was judged against (() none)
    floors: tuple[float, ...] = ()  # per output, its noise floor (() none measured)


class BatchScan:
    """The batch scan's evaluator: a :class:`ScanCandidate` ``("batch", i)`` in, its verdict out
    (CRASH with the error when the compiled copy raises on it)."""

    def __init__(self, model: Callable[..., Any], batches: Sequence[Any], compiler: Compiler, oracle: Oracle,
                 seed: int) -> None:
        self.model, self.batches, self.oracle, self.seed = model, batches, oracle, seed
        self.allowed: list[float] = []
        self.compiled, self.model64 = compiled_copy(model, compiler, self.allowed), fp64_copy(model)
        self.last: BatchLook | None = None

    def __call__(self, candidate: ScanCandidate) -> SubgraphVerdict:
        """Every run on the batch (eager, compiled: one module; their reruns) starts from the state
        eager's started from, and each model is left as its one run on the batch left it
        (``ModelRuns``): across batches, a BatchNorm's statistics move as eager's alone would."""
        with ModelRuns(self.model) as model_runs, ModelRuns(self.model64) as model_runs64:
            return self._judge(candidate.index, model_runs, model_runs64)

    def _judge(self, index: int, model_runs: ModelRuns, model_runs64: ModelRuns) -> SubgraphVerdict:
        batch = as_batch(self.batches[index])
        with torch.no_grad():
            eager_out = model_runs.run(lambda: _user_run(self.model, batch, self.seed, f"batch {index}"))
            fp64_out = model_runs64.run(lambda: _fp64_run(self.model64, batch, self.seed, eager_out))
        unit = max(self.allowed, default=None)

        def compiled_run() -> Parts:
            with torch.no_grad():
                return {"output": model_runs.run(lambda: _run(self.compiled, batch, self.seed))}

        floors: dict[str, list[float]] = {}
        spread: dict[str, Sequence[float]] = {"output": ()}  # the spreads the batch was last judged against

        def judged(compiled: Parts, spreads: dict[str, Sequence[float]]) -> dict[str, Check]:
            spread.update(spreads)
            return {"output": judge(eager_out, fp64_out, compiled["output"], self.oracle, unit, spreads["output"],
                                    floors.get("output", ()))}

        def eager_run() -> Parts:
            with torch.no_grad():
                return {"output": model_runs.run(lambda: _user_run(self.model, batch, self.seed, f"batch {index}"))}

        def noisy_run() -> Parts:
            with torch.no_grad():
                return {"output": model_runs64.run(lambda: _run(self.model64, to_fp64(tuple(batch)), self.seed))}

        try:
            compiled_out = compiled_run()
            checks = judged(compiled_out, {"output": ()})
            if fp64_out is not eager_out:  # an fp64 model ran: its noise floors where the batch diverged
                floors.update(noise_floors(checks, noisy_run, {"output": fp64_out}, {"output": eager_out}))
                checks = judged(compiled_out, {"output": ()}) if floors else checks
            checks, runs, side = decided(checks, compiled_out, compiled_run, judged, self.seed,
                                         ({"output": eager_out}, eager_run))
        except Exception as error:  # a budget cut is no Exception: it reaches the scan's caller
            stop_if_out_of_memory(error, "judging a batch")
            return SubgraphVerdict(Outcome.CRASH, error=f"{type(error).__name__}: {error}")
        self.last = BatchLook(index, batch, eager_out, fp64_out, compiled_out["output"], unit, checks["output"],
                              tuple(spread["output"]), tuple(floors.get("output", ())))
        return scan_verdict(checks, runs, side)

    def look(self, index: int) -> BatchLook:
        """What batch ``index``, the one judged last, gave (batches are judged in order, each once)."""
        assert self.last is not None and self.last.index == index, f"batch {index} was not the last judged"
        return self.last


def as_batch(batch: Any) -> tuple[Any, ...]:
    return tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)


def scan_batches(search: ScanSearch, scan: BatchScan) -> BatchFinding | None:
    """The first batch on which compiled disagrees with eager or NaN/Inf appears (early exit),
    each batch judged through the run's search."""
    for index in search.progress.items(range(len(scan.batches)), "scanning batches", "batch"):
        verdict = search.judge(ScanCandidate("batch", index))
        if verdict.outcome is Outcome.CRASH:
            return BatchFinding(index, as_batch(scan.batches[index]), None, False, index + 1, False, verdict.error)
        if verdict.outcome is not Outcome.MATCH:
            look = scan.look(index)
            samples, independent = failing_samples(scan.model, look.batch, look.eager, look.fp64, look.compiled,
                                                   scan.oracle, scan.seed, look.unit, look.spreads, look.floors)
            return BatchFinding(index, look.batch, samples, independent, index + 1, look.check.nonfinite,
                                runs=verdict.runs, side=verdict.nondeterministic)
    return None


def _run(function: Callable[..., Any], args: Sequence[Any], seed: int) -> list[torch.Tensor]:
    torch.manual_seed(seed)
    return _tensors(function(*fresh_inputs(tuple(args))))  # each side its own copy of the batch


def _user_run(model: Callable[..., Any], batch: Sequence[Any], seed: int, where: str) -> list[torch.Tensor]:
    """The eager model on a batch: a failure there is the model's (or the data's), exit 2."""
    try:
        return _run(model, batch, seed)
    except Exception as error:
        stop_if_out_of_memory(error, "running the model eagerly")
        raise ModelError(f"the model raised on {where} ({_shapes(batch)}): {type(error).__name__}: {error}") from error


def _fp64_run(model64: Callable[..., Any], batch: Sequence[Any], seed: int, eager: list[torch.Tensor]) -> list[torch.Tensor]:
    """fp64 outputs, or eager's when the model has no fp64 version of an op (eager is then the reference)."""
    try:
        return _run(model64, to_fp64(tuple(batch)), seed)
    except Exception as error:  # noqa: BLE001 - eager stands in; the verdict only loses its fp64 arbiter
        stop_if_out_of_memory(error, "in the model's fp64 run")
        log.debug("fp64 run failed: %s", error)
        return eager


def _shapes(batch: Sequence[Any]) -> str:
    return ", ".join(f"{tuple(v.shape)} {str(v.dtype).replace('torch.', '')}" if isinstance(v, torch.Tensor)
                     else type(v).__name__ for v in batch)


def batch_size(batch: Sequence[Any]) -> int | None:
    sizes = {v.shape[0] for v in batch if isinstance(v, torch.Tensor) and v.dim() > 0}
    return sizes.pop() if len(sizes) == 1 else None


def recompiled_dims(batches: Sequence[Any], index: int) -> list[tuple[int, ...]]:
    """Per input of batch ``index``: the dims whose size changed among batches 0..``index``. Those
    are the dims Dynamo's automatic dynamic shapes makes symbolic when a new size arrives, and the
    symbolic graph then serves every later batch: the code the job ran on batch ``index``."""
    rows = [tuple(b) if isinstance(b, (tuple, list)) else (b,) for b in batches[:index + 1]]
    dims: list[tuple[int, ...]] = []
    for position, value in enumerate(rows[-1]):
        seen = [row[position] for row in rows if position < len(row) and isinstance(row[position], torch.Tensor)]
        if not isinstance(value, torch.Tensor) or any(v.dim() != value.dim() for v in seen):
            dims.append(())
            continue
        dims.append(tuple(d for d in range(value.dim()) if len({v.shape[d] for v in seen}) > 1))
    return dims


def marked_dynamic(inputs: Sequence[Any], dims: Sequence[tuple[int, ...]]) -> tuple[Any, ...]:
    """``inputs`` with ``dims`` marked dynamic (``torch._dynamo.mark_dynamic``, on copies), so our
    capture compiles them symbolically as the job's recompile did. Dims of size 0 or 1 stay static
    (Dynamo specialises them too)."""
    marked = []
    for value, these in zip(inputs, list(dims) + [()] * (len(inputs) - len(dims))):
        keep = [d for d in these if isinstance(value, torch.Tensor) and value.shape[d] >= 2]
        if keep:
            value = value.clone()
            torch._dynamo.mark_dynamic(value, keep)
        marked.append(value)
    return tuple(marked)


def take_samples(batch: Sequence[Any], samples: Sequence[int]) -> tuple[Any, ...]:
    size = batch_size(batch)
    return tuple(v.index_select(0, torch.tensor(list(samples), dtype=torch.long, device=v.device))
                 if isinstance(v, torch.Tensor) and v.dim() > 0 and v.shape[0] == size else v for v in batch)


def failing_samples(model: Callable[..., Any], batch: tuple[Any, ...], eager: list[torch.Tensor],
                    fp64: list[torch.Tensor], compiled: list[torch.Tensor], oracle: Oracle,
                    seed: int, unit: float | None = None, spreads: Sequence[float] = (),
                    floors: Sequence[float] = ()) -> tuple[tuple[int, ...] | None, bool]:
    """Rows whose outputs fail, and whether the model treats samples independently.

    Each row is judged as the batch was (:func:`judge`): at the scale floor its output was judged
    at, its noise floor raised to its run-to-run spread (``floors``, ``spreads``: per output, ()
    none; :func:`~bisect_engine.verdict.judgement.with_run_floors` over the whole output), so a
    row that differs only by a nondeterministic batch's run-to-run noise or its rounding is no
    failing sample.

    Independence is checked eagerly: the failing rows run on their own must give the rows they
    gave inside the batch. When they do not (batch norm in training, attention across the batch),
    no sample subset is claimed. Rows alone may take another kernel than the batch: where the
    user allowed TF32 (``unit``), they agree to that precision, not to float32's.
    """
    size = batch_size(batch)
    floors = list(floors) if len(floors) == len(eager) else [0.0] * len(eager)
    floors = [f.scale_floor for f in with_run_floors([OutputFacts(scale_floor=f) for f in floors], spreads, eager)]
    rows = [i for i in range(size or 0)
            if _row_fails(i, size, eager, fp64, compiled, oracle, unit, floors)]
    if not rows or size is None:
        return None, False
    with torch.no_grad(), ModelRuns(model, leave="as_found") as model_runs:  # a look the program never makes
        alone = model_runs.run(lambda: _run(model, take_samples(batch, rows), seed))
    inside = [t.index_select(0, torch.tensor(rows, device=t.device)) if t.dim() > 0 and t.shape[0] == size else t
              for t in eager]
    independent = len(alone) == len(inside) and all(
        a.shape == b.shape and _agree(a, b, unit) for a, b in zip(alone, inside))
    return (tuple(rows), True) if independent else (None, False)


def _row_fails(row: int, size: int | None, eager: list[torch.Tensor], fp64: list[torch.Tensor],
               compiled: list[torch.Tensor], oracle: Oracle, unit: float | None = None,
               floors: Sequence[float] = ()) -> bool:
    """Whether ``row`` fails, judged as its batch was: ``floors``, per output, the scale floor the
    whole output was judged at (its noise floor, raised to its run-to-run spread)."""
    def pick(values: Sequence[Any]) -> list[Any]:
        return [t[row] for t in values if t.dim() > 0 and t.shape[0] == size]

    row_floors = [f for t, f in zip(eager, floors) if t.dim() > 0 and t.shape[0] == size]
    return judge(pick(eager), pick(fp64), pick(compiled), oracle, unit, floors=row_floors).failed


def _agree(alone: torch.Tensor, inside: torch.Tensor, unit: float | None) -> bool:
    """The same rows computed alone and inside the batch, eagerly: equal to float32's rounding, or
    to 16 units of the precision the user allowed, at the tensor's scale."""
    if not unit or not alone.is_floating_point():
        return torch.allclose(alone, inside, rtol=1e-5, atol=1e-6, equal_nan=True)
    scale = float(inside.detach().double().abs().max()) if inside.numel() else 0.0
    return torch.allclose(alone, inside, rtol=16 * unit, atol=16 * unit * scale, equal_nan=True)


# ---- training steps -------------------------------------------------------------------------


@dataclass(frozen=True)
class StepFinding:
    step: int
    batch: tuple[Any, ...]
    state: dict[str, Any]  # eager model's state_dict just before the step
    diverged_in: tuple[str, ...]  # "loss", "gradients", "parameters"
    nonfinite: bool
    scanned: int
    runs: tuple[int, ...] = ()  # values changed run to run: (compiled runs that diverged, compiled runs)
    side: str = ""  # whose values changed run to run: "compiled", "eager" or "both"

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "diverged_in": list(self.diverged_in), "nonfinite": self.nonfinite,
                "steps_scanned": self.scanned, "nondeterministic": list(self.runs) or None,
                "nondeterministic_side": self.side or None}


def default_optimizer(parameters: Iterable[torch.nn.Parameter]) -> torch.optim.Optimizer:
    return torch.optim.SGD(parameters, lr=0.01)


class _Trainer:
    """One copy of the model with its optimizer; ``step`` returns loss, gradients, parameters."""

    def __init__(self, model: torch.nn.Module, make_optimizer: Callable[..., Any], loss_fn: Callable[[Any], Any],
                 forward: Callable[..., Any] | None = None, upcast: bool = False):
        self.model, self.loss_fn, self.upcast = model, loss_fn, upcast
        self.forward = model if forward is None else forward
        try:
            self.optimizer = make_optimizer(model.parameters())
        except Exception as error:
            raise ModelError(f"get_optimizer(parameters) raised {type(error).__name__}: {error}") from error
        if not isinstance(self.optimizer, torch.optim.Optimizer):
            raise UsageError(f"get_optimizer(parameters) must return a torch.optim.Optimizer; it returned "
                             f"{type(self.optimizer).__name__}")

    def step(self, batch: tuple[Any, ...], seed: int) -> dict[str, list[torch.Tensor]]:
        torch.manual_seed(seed)
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.forward(*(to_fp64(batch) if self.upcast else batch)))
        loss.backward()
        grads = [p.grad.detach().clone() for p in self.model.parameters() if p.grad is not None]
        self.optimizer.step()
        return {"loss": [loss.detach().clone()], "gradients": grads,
                "parameters": [p.detach().clone() for p in self.model.parameters()]}

    def state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The model's and the optimizer's state, copied (what :meth:`restore` puts back)."""
        return copy.deepcopy(self.model.state_dict()), copy.deepcopy(self.optimizer.state_dict())

    def restore(self, state: tuple[dict[str, Any], dict[str, Any]]) -> None:
        self.model.load_state_dict(state[0])
        self.optimizer.load_state_dict(copy.deepcopy(state[1]))


@dataclass(frozen=True)
class StepLook:
    """What the step scan saw on one step (the last one only): the eager state before it, and each
    part's check."""

    index: int
    batch: tuple[Any, ...]
    state: dict[str, Any]
    checks: dict[str, Check]


class StepScan:
    """The training-step scan's evaluator: eager, fp64 and compiled copies trained from one initial
    state, a :class:`ScanCandidate` ``("step", i)`` in (steps judged in order, each once), its
    verdict out. The eager state before each step is kept (one snapshot, replaced every step), so
    localising the op inside the failing step never replays training from step 0."""

    def __init__(self, model: torch.nn.Module, batches: Sequence[Any], loss_fn: Callable[[Any], Any],
                 make_optimizer: Callable[..., Any] | None, compiler: Compiler, oracle: Oracle, seed: int) -> None:
        make_optimizer = make_optimizer or default_optimizer
        self.batches, self.oracle, self.seed = batches, oracle, seed
        self.eager = _Trainer(copy.deepcopy(model), make_optimizer, loss_fn)
        self.reference = _Trainer(copy.deepcopy(model).to(torch.float64), make_optimizer, loss_fn, upcast=True)
        compiled_model = copy.deepcopy(model)
        self.allowed: list[float] = []
        self.compiled = _Trainer(compiled_model, make_optimizer, loss_fn,
                                 forward=compiled_copy(compiled_model, compiler, self.allowed))
        self.last: StepLook | None = None

    def __call__(self, candidate: ScanCandidate) -> SubgraphVerdict:
        step = candidate.index
        batch = as_batch(self.batches[step])
        snapshot = copy.deepcopy(self.eager.model.state_dict())
        try:
            first = self.eager.step(batch, self.seed + step)
        except Exception as error:
            stop_if_out_of_memory(error, "in the eager training step")
            raise ModelError(f"the training step raised on batch {step} ({_shapes(batch)}): "
                             f"{type(error).__name__}: {error}") from error
        reference = self.reference.step(batch, self.seed + step)
        before = self.compiled.state()  # a step judged again starts where this one did

        def compiled_run() -> Parts:
            self.compiled.restore(before)
            return self.compiled.step(batch, self.seed + step)

        floors: dict[str, list[float]] = {}

        def judged(compiled: Parts, spreads: dict[str, Sequence[float]]) -> dict[str, Check]:
            return {part: judge(first[part], reference[part], compiled[part], self.oracle,
                                max(self.allowed, default=None), spreads.get(part, ()), floors.get(part, ()))
                    for part in ("loss", "gradients", "parameters")}

        compiled = self.compiled.step(batch, self.seed + step)
        checks = judged(compiled, {})
        floors.update(noise_floors(checks, lambda: self._gradients64(snapshot, batch, step),
                                   lambda: self._gradients64(snapshot, batch, step), first))
        checks = judged(compiled, {}) if floors else checks
        checks, runs, side = decided(checks, compiled, compiled_run, judged, self.seed + step,
                                     (first, lambda: self._eager_again(snapshot, batch, step, first)))
        del before
        self.last = StepLook(step, batch, snapshot, checks)
        return scan_verdict(checks, runs, side)

    def _eager_again(self, state: dict[str, Any], batch: tuple[Any, ...], step: int, first: Parts) -> Parts:
        """Eager's loss and gradients once more from ``state`` (eager's before the step) on
        ``batch`` (a copy of the model, no optimizer step): what says whether eager's own values
        change run to run; its parameters are ``first``'s (an update of gradients already rerun)."""
        return {**self._loss_and_gradients(self.eager, state, batch, step), "parameters": first["parameters"]}

    def _gradients64(self, state: dict[str, Any], batch: tuple[Any, ...], step: int) -> Parts:
        """Loss and gradients of the fp64 model from ``state`` (eager's before the step) on
        ``batch``, no optimizer step: what the noise floors of a step's loss and gradients are
        measured on (its parameters, an update added to values that do not cancel, get none)."""
        return self._loss_and_gradients(self.reference, state, to_fp64(batch), step)

    def _loss_and_gradients(self, trainer: _Trainer, state: dict[str, Any], batch: tuple[Any, ...], step: int) -> Parts:
        """``trainer``'s loss and gradients on a copy of its model loaded with ``state``, no
        optimizer step (the trainer's own model and gradients untouched)."""
        model = copy.deepcopy(trainer.model)
        model.load_state_dict(state)
        for parameter in model.parameters():
            parameter.grad = None
        torch.manual_seed(self.seed + step)
        loss = trainer.loss_fn(model(*batch))
        loss.backward()
        return {"loss": [loss.detach().clone()],
                "gradients": [p.grad.detach().clone() for p in model.parameters() if p.grad is not None]}

    def look(self, step: int) -> StepLook:
        """What step ``step``, the one judged last, gave (steps are judged in order, each once)."""
        assert self.last is not None and self.last.index == step, f"step {step} was not the last judged"
        return self.last


def scan_steps(search: ScanSearch, scan: StepScan) -> StepFinding | None:
    """The first training step where the copies part, each step judged through the run's search."""
    for step in search.progress.items(range(len(scan.batches)), "scanning training steps", "step"):
        verdict = search.judge(ScanCandidate("step", step))
        if verdict.outcome is not Outcome.MATCH:
            look = scan.look(step)
            failed = tuple(part for part, check in look.checks.items() if check.failed)
            return StepFinding(step, look.batch, look.state, failed,
                               any(c.nonfinite for c in look.checks.values()), step + 1, verdict.runs,
                               verdict.nondeterministic)
    return None
