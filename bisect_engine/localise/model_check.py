"""The model-level check: the user's model through a real ``torch.compile`` against eager and fp64
(an ``ExportedProgram`` from ``get_model()``: the AOTInductor package the user ships, compiled with
``aoti_compile_and_package`` and loaded).

Run only when every captured graph matched, to tell ``clean`` from ``not_reproducible`` (the model
diverges, but not in any graph we captured), and, under a switch, to attribute such a divergence to
a torch-level pass. The compile goes through Inductor's own entry point with the shared
:class:`~bisect_engine.verdict.compiler.Compiler` (counted, within the budget).
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import logging
import tempfile
from typing import Any, Callable, Iterator, Sequence

import torch
import torch._functorch.config as functorch_config
import torch.utils._pytree as pytree

from ..search import stop_if_out_of_memory
from ..errors import ModelError
from ..load.memory import tensor_bytes
from ..load.model_file import ModelSpec
from ..verdict.candidate import Switch, compile_arguments
from ..verdict.compare import Outcome, clearly_above_eager, worst
from ..verdict.judgement import MODEL, Oracle, OutputFacts, judge_outputs, with_run_floors
from ..verdict.compiler import Compiler, cause_of, split_patches
from ..verdict.fx_eval import HOST, fresh_inputs, off_host, on_host, to_fp64
from ..verdict.model_state import ModelRuns
from ..verdict.noise import model_floors
from ..verdict.oracle import SubgraphVerdict, over_runs
from ..verdict.precision import allowed_units
from ..verdict.offload import MIN_BYTES, current, page_out, tensors_in
from ..verdict.upcast import OnHost, Upcast

log = logging.getLogger(__name__)
# An fp64 run of the model (the reference; the noise model's, the same again) adds about this many
# times the model's fp32 parameters and inputs: the fp64 model (twice the bytes), its fp64 gradients
# (twice again) and the backward's transients (a 2-layer GPT-2's measured 7.4x: a tied embedding's
# two vocabulary-sized gradients and their sum).
NOISE_COPIES = 8


@dataclasses.dataclass(frozen=True)
class Fp64Place:
    """Where the model-level check's fp64 model and its run go (:func:`_results_wait`): ``on_disk``,
    its large parameters in memory-mapped files; ``host``, on the host for a model on a device
    that cannot take them (CUDA)."""

    on_disk: bool = False
    host: bool = False


def _forward_and_grads(model: Callable[..., Any], inputs: tuple[Any, ...], loss_fn: Any, seed: int,
                       upcast: bool = False, on_disk: bool = False, host: bool = False) -> list[Any]:
    """The model's outputs and (with ``loss_fn``) its loss and gradients, from a fresh copy of the
    inputs. ``on_disk`` (an fp64 model on disk, :func:`_fp64_copy`): each gradient goes to disk as
    soon as it is accumulated, and a module's parameters leave memory once it has run (and once
    their gradients are taken): the run holds its activations, not the model. ``host`` (an fp64
    model on the host, its device too small): every op on the host (``OnHost``)."""
    if host:
        with OnHost():
            return _forward_and_grads(model, on_host(inputs), loss_fn, seed, upcast, on_disk)
    if on_disk and isinstance(model, torch.nn.Module):
        with _paged_out_as_used(model):
            return _forward_and_grads(model, inputs, loss_fn, seed, upcast)
    if upcast:  # tensors the model makes in its own dtype (constants, casts) computed in fp64 too
        try:
            with Upcast():
                return _forward_and_grads(model, inputs, loss_fn, seed)
        except Exception as error:  # noqa: BLE001 - some op refuses fp64 under the mode: parameters-only fp64
            stop_if_out_of_memory(error, "in the model's fp64 run")
            # An eager torch.cond / flex attention compiles its body with Dynamo; an attempt under the
            # mode leaves a cache entry that then fails the plain run (the caller resets anyway).
            torch._dynamo.reset()
    torch.manual_seed(seed)
    parameters = list(model.parameters()) if isinstance(model, torch.nn.Module) else []
    for parameter in parameters:
        parameter.grad = None
    arguments = fresh_inputs(tuple(inputs))  # each side its own copy: the model may write to its inputs
    # Without a loss the model runs as the capture ran it, under no_grad (an inference graph; flex
    # attention on CPU refuses inputs that require grad).
    with torch.set_grad_enabled(loss_fn is not None and torch.is_grad_enabled()):
        output = model(*arguments)
    values = [v for v in pytree.tree_leaves(output) if isinstance(v, torch.Tensor)]
    if loss_fn is not None:
        loss = loss_fn(output)
        loss.backward()
        values += [loss] + [p.grad for p in parameters if p.grad is not None]
        # the gradients of inputs that require grad are the model's results too (a loss of inputs only)
        values += [a.grad for a in pytree.tree_leaves(arguments) if isinstance(a, torch.Tensor) and a.grad is not None]
    # Fresh results (gradients, a loss, computed outputs) are held as they are; a view or a
    # parameter returned as an output is copied, since a later step may change what it shows.
    return [v.detach().clone() if v._is_view() or isinstance(v, torch.nn.Parameter) else v.detach() for v in values]


def _fp64_inputs(inputs: tuple[Any, ...], host: bool = False) -> Any:
    """The inputs in fp64 (``host``: on the host), each still requiring grad where the user's did
    (its gradient is compared)."""
    def upcast(tensor: torch.Tensor) -> torch.Tensor:
        wide = to_fp64(on_host(tensor.detach()) if host else tensor)
        return wide.requires_grad_() if tensor.requires_grad and wide.is_floating_point() else wide

    return pytree.tree_map_only(torch.Tensor, upcast, inputs)


def _fp64_copy(model: torch.nn.Module, on_disk: bool = False, host: bool = False) -> torch.nn.Module:
    """``copy.deepcopy(model).to(torch.float64)`` without the fp32 copy in between, nor a copy of
    the gradients (the fp64 run resets them): each floating parameter and buffer copied straight to
    fp64 (tied parameters stay tied: one copy each). ``on_disk``: each into a memory-mapped file of
    its own (``Offload.disk_copy``, the output folder's scratch), never whole in memory: a model
    whose fp64 copy and run would not fit (w8192's 8.6 GB of fp64 parameters). ``host``: on the host
    (a model on a device too small for its fp64 copy and run), each copied there straight to fp64."""
    policy = current()

    def wide(tensor: torch.Tensor) -> torch.Tensor:  # a small one stays in memory (a mapping each costs more)
        tensor = tensor.detach()
        mapped = policy.disk_copy(on_host(tensor), torch.float64) \
            if on_disk and tensor.numel() * 8 >= MIN_BYTES and (host or tensor.device.type == "cpu") else None
        return mapped if mapped is not None else tensor.to(HOST if host else tensor.device, torch.float64)

    memo: dict[int, Any] = {}
    for parameter in model.parameters():
        if type(parameter) is torch.nn.Parameter and parameter.is_floating_point():
            memo[id(parameter)] = torch.nn.Parameter(wide(parameter), requires_grad=parameter.requires_grad)
    for buffer in model.buffers():
        if type(buffer) is torch.Tensor and buffer.is_floating_point():
            memo[id(buffer)] = wide(buffer)
    copied = copy.deepcopy(model, memo)
    return copied.to(HOST, torch.float64) if host else copied.to(torch.float64)


@contextlib.contextmanager
def _paged_out_as_used(model: torch.nn.Module) -> Iterator[None]:
    """While an fp64 model on disk runs: a module's own parameters leave memory once its forward
    has run, and each parameter's gradient goes to disk once accumulated (the parameter leaving
    memory again with it: the backward read it)."""
    policy = current()

    def after_forward(module: torch.nn.Module, *_: Any) -> None:
        page_out(*module.parameters(recurse=False))

    def after_accumulated(parameter: torch.Tensor) -> None:
        if parameter.grad is not None:
            policy.move([parameter.grad])
        page_out(parameter)

    handles = [module.register_forward_hook(after_forward) for module in model.modules()
               if next(module.parameters(recurse=False), None) is not None]
    handles += [parameter.register_post_accumulate_grad_hook(after_accumulated)
                for parameter in model.parameters() if parameter.requires_grad]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _noise_floors(spec: ModelSpec, seed: int, fp64: list[Any], eager: list[Any], model_runs: ModelRuns,
                  beside: Sequence[Any] = ()) -> list[float]:
    """The noise model's floor of each model output (``verdict/noise.py``): the fp64 model (copied
    from the state the check's runs start from, ``model_runs``) run once more with every op's result
    rounded at random; none where there is no fp64 model. The fp64 results and those ``beside``
    them (the compiled run's) and eager's wait on disk meanwhile where memory asks (``offload.offload``,
    read back as judged): the second fp64 model and its run are the check's peak. The fp64 model is
    dropped once its run returns, and each noisy result once its floor is taken
    (``noise.model_floors``): the floors are taken with the fp64 results read back."""
    if fp64 is eager or not isinstance(spec.model, torch.nn.Module):
        return [0.0] * len(eager)
    place = _results_wait(spec, model_runs, eager, fp64, beside,  # the noisy run reads none of them
                          what="the model-level check's noise model (a second fp64 run)")
    held = [model_runs.run(lambda: _fp64_copy(spec.model, place.on_disk, place.host))]

    def noisy_run() -> list[Any]:
        # the fp64 model lives as long as its run: its parameters go before the floors are taken
        return _forward_and_grads(held.pop(), _fp64_inputs(spec.inputs, place.host), spec.loss_fn, seed,
                                  upcast=spec.loss_fn is None, on_disk=place.on_disk, host=place.host)

    return model_floors(noisy_run, fp64, eager)


def _results_wait(spec: ModelSpec, model_runs: ModelRuns, *results: Any, what: str | None = None) -> Fp64Place:
    """Before an fp64 run of an fp64 copy of ``spec.model`` (the reference, the noise model's):
    the runs' ``results``, which it does not read, wait on disk where memory asks
    (``offload.offload``). Eager's gradients are held twice, as results and by ``model_runs`` (the
    objects it leaves in the model): both move, one storage each (GPT-2 small's: 497 MB). The
    parameters, buffers and inputs stay: the copy and the run read them.

    Where ``what`` names an fp64 run whose copy and run (:data:`NOISE_COPIES` times the parameters
    and inputs) would not fit in memory even so, the fp64 model goes to disk instead (the answer,
    True: :func:`_fp64_copy` and :func:`_forward_and_grads` with ``on_disk``), and the run needs
    only its largest parameter's share in memory at once. Where even that would not fit, or no disk
    can take it, the run stops before it (``Offload.require``: a memory cut, exit 4, what was learned
    reported), never in it by the OOM killer. A model on a device (CUDA) is weighed against that
    device's room first (``Offload.weigh_on``): where its fp64 copy and run do not fit there, they
    go to the host (in memory or on disk, weighed as above; ``stats.offload.fp64_on_host``)."""
    model = spec.model
    if not isinstance(model, torch.nn.Module):  # a plain function: no fp64 copy is made of it
        return Fp64Place()
    parameters = [*model.parameters(), *model.buffers()]
    need = NOISE_COPIES * tensor_bytes([*parameters, *spec.inputs]) + fp64_activation_bytes(spec)
    policy = current()
    policy.spill(tensors_in(results) + model_runs.results_held(),
                 [*parameters, *tensors_in([spec.inputs])], need=need)
    if what is None:
        return Fp64Place()
    host, on_disk = policy.weigh_on(model_device(model), need, what, fp64_run_on_disk_need(spec),
                                    f"{what}, its fp64 model on disk")
    policy.to_host += host
    return Fp64Place(on_disk, host)


def model_device(model: torch.nn.Module) -> torch.device | None:
    """The device other than the host that ``model``'s parameters or buffers lie on (CUDA), else None."""
    for tensor in (*model.parameters(), *model.buffers()):
        if off_host(tensor.device):
            return tensor.device
    return None


def fp64_run_on_disk_need(spec: ModelSpec) -> int:
    """What an fp64 run of the model with its fp64 model on disk holds in memory at once, about:
    :data:`NOISE_COPIES` times its largest parameter or buffer and its inputs (``_fp64_copy(on_disk=True)``),
    and its activations in fp64 (:func:`fp64_activation_bytes`)."""
    model = spec.model
    largest = max((tensor_bytes([p]) for p in [*model.parameters(), *model.buffers()]), default=0) \
        if isinstance(model, torch.nn.Module) else 0
    return NOISE_COPIES * (largest + tensor_bytes([*spec.inputs])) + fp64_activation_bytes(spec)


def fp64_activation_bytes(spec: ModelSpec) -> int:
    """The activations an fp64 run of the model holds at its peak, about: twice eager's, which are
    what its step adds (``ModelSpec.step_bytes``, measured on fake tensors at admission) less its
    gradients; 0 where that is not known (the parameters' multiples alone, as before)."""
    model = spec.model
    if spec.step_bytes is None or not isinstance(model, torch.nn.Module):
        return 0
    gradients = tensor_bytes([p for p in model.parameters() if p.requires_grad]) if spec.loss_fn is not None else 0
    return 2 * max(spec.step_bytes - gradients, 0)


def _user_side(error: BaseException) -> bool:
    """Dynamo's errors about the user's program (``torch._dynamo.exc.UserError``, a dynamic-shape
    constraint violated), which no compiler setting changes."""
    from torch._dynamo.exc import UserError
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

    return cause_of(error, (UserError, ConstraintViolationError)) is not None


def _packaged(spec: ModelSpec, compiler: Compiler, patches: Any, switch: Switch, seed: int,
              stack: contextlib.ExitStack) -> Callable[[], list[Any]]:
    """The exported program as the user ships it: an AOTInductor package (under a config switch,
    compiled with that config), a run of it on the model's inputs each call (the package's folder
    lives as long as ``stack``)."""
    folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="bisect-aoti-"))
    package = compiler.package(spec.exported_program, folder, label=f"model:{switch.name or 'as is'}",
                               config_patches=patches)
    return lambda: _forward_and_grads(package, spec.inputs, None, seed)


def _under_config(patches: Any, compiled: Any, spec: ModelSpec, seed: int) -> list[Any]:
    """A run of the user's own compiled model (their backend) under the switch's config patches."""
    import torch._inductor.config  # here: a run that compiles nothing never loads Inductor

    inductor_patches, functorch_patches = split_patches(patches)
    with torch._inductor.config.patch(inductor_patches), functorch_config.patch(functorch_patches):
        return _forward_and_grads(compiled, spec.inputs, spec.loss_fn, seed)


def check_model_level(spec: ModelSpec, compiler: Compiler, oracle: Oracle, seed: int,
                      switch: Switch = Switch()) -> SubgraphVerdict:
    """The whole model, outputs and (with loss_fn) gradients, compiled under ``switch``. Every run
    of the user's model (eager, compiled, the reruns of a failing check) starts from the state the
    eager run started from, and the model is left as that one run left it (``ModelRuns``: a
    BatchNorm's running statistics move by one step, not one per run)."""
    with ModelRuns(spec.model) as model_runs:
        return _check(spec, compiler, oracle, seed, switch, model_runs)


def _check(spec: ModelSpec, compiler: Compiler, oracle: Oracle, seed: int, switch: Switch,
           model_runs: ModelRuns) -> SubgraphVerdict:
    eager = model_runs.run(lambda: _forward_and_grads(spec.model, spec.inputs, spec.loss_fn, seed))
    fp64 = eager
    if isinstance(spec.model, torch.nn.Module):
        place = _results_wait(spec, model_runs, eager,  # the fp64 run, the check's peak, reads none of them
                              what="the model-level check's fp64 reference (an fp64 copy of the model, its run)")
        model64 = model_runs.run(lambda: _fp64_copy(spec.model, place.on_disk, place.host))
        fp64 = _forward_and_grads(model64, _fp64_inputs(spec.inputs, place.host), spec.loss_fn, seed,
                                  upcast=spec.loss_fn is None,
                                  on_disk=place.on_disk, host=place.host)
        del model64  # its parameters go; the gradients judged stay
    elif spec.loss_fn is None:  # a plain function: every floating op in fp64, its constants included
        fp64 = model_runs.run(lambda: _forward_and_grads(spec.model, to_fp64(spec.inputs), None, seed, upcast=True))
    patches, decompositions, fallbacks = compile_arguments(switch)

    allowed: list[float] = []  # the reduced precisions the user allowed to ops of the compiled graphs

    def backend(graph_module: torch.fx.GraphModule, example: list[Any]) -> Any:
        allowed.extend(allowed_units(graph_module))
        return compiler.compile(graph_module, example, label=f"model:{switch.name or 'as is'}", aten_graph=False,
                                config_patches=patches, decompositions=decompositions, fallbacks=fallbacks)

    # The user's own backend (one that calls Inductor inside, say) is the job as it runs: under a
    # config switch it runs again with that config; eager stays the model it wraps.
    users = spec.custom_backend and not (decompositions or fallbacks)
    torch._dynamo.reset()
    with contextlib.ExitStack() as stack:
        stack.callback(torch._dynamo.reset)
        try:
            run: Callable[[], list[Any]]
            if users:
                compiler.check_budget()
                run = functools.partial(_under_config, patches, spec.compiled, spec, seed)
            elif spec.exported_program is not None and spec.loss_fn is None and not (decompositions or fallbacks):
                run = _packaged(spec, compiler, patches, switch, seed, stack)
            else:
                model = torch.compile(spec.model, backend=backend, dynamic=spec.dynamic)
                run = functools.partial(_forward_and_grads, model, spec.inputs, spec.loss_fn, seed)
            compiled = model_runs.run(run)
        except Exception as error:  # a budget cut (no Exception) goes on to the run's search
            stop_if_out_of_memory(error, "in the model-level check's compiled run")
            if _user_side(error):  # plain torch.compile raises it too: the model's, not the compiler's
                raise ModelError(f"torch.compile of the model raised {type(error).__name__}: {(str(error).strip().splitlines() or [''])[0][:300]}") from error
            return SubgraphVerdict(Outcome.CRASH, error=f"{type(error).__name__}: {error}")
        # The compiled model is kept until judged: a failing check runs it again (no compile).
        return _judged(spec, oracle, seed, eager, fp64, compiled, model_runs, run, max(allowed) if allowed else None)


def _judged(spec: ModelSpec, oracle: Oracle, seed: int, eager: list[Any], fp64: list[Any], compiled: list[Any],
            model_runs: ModelRuns, run: Callable[[], list[Any]], unit: float | None) -> SubgraphVerdict:
    """The model's outputs judged at scope ``model`` (``unit``: the coarsest reduced precision the
    user allowed an op of the compiled graphs); a failing check decided over runs where either side
    changes run to run on the same inputs (``oracle.over_runs``: ``run`` the compiled model again,
    eager's model again, each from the state the first runs started from, ``model_runs``; judged against
    their spread, then by most runs)."""
    # An output downstream of a TF32 convolution or matmul carries its roundings (see
    # judgement.upstream_units): every output is measured in the coarsest precision allowed.
    # Judged first without the noise model (as graphs are, ``GraphContext._verdict``): its floors
    # only loosen the rule, so a plain match not clearly above eager stands, and the noise run (a
    # second fp64 model, many times an fp64 run's cost) is made only where it can change the verdict.
    facts = [OutputFacts(unit=unit)] * len(eager)
    verdicts = judge_outputs(oracle, MODEL, eager, fp64, compiled, facts)
    if worst(verdicts).outcome is not Outcome.MATCH or any(clearly_above_eager(v) for v in verdicts):
        floors = _noise_floors(spec, seed, fp64, eager, model_runs, compiled)  # outputs that cancel: judged where their rounding lives
        facts = [OutputFacts(unit=unit, scale_floor=f) for f in floors]
        verdicts = judge_outputs(oracle, MODEL, eager, fp64, compiled, facts)

    def verdict_of(values: list[Any], spreads: Sequence[float] = ()) -> SubgraphVerdict:
        judged = verdicts if values is compiled and not spreads else \
            judge_outputs(oracle, MODEL, eager, fp64, values, with_run_floors(facts, spreads, eager))
        return SubgraphVerdict(worst(judged).outcome if judged else Outcome.MATCH,
                               {f"model output {i}": v for i, v in enumerate(judged)})

    verdict = verdict_of(compiled)
    if verdict.outcome is Outcome.MATCH:
        return verdict
    def again(one_run: Callable[[], list[Any]]) -> list[Any]:
        _results_wait(spec, model_runs, eager, fp64, compiled)  # read back when judged: on disk again meanwhile
        return model_runs.run(one_run)

    try:
        decided = over_runs(verdict, compiled, lambda: again(run), verdict_of,
                            lambda v: v.outcome is not Outcome.MATCH, seed,
                            eager=(eager, lambda: again(lambda: _forward_and_grads(spec.model, spec.inputs,
                                                                                   spec.loss_fn, seed))))
    except Exception as error:  # noqa: BLE001 - a rerun that raises (a budget cut is no Exception): one run's verdict stands
        stop_if_out_of_memory(error, "rerunning the model-level check")
        log.debug("model-level check: a rerun raised; the first run's verdict stands", exc_info=True)
        return verdict
    if decided is None:  # each side gave the same bits again: one run's verdict stands
        return verdict
    chosen, runs, side = decided
    log.info("model-level check: %s values change run to run; %d of %d compiled runs mismatch", side, *runs)
    return dataclasses.replace(chosen, runs=runs, nondeterministic=side)
