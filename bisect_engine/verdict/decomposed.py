"""A torch-level call against the aten graph our capture traces of it, both run eagerly: no compile.

AOT Autograd traces each Dynamo graph under the Python dispatcher, so a composite op whose Python
decomposition computes otherwise than the kernel eager runs (nearest interpolation's index
arithmetic, pytorch#175154 / #198201) is wrong in the captured aten graph itself: every node of
it matches its compile, Inductor inherits it (so does ``aot_eager``). Three judgements, each of
the program as written (eager, with its fp64 run as the reference) against what was traced of it
(``judgement.judge_outputs`` at scope ``program``):

- :func:`judge_capture`: the whole Dynamo graph against the captured aten graph;
- :func:`judge_against_trace` on one call (a one-node torch-level graph), or on one aten op the
  call runs as eager dispatches it (:func:`eager_op_graphs`, a pre-dispatch trace), against the
  aten graph :func:`traced_as_captured` makes of it.

Random ops never count (their draws differ by construction).
"""
from __future__ import annotations

import logging
from typing import Any, Sequence

import torch
import torch.fx as fx
import torch.utils._pytree as pytree
from torch._dispatch.python import enable_python_dispatcher
from torch.fx.experimental.proxy_tensor import make_fx

from ..search import stop_if_out_of_memory
from .compare import Outcome, TensorVerdict
from .fx_eval import clone_value, run_graph
from .graphs import is_random, op_name
from .judgement import PROGRAM, Oracle, judge_outputs
from .oracle import SubgraphVerdict

log = logging.getLogger(__name__)


def traced_as_captured(graph_module: fx.GraphModule, inputs: Sequence[Any]) -> fx.GraphModule:
    """The aten graph ``make_fx`` traces of ``graph_module`` under the Python dispatcher, as AOT
    Autograd traces it for our capture (composite ops through their Python decompositions)."""
    with torch.no_grad(), enable_python_dispatcher():
        return make_fx(graph_module)(*[clone_value(v) for v in inputs])


def call_ops(graph_module: fx.GraphModule) -> tuple[str, ...]:
    """The ops a graph calls, in order, each once."""
    return tuple(dict.fromkeys(op_name(n) for n in graph_module.graph.nodes if n.op == "call_function"))


def _random(graph_module: fx.GraphModule) -> bool:
    """Whether an aten graph draws random numbers (``graphs.is_random``, the run's one rule)."""
    return any(is_random(node) for node in graph_module.graph.nodes if node.op == "call_function")


def _verdict(oracle: Oracle, eager: list[Any], fp64: list[Any] | None, traced: list[Any]) -> SubgraphVerdict:
    pairs = [(e, t) for e, t in zip(eager, traced) if isinstance(e, torch.Tensor) or isinstance(t, torch.Tensor)]
    if not pairs:
        return SubgraphVerdict(Outcome.INVALID, error="no tensor output to compare")
    eager_tensors = [e for e, _ in pairs]
    traced_tensors = [t for _, t in pairs]
    reference = None if fp64 is None else [r for r, e in zip(fp64, eager) if isinstance(e, torch.Tensor)]
    if reference is not None and len(reference) != len(eager_tensors):
        reference = None
    verdicts = judge_outputs(oracle, PROGRAM, eager_tensors, reference, traced_tensors)
    outputs: dict[str, TensorVerdict] = {f"output_{i}": v for i, v in enumerate(verdicts)}
    mismatched = len(eager) != len(traced) or any(v.outcome is not Outcome.MATCH for v in verdicts)
    return SubgraphVerdict(Outcome.MISMATCH if mismatched else Outcome.MATCH, outputs,
                           compiled_values={f"output_{i}": t for i, t in enumerate(traced_tensors)})


def _fp64(graph_module: fx.GraphModule, inputs: Sequence[Any]) -> list[Any] | None:
    try:
        with torch.no_grad():
            return run_graph(graph_module, [clone_value(v) for v in inputs], upcast=True)
    except Exception as error:  # noqa: BLE001 - eager's own values stand in
        stop_if_out_of_memory(error, "in an fp64 run of a decomposition check")
        log.debug("no fp64 run of %s: %s", graph_module.__class__.__name__, error)
        return None


