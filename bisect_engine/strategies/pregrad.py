"""Where a torch-level (pre-grad) pass changes what the model computes, without a compile.

Inductor runs its pre-grad passes (and the user's ``pre_grad_custom_pass``) on the Dynamo graph,
before AOT Autograd: no captured aten graph holds their rewrite, so the per-graph search cannot
see it, and only the model-level check (a real ``torch.compile``) diverges. Once a model-level
switch has named such a pass, :func:`localise_pre_grad` applies the passes to a copy of each
Dynamo graph, runs the graph before and after eagerly on its real inputs, and, where the outputs
differ, names the nodes the passes rewrote (before and after, with source lines) and the aten ops
each rewritten node runs. The graph is never mutated; nothing is compiled.

It also cuts the torch-level graph a repro is made of: the rewritten nodes alone (their inputs as
placeholders), when the passes, replayed on that cut, still change its outputs; else the whole
Dynamo graph. The repro compiles it with ``torch.compile`` (the passes run), eager does not.
"""
from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, cast

import torch
import torch.fx as fx
import torch.utils._pytree as pytree
from torch.fx.experimental.proxy_tensor import make_fx

from ..search import stop_if_out_of_memory
from ..verdict.candidate import DecompositionCandidate
from ..verdict.compare import Outcome
from ..verdict.decomposed import call_ops, eager_op_graphs, largest_difference, traced_as_captured
from ..verdict.judgement import PROGRAM, Oracle, judge_outputs
from ..verdict.fx_eval import clone_value, run_graph
from ..verdict.graphs import CapturedGraph, op_name, source_location
from ..verdict.inductor_adapter import pre_grad_passes
from ..load.capture import BackendRun

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RewrittenNode:
    node: str
    before: str | None  # the node as Dynamo recorded it ("add = operator.add(linear, 1)"); None: added
    after: str | None  # the node after the passes; None: removed
    source: str | None
    aten_ops: tuple[str, ...] = ()  # what the rewritten node runs, traced to aten

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "before": self.before, "after": self.after, "source": self.source,
                "aten_ops": list(self.aten_ops)}


@dataclass(frozen=True)
class TorchLevelCut:
    """A torch-level graph before the passes, with the real values of its inputs: what a repro
    compiles (``minimal``: the rewritten nodes alone; else the whole Dynamo graph)."""

    graph_module: fx.GraphModule
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    inputs: tuple[Any, ...]
    minimal: bool


@dataclass(frozen=True)
class DecomposedOp:
    """An aten op eager runs whose decomposition, traced as our capture traces it (AOT Autograd,
    the Python dispatcher), computes otherwise: Inductor compiles that decomposition and inherits
    it. ``cut``: the op alone with its real inputs (the repro runs it eagerly and decomposed)."""

    op: str
    traced_ops: tuple[str, ...]  # what the decomposition runs
    cut: TorchLevelCut = field(compare=False)
    max_abs_diff: float = float("nan")

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "traced_as": list(self.traced_ops), "max_abs_diff": self.max_abs_diff}


@dataclass(frozen=True)
class PassRewrite:
    graph: str  # the forward graph traced from that Dynamo graph
    nodes: tuple[RewrittenNode, ...]
    max_abs_diff: float  # the graph's outputs, eagerly, after the passes against before
    cut: TorchLevelCut | None = field(default=None, compare=False)  # the repro's torch-level graph
    by: str | None = None  # who rewrote it: the pre-grad pass named, or "backend <name>" (the user's)
    # by CAPTURE_DECOMPOSITION: the op eager runs whose decomposition alone computes otherwise
    decomposed: DecomposedOp | None = None

    @property
    def aten_op(self) -> str | None:
        if self.decomposed is not None:
            return self.decomposed.op
        return next((op for n in self.nodes for op in n.aten_ops), None)

    def to_json(self) -> dict[str, Any]:
        return {"graph": self.graph, "aten_op": self.aten_op, "max_abs_diff": self.max_abs_diff, "by": self.by,
                "decomposed": None if self.decomposed is None else self.decomposed.to_json(),
                "rewritten": [n.to_json() for n in self.nodes],
                "repro_graph": None if self.cut is None else ("the rewritten nodes alone" if self.cut.minimal
                                                              else "the whole torch-level graph")}


def _line(node: fx.Node) -> str:
    target = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", str(node.target))
    module = getattr(node.target, "__module__", "") if not isinstance(node.target, str) else ""
    name = f"{module}.{target}" if module and module not in ("builtins",) else str(target)
    args = ", ".join([*(repr(a) if not isinstance(a, fx.Node) else a.name for a in node.args),
                      *(f"{k}={v.name if isinstance(v, fx.Node) else repr(v)}" for k, v in node.kwargs.items())])
    return f"{node.name} = {name}({args})"


