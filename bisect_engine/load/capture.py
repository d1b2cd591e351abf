"""Capture: a custom ``torch.compile`` backend that records the aten graphs a run produces.

Every Dynamo graph (graph breaks give several, kept in call order) is traced by AOT Autograd with
*no* decomposition table, so the recorded graph is the one before Inductor's decompositions: a
wrong decomposition then shows up as a divergence instead of being baked into the reference. The
forward graph, and the backward graph when the model is trained through ``loss_fn``, are recorded
with the real values they were called with, and the Dynamo compile id they belong to (the key of
torch's structured trace, under which our findings are written for tlparse). The backend runs the
graphs eagerly, so the capture run *is* the eager run.

A model the user compiles with a backend of their own (one that splits the graph and hands the
pieces to ``compile_fx`` or ``standalone_compile``, as vLLM-style backends do) is captured through
that backend (:func:`capture_through_backend`): the graphs it hands Inductor are recorded in
place of Inductor's compiles, with the real values they are called with, so the search judges
exactly what reaches Inductor, the user's backend kept around it.
"""
from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Sequence

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from ..errors import ModelError
from ..search import stop_if_out_of_memory
from ..verdict.frozen import freezing_on
from ..verdict.fx_eval import fresh_inputs, mutates
from ..verdict.graphs import CapturedGraph
from ..verdict.shapes import ShapeMismatch, fake_inputs, shape_signature
from ..verdict.inductor_adapter import graphs_reaching_inductor

log = logging.getLogger(__name__)


LATER_CALLS = 3  # later calls of one graph kept (their parameters are not copied)
LATER_CALL_BYTES = 256 << 20


def _bytes(values: Sequence[Any]) -> int:
    return sum(v.numel() * v.element_size() for v in values
               if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter))


def _detached(values: Sequence[Any]) -> list[Any]:
    return [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in values]


def _storage_key(tensor: torch.Tensor) -> int:
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # no storage (a fake, functional or nested tensor)
        return -1


def _torch_level_inputs(values: Sequence[Any]) -> list[Any]:
    """A Dynamo graph's inputs as kept for replaying pre-grad passes: parameters by reference (as
    later calls keep them), everything else copied."""
    return [v if isinstance(v, torch.nn.Parameter) else _detached([v])[0] for v in values]