def judge_against_trace(oracle: Oracle, graph_module: fx.GraphModule, inputs: Sequence[Any]) -> SubgraphVerdict:
    """``graph_module`` run as written against its :func:`traced_as_captured` aten graph, both
    eagerly on ``inputs``; INVALID where it cannot be traced or draws random numbers."""
    try:
        traced = traced_as_captured(graph_module, inputs)
        if _random(traced):
            return SubgraphVerdict(Outcome.INVALID, error="draws random numbers")
        with torch.no_grad():
            eager = run_graph(graph_module, [clone_value(v) for v in inputs])
            decomposed = pytree.tree_leaves(traced(*[clone_value(v) for v in inputs]))
    except Exception as error:  # noqa: BLE001 - a call that cannot be traced alone says nothing here
        stop_if_out_of_memory(error, "replaying a call and its decomposition")
        return SubgraphVerdict(Outcome.INVALID, error=f"{type(error).__name__}: {error}")
    return _verdict(oracle, eager, _fp64(graph_module, inputs), decomposed)


def judge_capture(oracle: Oracle, torch_level: fx.GraphModule, torch_inputs: Sequence[Any],
                  captured: fx.GraphModule, captured_inputs: Sequence[Any], model_outputs: int | None) -> SubgraphVerdict:
    """The Dynamo graph run as written against the captured aten graph, both eagerly: the program's
    outputs are the captured graph's first ``model_outputs`` (the rest are saved for the backward),
    their last ones (AOT Autograd puts inputs written in place first). INVALID where the two do
    not line up (count, shapes, dtypes), or either draws random numbers."""
    if _random(captured):
        return SubgraphVerdict(Outcome.INVALID, error="draws random numbers")
    try:
        with torch.no_grad():
            eager = [v for v in run_graph(torch_level, [clone_value(v) for v in torch_inputs])
                     if isinstance(v, torch.Tensor)]
            aten = run_graph(captured, [clone_value(v) for v in captured_inputs])
    except Exception as error:  # noqa: BLE001 - cannot replay both: the per-call look decides
        stop_if_out_of_memory(error, "replaying a call at the torch and aten levels")
        return SubgraphVerdict(Outcome.INVALID, error=f"{type(error).__name__}: {error}")
    program = [v for v in aten[: model_outputs if model_outputs is not None else len(aten)] if isinstance(v, torch.Tensor)]
    program = program[len(program) - len(eager):] if len(program) >= len(eager) else []
    if not eager or len(program) != len(eager) or any(
            a.shape != b.shape or a.dtype != b.dtype for a, b in zip(eager, program)):
        return SubgraphVerdict(Outcome.INVALID, error="the captured graph's outputs do not line up with Dynamo's")
    fp64 = _fp64(torch_level, torch_inputs)
    fp64 = None if fp64 is None else [v for v in fp64 if isinstance(v, torch.Tensor)]
    return _verdict(oracle, eager, fp64, program)


def eager_op_graphs(graph_module: fx.GraphModule, inputs: Sequence[Any]) -> list[tuple[fx.GraphModule, tuple[Any, ...]]]:
    """Each aten op ``graph_module`` (one torch-level call) runs as eager dispatches it (a
    pre-dispatch trace: composite ops not yet decomposed), as a one-op graph with the real values
    of its inputs; [] where the call cannot be traced so."""
    try:
        with torch.no_grad():
            traced = make_fx(graph_module, pre_dispatch=True)(*[clone_value(v) for v in inputs])
            interpreter = fx.Interpreter(traced, garbage_collect_values=False)
            interpreter.run(*[clone_value(v) for v in inputs])
    except Exception as error:  # noqa: BLE001 - the call is then judged whole only
        stop_if_out_of_memory(error, "tracing a call at pre-dispatch")
        log.debug("no pre-dispatch trace: %s", error)
        return []
    values = {node: value for node, value in interpreter.env.items()}
    found = []
    for node in traced.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        graph = fx.Graph()
        copies: dict[fx.Node, fx.Node] = {}
        for source in node.all_input_nodes:
            copies[source] = graph.placeholder(source.name)
        copy = graph.node_copy(node, lambda source: copies[source])
        graph.output(copy)
        found.append((fx.GraphModule(traced, graph), tuple(values[source] for source in node.all_input_nodes)))
    return found


def largest_difference(graph_module: fx.GraphModule, inputs: Sequence[Any], verdict: SubgraphVerdict) -> float:
    """The largest absolute difference between ``graph_module`` run eagerly and the traced values
    ``verdict`` holds (NaN where none can be compared)."""
    try:
        with torch.no_grad():
            eager = [v for v in run_graph(graph_module, [clone_value(v) for v in inputs]) if isinstance(v, torch.Tensor)]
    except Exception as error:  # noqa: BLE001 - the difference is then unknown
        stop_if_out_of_memory(error, "replaying a call eagerly")
        return float("nan")
    traced = [verdict.compiled_values.get(f"output_{i}") for i in range(len(eager))]
    gaps = [float((e.double() - t.double()).abs().max()) for e, t in zip(eager, traced)
            if isinstance(t, torch.Tensor) and e.shape == t.shape and e.numel() and not e.is_complex()]
    return max(gaps, default=float("nan"))