def rewritten_nodes(before: fx.GraphModule, after: fx.GraphModule) -> list[tuple[fx.Node | None, fx.Node | None]]:
    """(before, after) pairs of the call nodes that the passes added, removed or changed."""
    old = {n.name: n for n in before.graph.nodes if n.op.startswith("call")}
    new = {n.name: n for n in after.graph.nodes if n.op.startswith("call")}
    pairs: list[tuple[fx.Node | None, fx.Node | None]] = []
    for name, node in new.items():
        if name not in old or _line(old[name]) != _line(node):
            pairs.append((old.get(name), node))
    pairs += [(node, None) for name, node in old.items() if name not in new]
    return pairs


def _aten_ops(after: fx.GraphModule, node: fx.Node, inputs: list[Any]) -> tuple[str, ...]:
    """The aten ops ``node`` runs: its target traced by ``make_fx`` on the values it was fed."""
    if node.op != "call_function":
        return ()
    try:
        interpreter = fx.Interpreter(after, garbage_collect_values=False)
        with torch.no_grad():
            interpreter.run(*[clone_value(v) for v in inputs])
            args = fx.node.map_arg(node.args, lambda n: interpreter.env[n])
            kwargs = fx.node.map_arg(node.kwargs, lambda n: interpreter.env[n])
            target = cast(Callable[..., Any], node.target)
            traced = make_fx(lambda *a: target(*a, **kwargs))(*args)
    except Exception as error:  # noqa: BLE001 - the op stays unnamed; the rewrite is still shown
        stop_if_out_of_memory(error, "tracing a node to aten")
        log.debug("could not trace %s to aten: %s", node.name, error)
        return ()
    return tuple(dict.fromkeys(op_name(n) for n in traced.graph.nodes if n.op == "call_function"))


def _fp64_reference(graph_module: fx.GraphModule, inputs: Sequence[Any], outputs: list[Any]) -> list[Any]:
    """The graph run in fp64 (eager's outputs where it cannot be)."""
    try:
        with torch.no_grad():
            return run_graph(graph_module, [clone_value(v) for v in inputs], upcast=True)
    except Exception as error:  # noqa: BLE001 - judged against eager's own values instead
        stop_if_out_of_memory(error, "in the fp64 run of the torch-level graph")
        log.debug("no fp64 run of the torch-level graph: %s", error)
        return outputs


def _changes_outputs(graph_module: fx.GraphModule, inputs: Sequence[Any],
                     oracle: Oracle) -> tuple[bool, list[Any], list[Any], fx.GraphModule | None]:
    """Whether the pre-grad passes, applied to a copy of ``graph_module``, change its outputs
    eagerly beyond rounding (against fp64); with the outputs before and after and the rewritten copy."""
    before = copy.deepcopy(graph_module)
    try:
        after = pre_grad_passes(graph_module, list(inputs))
        with torch.no_grad():
            outputs_before = pytree.tree_leaves(before(*[clone_value(v) for v in inputs]))
            outputs_after = pytree.tree_leaves(after(*[clone_value(v) for v in inputs]))
    except Exception as error:  # noqa: BLE001 - cannot replay the passes here: say nothing of it
        stop_if_out_of_memory(error, "replaying the pre-grad passes")
        log.warning("could not replay the pre-grad passes: %s: %s", type(error).__name__, error)
        return False, [], [], None
    reference = _fp64_reference(before, inputs, outputs_before)
    verdicts = judge_outputs(oracle, PROGRAM, outputs_before, reference, outputs_after)
    changed = len(outputs_before) != len(outputs_after) or any(v.outcome is not Outcome.MATCH for v in verdicts)
    return changed, outputs_before, outputs_after, after


def cut_torch_level(graph_module: fx.GraphModule, names: set[str], values: dict[str, Any]) -> TorchLevelCut | None:
    """The named call nodes of a torch-level graph, in order, every other value they read a
    placeholder fed its real value; outputs: their tensors read outside the cut (or all of them)."""
    chosen = [n for n in graph_module.graph.nodes if n.op.startswith("call") and n.name in names]
    inside = set(chosen)
    graph = fx.Graph()
    copies: dict[fx.Node, fx.Node] = {}
    inputs: list[fx.Node] = []
    for node in chosen:
        for source in node.all_input_nodes:
            if source not in inside and source not in copies:
                copies[source] = graph.placeholder(source.name)
                copies[source].meta.update(source.meta)
                inputs.append(source)
    if any(source.name not in values for source in inputs) or any(n.op == "call_module" for n in chosen):
        return None
    for node in chosen:
        copies[node] = graph.node_copy(node, lambda source: copies[source])
    tensors = [n for n in chosen if isinstance(values.get(n.name), torch.Tensor)]
    outputs = [n for n in tensors if any(u not in inside for u in n.users)] or tensors
    if not outputs:
        return None
    graph.output(tuple(copies[n] for n in outputs))
    return TorchLevelCut(fx.GraphModule(graph_module, graph), tuple(copies[s].name for s in inputs),
                         tuple(n.name for n in outputs), tuple(values[s.name] for s in inputs),
                         minimal=len(chosen) < sum(n.op.startswith("call") for n in graph_module.graph.nodes))