@dataclass
class CaptureBackend:
    """The ``torch.compile`` backend: records graphs, then runs them eagerly."""

    graphs: list[CapturedGraph] = field(default_factory=list)
    dynamo_graphs: list[fx.GraphModule] = field(default_factory=list)
    dynamo_inputs: list[list[Any]] = field(default_factory=list)  # each Dynamo graph's real inputs
    compile_id: str | None = None  # for graphs met outside Dynamo: the compile they came from
    # Inputs AOT Autograd traces with instead of the real ones (symbolic fake inputs, for a Dynamo
    # graph with symbolic sizes met outside Dynamo); the real ones are still the recorded values.
    trace_inputs: list[Any] | None = None
    # Graphs handed over by a user's backend: their example inputs may not be their values (a
    # piece of a split graph), so the torch-level inputs kept are those of the first call.
    inputs_of_first_call: bool = False
    # Graphs Inductor's own compile hands ``compile_fx_inner``: each recorded input laid out as the
    # compile was told (its example input's strides: a weight the compiled forward saves
    # channels-last, pytorch#185509), not as the eager re-run made it.
    compiled_layouts: bool = False
    # The parameters the graphs recorded so far hold by reference, by storage: a backward graph's
    # saved input that is a view of one (a Linear's transposed weight) is held by reference too.
    parameter_storages: dict[int, torch.Tensor] = field(default_factory=dict, repr=False)

    def __call__(self, graph_module: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        compiled = self._traced(graph_module, example_inputs)
        if not self.inputs_of_first_call:
            return compiled
        index = len(self.dynamo_graphs) - 1
        called: list[Any] = []

        def first_call_kept(*args: Any) -> Any:
            if not called:
                called.append(True)
                self.dynamo_inputs[index] = _torch_level_inputs(args)
            return compiled(*args)

        return first_call_kept

    def aten_graph(self, graph_module: fx.GraphModule, example_inputs: list[Any], is_backward: bool = False) -> Callable[..., Any]:
        """An aten graph handed straight to ``compile_fx_inner`` (the user's own AOT Autograd):
        recorded as it is, no torch-level graph behind it."""
        index = len(self.dynamo_graphs)
        self.dynamo_graphs.append(None)  # type: ignore[arg-type]
        self.dynamo_inputs.append([])
        kind: Literal["forward", "backward"] = "backward" if is_backward else "forward"
        return self._recorder(kind, index, self.compile_id or current_compile_id())(graph_module, example_inputs)

    def _traced(self, graph_module: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        # The torch-level graph's inputs, for replaying pre-grad passes; parameters are kept by
        # reference (as later calls keep them), not copied a second time beside the aten inputs.
        self.dynamo_inputs.append(_torch_level_inputs(example_inputs))
        index = len(self.dynamo_graphs)
        self.dynamo_graphs.append(graph_module)
        # Dynamo calls its backend inside the frame's compile; the backward graph is compiled later
        # (at the first backward) but belongs to the same Dynamo compile.
        compile_id = self.compile_id or current_compile_id()
        lifted = _lifted_parameters(graph_module)
        # Imported at the first capture (AOT Autograd loads Dynamo and Inductor: ~3 CPU-seconds that a
        # run which compiles nothing, or only writes a report, never needs).
        from torch._functorch.aot_autograd import aot_module_simplified
        from torch._functorch.partitioners import default_partition

        return aot_module_simplified(
            graph_module,
            self.trace_inputs if self.trace_inputs is not None else example_inputs,
            fw_compiler=self._recorder("forward", index, compile_id, lifted),
            bw_compiler=self._recorder("backward", index, compile_id),
            decompositions={},
            partition_fn=default_partition,
        )

    def _recorder(self, kind: Literal["forward", "backward"], index: int,
                  compile_id: str | None, lifted: int = 0) -> Callable[..., Any]:
        def compiler(graph_module: fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
            layouts = list(example_inputs) if self.compiled_layouts else None
            captured = CapturedGraph(f"{kind}_{index}", kind, index, graph_module,
                                     model_outputs=_model_outputs(kind), compile_id=compile_id,
                                     guards=_shape_guards(self.trace_inputs),
                                     frozen=_frozen_parameters(kind, graph_module, lifted))
            self.graphs.append(captured)

            parameters: list[int | None] = []
            by_reference = not mutates(graph_module)

            def run(args: list[Any]) -> Any:
                if not captured.called:
                    # Parameters by reference (the model holds them anyway), their versions recorded
                    # (``CapturedGraph.check_inputs``), and so are views of them (a backward's saved
                    # transposed weight: as large as the weight, a copy would double the parameters);
                    # every other input copied.
                    # A graph that writes in place copies them too: our eager re-runs write its inputs.
                    shared = [by_reference and (isinstance(a, torch.nn.Parameter) or self._views_parameter(a))
                              for a in args]
                    self.parameter_storages.update((_storage_key(a), a) for a, share in zip(args, shared)
                                                   if share and isinstance(a, torch.nn.Parameter))
                    captured.inputs = [a.detach() if share else _detached([a])[0] for a, share in zip(args, shared)]
                    if layouts is not None and len(layouts) == len(args):
                        captured.inputs = [_laid_out_as(a, e) for a, e in zip(captured.inputs, layouts)]
                    captured.shared = tuple((a, a._version) for a, share in zip(args, shared) if share)
                    captured.called = True
                    parameters[:] = [id(a) if isinstance(a, torch.nn.Parameter) else None for a in args]
                elif len(captured.later_inputs) < LATER_CALLS and _bytes(args) <= LATER_CALL_BYTES:
                    # A graph called again (a shared block, a decode loop) may meet values its first
                    # call never showed: kept to judge when the model diverges and the first call does not.
                    captured.later_inputs.append([
                        None if i < len(parameters) and parameters[i] == id(a) else _detached([a])[0]
                        for i, a in enumerate(args)])
                return graph_module(*args)

            run._boxed_call = True  # type: ignore[attr-defined]
            return run

        return compiler

    def _views_parameter(self, value: Any) -> bool:
        """Whether ``value`` is a view of a parameter a recorded graph holds by reference: on its
        storage (autograd's saved tensors are not marked as views), at its version."""
        if not isinstance(value, torch.Tensor) or isinstance(value, torch.nn.Parameter) or value.is_sparse:
            return False
        parameter = self.parameter_storages.get(_storage_key(value))
        return parameter is not None and parameter._version == value._version

    def called_graphs(self) -> list[CapturedGraph]:
        """Graphs that ran, forward graphs in call order, then backward graphs in run order."""
        forward = [g for g in self.graphs if g.kind == "forward" and g.called]
        backward = [g for g in self.graphs if g.kind == "backward" and g.called]
        for graph in forward:
            if graph.model_outputs is None:
                graph.model_outputs = _outputs_before_saved(graph, backward)
        for graph in forward:
            if graph.index < len(self.dynamo_inputs) and self.dynamo_graphs[graph.index] is not None:
                graph.torch_level = (self.dynamo_graphs[graph.index], self.dynamo_inputs[graph.index])
        return forward + backward


def symbolic_example(graph_module: fx.GraphModule, inputs: Sequence[Any]) -> list[Any] | None:
    """For a Dynamo graph compiled with symbolic sizes (its placeholders' ``example_value``),
    fake inputs with the same symbols, so the aten graph is traced symbolically as the job's
    was; None for a static graph, or inputs that do not fit (then traced at their sizes)."""
    signature = shape_signature(graph_module)
    if signature is None:
        return None
    try:
        fakes = fake_inputs(signature, list(inputs))
    except ShapeMismatch as mismatch:
        log.warning("tracing the graph at its real sizes: %s", mismatch)
        return None
    # Inputs that require grad (a training step) must do so as fake tensors too.
    return [f.requires_grad_(True) if isinstance(f, torch.Tensor) and isinstance(real, torch.Tensor)
            and real.requires_grad else f for f, real in zip(fakes, inputs)]


def current_compile_id() -> str | None:
    """The Dynamo compile running now, as torch's trace writes it ("0/0"), or None outside one."""
    compile_id = torch._guards.CompileContext.current_compile_id()
    return str(compile_id) if compile_id is not None else None


def _shape_guards(trace_inputs: list[Any] | None = None) -> tuple[str, ...]:
    """The guards the compile running now put on symbolic sizes (expression text), if any
    (``trace_inputs``: our own symbolic fake inputs, outside Dynamo)."""
    context = torch._guards.TracingContext.try_get()
    fake_mode = getattr(context, "fake_mode", None) if context is not None else None
    if fake_mode is None and trace_inputs is not None:
        fake_mode = torch._guards.detect_fake_mode(trace_inputs)
    shape_env = getattr(fake_mode, "shape_env", None)
    if shape_env is None:
        return ()
    guards = [str(shape_env.simplify(guard.expr)) for guard in shape_env.guards]
    return tuple(dict.fromkeys(g for g in guards if g not in ("True", "False")))


def _frozen_parameters(kind: str, graph_module: fx.GraphModule, lifted: int = 0) -> tuple[str, ...]:
    """The placeholders a compile with ``freezing`` (under no_grad) turns into constants: the
    parameters and buffers AOT Autograd lifted first (``params_flat``), less any the graph writes
    in place (as Inductor's ``replace_params_with_constants`` keeps those inputs). Outside a Dynamo
    compile (script mode re-runs a graph the program compiled) no tracing context holds
    ``params_flat``: the ``lifted`` parameters and buffers of the Dynamo graph count them."""
    context = torch._guards.TracingContext.try_get()
    params = getattr(context, "params_flat", None) if context is not None else None
    count = len(params) if params else lifted if context is None else 0
    if kind != "forward" or not count or not freezing_on():
        return ()
    metadata = getattr(context, "fw_metadata", None)
    info = list(getattr(metadata, "input_info", None) or [])
    placeholders = [node.name for node in graph_module.graph.nodes if node.op == "placeholder"]
    return tuple(name for i, name in enumerate(placeholders[:count])
                 if not (i < len(info) and (info[i].mutates_data or info[i].mutates_metadata)))


def _lifted_parameters(graph_module: fx.GraphModule) -> int:
    """How many inputs AOT Autograd lifts from a Dynamo graph's own parameters and buffers (the
    graph's ``get_attr`` tensors: a module Dynamo did not inline, as under ``freezing``)."""
    return (len(dict(graph_module.named_parameters(remove_duplicate=False)))
            + len(dict(graph_module.named_buffers(remove_duplicate=False))))


def _outputs_before_saved(forward: CapturedGraph, backward: list[CapturedGraph]) -> int | None:
    """A training forward's model outputs counted from its backward graph, where no tracing context
    holds AOT's metadata (a Dynamo graph re-run outside Dynamo: script mode): AOT Autograd's forward
    returns the model's outputs, then what it saves, and the backward takes exactly what was saved,
    then one tangent per model output that needs one (``tangents_<n>``). None without a backward."""
    partner = next((g for g in backward if g.index == forward.index), None)
    if partner is None:
        return None
    placeholders = [n.name for n in partner.graph_module.graph.nodes if n.op == "placeholder"]
    saved = [name for name in placeholders if not name.startswith("tangents_")]
    output = next(n for n in reversed(forward.graph_module.graph.nodes) if n.op == "output")
    returned = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
    count = len(returned) - len(saved)
    names = [getattr(value, "name", None) for value in returned[count:]] if count >= 0 else []
    return count if count >= 0 and names == saved else None


def _model_outputs(kind: str) -> int | None:
    """How many of a training forward graph's outputs are the model's own (mutated inputs, its
    outputs); the rest are saved for the backward. None: all of them (inference, backward)."""
    context = torch._guards.TracingContext.try_get()
    metadata = getattr(context, "fw_metadata", None) if context is not None else None
    if kind != "forward" or metadata is None:
        return None
    return int(metadata.num_forward_returns)


def capture(
    model: Callable[..., Any],
    inputs: Sequence[Any],
    loss_fn: Callable[[Any], Any] | None = None,
    dynamic: bool | None = None,
) -> tuple[list[CapturedGraph], Any]:
    """Run ``model(*inputs)`` once through the capturing backend; returns graphs and output.

    Without a ``loss_fn`` nothing is differentiated, so the graphs are captured for inference
    (``no_grad``): their outputs are the model's outputs, not also the tensors a backward would save.
    """
    backend = CaptureBackend()
    output = _run_compiled(model, inputs, loss_fn, backend, dynamic)
    return backend.called_graphs(), output


@dataclass
class BackendRun:
    """A model run through the user's own backend, the graphs it handed Inductor recorded instead
    of compiled: per Dynamo graph, a copy of the graph Dynamo gave the backend (taken before the
    backend ran) and the real inputs and outputs of its first call through the backend."""

    backend: str
    dynamo: list[tuple[fx.GraphModule, list[Any], list[Any] | None]] = field(default_factory=list)
    inductor_graphs: list[fx.GraphModule] = field(default_factory=list)  # torch-level, as handed to compile_fx
    note: str = ""  # why the graphs were not captured inside the backend after all (then captured the plain way)

    def around(self, user_backend: Callable[..., Any]) -> Callable[..., Any]:
        def backend(graph_module: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
            entry: list[Any] = [copy.deepcopy(graph_module), _detached(example_inputs), None]
            self.dynamo.append(entry)  # type: ignore[arg-type]
            compiled = user_backend(graph_module, example_inputs)

            def first_call_kept(*args: Any) -> Any:
                outputs = compiled(*args)
                if entry[2] is None:
                    entry[1] = _detached(args)
                    entry[2] = _detached(pytree.tree_leaves(outputs))
                return outputs

            return first_call_kept

        return backend


def capture_through_backend(model: Callable[..., Any], inputs: Sequence[Any], loss_fn: Callable[[Any], Any] | None,
                            user_backend: Callable[..., Any], name: str,
                            dynamic: bool | None = None) -> tuple[list[CapturedGraph], Any, BackendRun]:
    """Run the model through the user's backend with the graphs it hands Inductor recorded (and run
    eagerly) instead of compiled. No graph reached Inductor: an empty list (the caller captures
    the plain way)."""
    recorder, run = CaptureBackend(inputs_of_first_call=True), BackendRun(backend_name(name, user_backend))
    with _inside_backend(recorder, run):
        output = _run_compiled(model, inputs, loss_fn, run.around(user_backend), dynamic)
    return recorder.called_graphs(), output, run


def capture_graph_module_through_backend(graph_module: fx.GraphModule, inputs: Sequence[Any],
                                         user_backend: Callable[..., Any], name: str,
                                         compile_id: str | None = None) -> tuple[list[CapturedGraph], BackendRun]:
    """Like :func:`capture_graph_module`, through the user's backend (script mode: a graph the
    program compiled with it): what it hands Inductor is recorded, run eagerly, never compiled."""
    recorder, run = CaptureBackend(compile_id=compile_id, inputs_of_first_call=True), BackendRun(backend_name(name, user_backend))
    try:
        with _inside_backend(recorder, run), torch.no_grad():
            run.around(user_backend)(copy.deepcopy(graph_module), _detached(inputs))(*_detached(inputs))
    except Exception as error:
        raise ModelError(f"re-running the graph through the backend {name} raised {type(error).__name__}: {error}") from error
    return recorder.called_graphs(), run


def _laid_out_as(value: Any, example: Any) -> Any:
    """``value`` with ``example``'s strides (same sizes, concrete strides, dense), else as it is."""
    if not (isinstance(value, torch.Tensor) and isinstance(example, torch.Tensor)) or value.shape != example.shape:
        return value
    try:
        strides = tuple(int(s) for s in example.stride())
    except (TypeError, ValueError, RuntimeError):  # symbolic strides: left as the run made them
        return value
    if strides == tuple(value.stride()) or not torch._prims_common.is_non_overlapping_and_dense_or_false(example):
        return value
    return torch.empty_strided(value.shape, strides, dtype=value.dtype, device=value.device).copy_(value)


def capture_graph_module_through_inductor(graph_module: fx.GraphModule, inputs: Sequence[Any],
                                          grad_positions: Sequence[int],
                                          loss_of: Callable[[list[Any]], torch.Tensor | None],
                                          compile_id: str | None = None) -> list[CapturedGraph]:
    """A training step's graphs as Inductor's own compile hands them to ``compile_fx_inner``: after
    its pre-grad passes, its decompositions and its partition (what it recomputes in the backward
    rather than saves), recorded and run eagerly; the forward compiled too (not run), so AOT Autograd
    hands the backward the layouts the compiled forward gives what it saves. Our plain capture (AOT
    Autograd without decompositions, the default partition) judges other graphs than the program
    compiled; where each of those matches alone while the program's gradients differ, these are
    the graphs the program ran (pytorch#186799: the backward recomputes ``atan2``), each input (eager's
    value) laid out as the compile was told (pytorch#185509: the weight the compiled forward saves
    channels-last)."""
    from torch._functorch import config as functorch_config
    from torch._inductor.compile_fx import compile_fx

    args = _detached(inputs)
    for position in grad_positions:
        args[position].requires_grad_(True)
    recorder = CaptureBackend(compile_id=compile_id, inputs_of_first_call=True, compiled_layouts=True)
    try:
        # AOT Autograd's cache would hand back a compiled function without calling compile_fx_inner
        with graphs_reaching_inductor(None, recorder.aten_graph, compile_forward=True), \
                functorch_config.patch(enable_autograd_cache=False), torch.enable_grad():
            compiled = compile_fx(copy.deepcopy(graph_module), args)
            outputs = compiled(*args)
            loss = loss_of(list(outputs) if isinstance(outputs, (tuple, list)) else [outputs])
            if loss is not None:
                loss.backward()
    except Exception as error:
        raise ModelError(f"re-running the graph through Inductor's compile raised {type(error).__name__}: {error}") \
            from error
    return recorder.called_graphs()


def backend_name(name: str, backend: Any) -> str:
    """A readable name for a user's backend: its class or function name, never an object's repr."""
    if not name.startswith("<"):
        return name
    inner = getattr(backend, "compiler_fn", backend)
    return getattr(inner, "__name__", type(inner).__name__)


def _inside_backend(recorder: CaptureBackend, run: BackendRun) -> Any:
    """Inductor's entry points record into ``recorder`` while the user's backend runs."""
    def torch_level(graph_module: fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        run.inductor_graphs.append(graph_module)
        return recorder(graph_module, example_inputs)

    def aten_level(graph_module: fx.GraphModule, example_inputs: list[Any], is_backward: bool = False) -> Callable[..., Any]:
        return recorder.aten_graph(graph_module, example_inputs, is_backward)

    return graphs_reaching_inductor(torch_level, aten_level)


def _loss(loss_fn: Callable[[Any], Any], output: Any) -> torch.Tensor:
    """``loss_fn(output)``: its own failure is named as its own, not the model's."""
    try:
        loss = loss_fn(output)
    except Exception as error:
        raise ModelError(f"loss_fn(output) raised: {type(error).__name__}: {error}") from error
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise ModelError("loss_fn(output) must return a scalar tensor")
    return loss


def _backward(loss: torch.Tensor) -> None:
    try:
        loss.backward()
    except Exception as error:
        raise ModelError(f"the backward pass of loss_fn(output) raised: {type(error).__name__}: {error}") from error


# An allocation that fails while the model runs under our capture (its graphs run eagerly, with copies of
# their inputs held for judging) is the run's memory cut (exit 4, a report), never the model's error (exit 2).
CAPTURING = "while capturing the model (its step run under torch.compile with our backend)"


def _run_compiled(model: Callable[..., Any], inputs: Sequence[Any], loss_fn: Callable[[Any], Any] | None,
                  backend: Callable[..., Any], dynamic: bool | None = None) -> Any:
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend, dynamic=dynamic)  # the user's dynamic= (None: automatic)
    try:
        with torch.set_grad_enabled(loss_fn is not None and torch.is_grad_enabled()):
            output = compiled(*fresh_inputs(tuple(inputs)))  # a model that writes to its inputs changes a copy
        if not any(isinstance(v, torch.Tensor) for v in pytree.tree_leaves(output)):
            raise ModelError(f"the model's output holds no tensor ({type(output).__name__}): nothing to compare")
        if loss_fn is not None:
            _backward(_loss(loss_fn, output))
    except ModelError as error:  # the loss or the backward: an allocation that failed is our memory, not the model's
        stop_if_out_of_memory(error, CAPTURING)
        raise
    except Exception as error:
        stop_if_out_of_memory(error, CAPTURING)  # never run eagerly again to compare: it would allocate as much
        raise ModelError(f"the model raised while being captured: {type(error).__name__}: {error}"
                         f"{_in_eager_too(model, inputs, loss_fn, error)}") from error
    finally:
        torch._dynamo.reset()
    return output


def _in_eager_too(model: Callable[..., Any], inputs: Sequence[Any], loss_fn: Callable[[Any], Any] | None,
                  error: Exception) -> str:
    """Whether the model raises the same without torch.compile (flex attention with grad on CPU
    does, in its own argument checks): then it is no compile failure, and the message says so.
    Where it runs without error eagerly, the failure is not in the model's own code, and the
    message says that instead (a race in this tool's capture once read as the model's error)."""
    try:
        with torch.set_grad_enabled(loss_fn is not None and torch.is_grad_enabled()):
            output = model(*fresh_inputs(tuple(inputs)))
            if loss_fn is not None:
                loss_fn(output).backward()
    except Exception as eager:  # noqa: BLE001 - only compared with the capture's error
        if type(eager) is type(error) and str(eager) == str(error):
            return " (it raises the same when run eagerly, without torch.compile: nothing was compiled or compared)"
        return ""
    return (" (it runs without error eagerly, without torch.compile: the failure is in torch.compile's capture "
            "(Dynamo, AOT Autograd) or in this tool's, not in the model's own code; nothing was compared)")


def nothing_captured(model: Callable[..., Any]) -> str:
    """Why Dynamo compiled no graph of ``model``, with the switch that changes it where we know one.
    torch.compile then runs the model eagerly: compiled and eager cannot disagree."""
    modules = list(model.modules()) if isinstance(model, torch.nn.Module) else []
    rnns = sorted({type(m).__name__ for m in modules if isinstance(m, torch.nn.RNNBase)})
    if rnns and not torch._dynamo.config.allow_rnn:
        return (f"torch.compile compiled nothing: Dynamo skips the frames that run {', '.join(rnns)} while "
                "torch._dynamo.config.allow_rnn is False (the default), so the job runs them eagerly; "
                "to check them compiled, set torch._dynamo.config.allow_rnn = True in the model file")
    disabled = [type(m).__name__ for m in modules if getattr(getattr(m, "forward", None), "_torchdynamo_disable", False)]
    if getattr(model, "_torchdynamo_disable", False) or getattr(getattr(model, "forward", None), "_torchdynamo_disable", False):
        disabled.insert(0, getattr(model, "__name__", type(model).__name__))
    if disabled:
        return (f"torch.compile compiled nothing: {disabled[0]} is excluded with torch._dynamo.disable, so it "
                "runs eagerly; remove the decorator (or compile the parts it wraps) to check it")
    return ("torch.compile compiled nothing: Dynamo captured no graph (the model runs no tensor ops under "
            "Dynamo, or every frame was skipped; TORCH_LOGS=graph_breaks,dynamo says why)")


def capture_graph_module(graph_module: fx.GraphModule, inputs: Sequence[Any],
                         compile_id: str | None = None) -> list[CapturedGraph]:
    """Capture one Dynamo graph's forward aten graph without Dynamo (no ``torch._dynamo.reset``):
    for graphs met while a user's program runs, whose compiled frames must stay as they are
    (``compile_id``: the Dynamo compile that made the graph)."""
    backend = CaptureBackend(compile_id=compile_id, trace_inputs=symbolic_example(graph_module, inputs))
    try:
        with torch.no_grad():
            backend(graph_module, list(inputs))(*inputs)
    except Exception as error:
        raise ModelError(f"re-running the graph eagerly raised {type(error).__name__}: {error}") from error
    return backend.called_graphs()


def capture_graph_module_with_backward(graph_module: fx.GraphModule, inputs: Sequence[Any], grad_positions: Sequence[int],
                                       loss_of: Callable[[list[Any]], torch.Tensor | None],
                                       compile_id: str | None = None) -> list[CapturedGraph]:
    """Like :func:`capture_graph_module`, for a training step: the inputs at ``grad_positions``
    require grad, ``loss_of(outputs)`` is differentiated, and the backward graph is captured too
    (its real inputs include the cotangents ``loss_of`` implies)."""
    args = _detached(inputs)
    for position in grad_positions:
        args[position].requires_grad_(True)
    backend = CaptureBackend(compile_id=compile_id, trace_inputs=symbolic_example(graph_module, args))
    try:
        with torch.enable_grad():
            outputs = backend(graph_module, args)(*args)
            loss = loss_of(list(outputs) if isinstance(outputs, (tuple, list)) else [outputs])
            if loss is not None:
                loss.backward()
    except Exception as error:
        raise ModelError(f"re-running the graph eagerly raised {type(error).__name__}: {error}") from error
    return backend.called_graphs()