def _node_values(graph_module: fx.GraphModule, inputs: Sequence[Any]) -> dict[str, Any]:
    interpreter = fx.Interpreter(graph_module, garbage_collect_values=False)
    with torch.no_grad():
        interpreter.run(*[clone_value(v) for v in inputs])
    return {node.name: value for node, value in interpreter.env.items()}


def repro_cut(original: fx.GraphModule, inputs: Sequence[Any], rewritten: set[str],
              oracle: Oracle) -> TorchLevelCut | None:
    """The rewritten nodes alone when the passes still change that cut's outputs; else the whole
    graph (a pass that needs the nodes around them), as a cut with placeholders for everything else."""
    try:
        values = _node_values(original, inputs)
    except Exception as error:  # noqa: BLE001 - no repro graph; the rewrite is still reported
        stop_if_out_of_memory(error, "running the torch-level graph node by node")
        log.debug("could not run the torch-level graph node by node: %s", error)
        return None
    everything = {n.name for n in original.graph.nodes if n.op.startswith("call")}
    for names in ((rewritten, everything) if rewritten else (everything,)):
        cut = cut_torch_level(original, names, values)
        if cut is not None and _changes_outputs(cut.graph_module, cut.inputs, oracle)[0]:
            return cut
    return None


def localise_pre_grad(captured: Sequence[CapturedGraph], oracle: Oracle = Oracle()) -> PassRewrite | None:
    """The first Dynamo graph whose pre-grad rewrite changes its outputs, eagerly, and how."""
    for graph in captured:
        if graph.torch_level is None:
            continue
        original, inputs = graph.torch_level
        changed, outputs_before, outputs_after, after = _changes_outputs(original, inputs, oracle)
        if not changed or after is None:
            continue
        pairs = rewritten_nodes(original, after)
        if not pairs:
            continue
        diffs = [float((a.double() - b.double()).abs().max()) for a, b in zip(outputs_before, outputs_after)
                 if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and a.numel()]
        nodes = tuple(RewrittenNode(cast(fx.Node, new or old).name, _line(old) if old is not None else None,
                                    _line(new) if new is not None else None,
                                    source_location(cast(fx.Node, new if new is not None else old))[0],
                                    _aten_ops(after, new, inputs) if new is not None else ())
                      for old, new in pairs)
        cut = repro_cut(original, inputs, {old.name for old, _ in pairs if old is not None}, oracle)
        return PassRewrite(graph.name, nodes, max(diffs, default=float("nan")), cut)
    return None


def localise_backend_rewrite(run: BackendRun, captured: Sequence[CapturedGraph],
                             oracle: Oracle = Oracle()) -> PassRewrite | None:
    """The user's backend itself changes what a Dynamo graph computes (a pass of its own, before
    Inductor): the graph Dynamo gave it, run eagerly, against what the backend's result returned
    on the same inputs with the graphs it handed Inductor run eagerly; where they differ beyond
    rounding (against fp64), the nodes of those graphs that differ from Dynamo's. No compile."""
    handed = [g for g in captured if g.torch_level is not None and any(g.torch_level[0] is h for h in run.inductor_graphs)]
    for original, inputs, through_backend in run.dynamo:
        if through_backend is None:
            continue
        try:
            with torch.no_grad():
                before = pytree.tree_leaves(copy.deepcopy(original)(*[clone_value(v) for v in inputs]))
        except Exception as error:  # noqa: BLE001 - cannot replay Dynamo's graph: say nothing of it
            stop_if_out_of_memory(error, "replaying the graph handed to the backend")
            log.warning("could not replay the graph handed to the backend %s: %s", run.backend, error)
            continue
        before = [v for v in before if isinstance(v, torch.Tensor)]
        after = [v for v in through_backend if isinstance(v, torch.Tensor)]
        if len(before) != len(after) or not handed:
            continue
        verdicts = judge_outputs(oracle, PROGRAM, before, _fp64_reference(original, inputs, before), after)
        if all(v.outcome is Outcome.MATCH for v in verdicts):
            continue
        old = {n.name: n for n in original.graph.nodes if n.op.startswith("call")}
        nodes, graph_name = [], None
        for graph in handed:
            module, piece_inputs = graph.torch_level  # type: ignore[misc]
            for node in module.graph.nodes:
                if node.op.startswith("call") and (node.name not in old or _line(old[node.name]) != _line(node)):
                    nodes.append(RewrittenNode(node.name, _line(old[node.name]) if node.name in old else None, _line(node),
                                               source_location(node)[0], _aten_ops(module, node, piece_inputs)))
                    graph_name = graph_name or graph.name
        if not nodes or graph_name is None:
            continue
        diffs = [float((a.double() - b.double()).abs().max()) for a, b in zip(before, after) if a.shape == b.shape and a.numel()]
        return PassRewrite(graph_name, tuple(nodes), max(diffs, default=float("nan")), None, by=f"backend {run.backend}")
    return None


# ---- a decomposition AOT Autograd applies while it traces (issue 37, miss (a)) --------------------
CAPTURE_DECOMPOSITION = "decomposition at capture"  # PassRewrite.by: no pass, the trace itself


def torch_level_values(graph_module: fx.GraphModule, inputs: Sequence[Any]) -> dict[str, Any]:
    """Every node's value of a torch-level graph run eagerly on ``inputs``."""
    return _node_values(graph_module, inputs)


def call_cut(original: fx.GraphModule, node: str, values: dict[str, Any]) -> TorchLevelCut | None:
    """One call of a torch-level graph alone, its inputs placeholders fed their real values."""
    return cut_torch_level(original, {node}, values)


def _decomposed_op(graph: CapturedGraph, node: fx.Node, cut: TorchLevelCut, search: Any) -> DecomposedOp | None:
    """The first aten op the call runs eagerly (as eager dispatches it) whose decomposition alone,
    traced as our capture traces it, the judgement says computes otherwise; None when none does
    alone (the call's ops differ only together)."""
    for k, (op_graph, op_inputs) in enumerate(eager_op_graphs(cut.graph_module, cut.inputs)):
        verdict = search.judge(DecompositionCandidate(graph.name, node.name, k, purpose="decomposition"))
        if verdict.outcome is not Outcome.MISMATCH:
            continue
        (op_node,) = [n for n in op_graph.graph.nodes if n.op == "call_function"]
        names = tuple(n.name for n in op_graph.graph.nodes if n.op == "placeholder")
        op_cut = TorchLevelCut(op_graph, names, (op_node.name,), op_inputs, minimal=True)
        traced = call_ops(traced_as_captured(op_graph, op_inputs))
        return DecomposedOp(op_name(op_node), traced, op_cut, largest_difference(op_graph, op_inputs, verdict))
    return None


def localise_capture_decomposition(captured: Sequence[CapturedGraph], search: Any) -> PassRewrite | None:
    """The program diverges while every captured aten graph matches its compile: the aten graph may
    already be wrong, decomposed while AOT Autograd traced it (a composite op whose Python
    decomposition differs from the kernel eager runs: nearest interpolation's index arithmetic).
    Each Dynamo graph (the program as written) run eagerly against its captured aten graph; where
    they differ (or cannot be lined up), each call against its own trace, and in the first that
    differs, each aten op it runs eagerly against that op's decomposition: the op named, with a
    repro of that op alone (eager against its decomposition, no compile). Every comparison is a
    :class:`DecompositionCandidate` judged by the run's search; no compile."""
    for graph in captured:
        if graph.torch_level is None:
            continue
        if search.judge(DecompositionCandidate(graph.name, purpose="capture")).outcome is Outcome.MATCH:
            continue
        original, inputs = graph.torch_level
        values: dict[str, Any] | None = None
        for node in original.graph.nodes:
            if node.op not in ("call_function", "call_method"):
                continue
            verdict = search.judge(DecompositionCandidate(graph.name, node.name, purpose="call"))
            if verdict.outcome is not Outcome.MISMATCH:
                continue
            values = values if values is not None else torch_level_values(original, inputs)
            cut = call_cut(original, node.name, values)
            if cut is None:
                continue
            traced = traced_as_captured(cut.graph_module, cut.inputs)
            ops = call_ops(traced)
            output = next(n for n in reversed(traced.graph.nodes) if n.op == "output")
            made = [a for a in pytree.tree_leaves(output.args[0]) if isinstance(a, fx.Node) and a.op == "call_function"]
            headline = tuple(dict.fromkeys([*(op_name(n) for n in made), *ops]))
            rewritten = RewrittenNode(node.name, _line(node), "traced by AOT Autograd as " + ", ".join(ops[:8]),
                                      source_location(node)[0], headline)
            decomposed = _decomposed_op(graph, node, cut, search)
            max_abs = decomposed.max_abs_diff if decomposed is not None else largest_difference(
                cut.graph_module, cut.inputs, verdict)
            return PassRewrite(graph.name, (rewritten,), max_abs, cut, by=CAPTURE_DECOMPOSITION, decomposed=decomposed)
    return None
