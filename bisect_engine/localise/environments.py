"""``bisect-accuracy compare``: what changed between the environment that recorded a bundle and this one.

The model file is re-captured here; each recorded graph is aligned to the graph of the same name
by structure (op and value shapes, in order: a sequence alignment, so inserted, removed and
replaced ops are named first). Every aligned node is then run alone *on the recorded values of
its inputs*, eagerly and compiled, and judged against its recorded results by the rule of
:mod:`~bisect_engine.verdict.drift`: an eager result that moved is an ATen kernel change, a
compiled result that moved (eager unchanged) an Inductor / Triton change. Since every node reads
the recorded inputs, each change found is the op's own, not one carried from upstream.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import torch.fx as fx
from torch._inductor import config as inductor_config

from ..errors import UsageError
from ..load.bundle import Bundle, environment_differences, environment_facts, file_sha256
from ..load.model_file import ModelSpec
from ..verdict.compare import elementwise_change
from ..verdict.compiler import Compiler
from ..verdict.digest import bit_hash
from ..verdict.drift import Drift, EagerGap, drift, eager_gap
from ..verdict.graphs import CapturedGraph, GraphView
from ..verdict.judgement import Oracle
from ..verdict.oracle import GraphContext
from .env_record import capture_graphs, graph_constants, model_outputs, value_meta
from .measure_env import NodeValues, measure, tensor_value_names


@dataclass(frozen=True)
class OpChange:
    """One op whose result moved: which side, by how much, in which direction against fp64."""

    graph: str
    node: str  # the node's name in this environment's graph
    recorded_node: str
    op: str
    side: str  # "eager" (an ATen kernel) or "compiled" (Inductor / Triton)
    value: str  # the tensor that moved (the node, or one of its getitems)
    drift: Drift
    also_compiled: bool = False  # eager moved and compiled moved with it
    eager_gap: EagerGap | None = None  # compiled vs eager here and as recorded: equal now? toward eager or away?

    def to_json(self) -> dict[str, Any]:
        return {"graph": self.graph, "node": self.node, "recorded_node": self.recorded_node, "op": self.op,
                "side": self.side, "value": self.value, "direction": self.drift.direction,
                "also_compiled": self.also_compiled, "drift": self.drift.to_json(),
                "eager_gap": self.eager_gap.to_json() if self.eager_gap else None}


@dataclass(frozen=True)
class GraphComparison:
    name: str
    aligned: int = 0
    recorded_nodes: int = 0
    current_nodes: int = 0
    structure: tuple[str, ...] = ()  # what changed in the graph itself ("replaced aten.silu -> ...")
    changes: tuple[OpChange, ...] = ()
    not_checked: tuple[str, ...] = ()  # node: why
    compile_error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "aligned": self.aligned, "recorded_nodes": self.recorded_nodes,
                "current_nodes": self.current_nodes, "structure": list(self.structure),
                "changes": [c.to_json() for c in self.changes], "not_checked": list(self.not_checked),
                "compile_error": self.compile_error}


@dataclass(frozen=True)
class Comparison:
    environment: tuple[str, ...]  # environment facts that differ
    graphs: tuple[GraphComparison, ...]
    missing_graphs: tuple[str, ...] = ()
    new_graphs: tuple[str, ...] = ()
    model_output_change: float = 0.0  # largest elementwise relative change of the model's outputs
    compiles: int = 0
    repro_inputs: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def changes(self) -> list[OpChange]:
        return [change for graph in self.graphs for change in graph.changes]

    @property
    def changed(self) -> bool:
        return bool(self.changes or self.missing_graphs or self.new_graphs or any(g.structure for g in self.graphs))


def check_model(bundle: Bundle, model_path: Path) -> None:
    """A bundle is compared against the model file it was recorded from (same bytes)."""
    recorded = bundle.manifest["model"]
    if not model_path.is_file():
        raise UsageError(f"the model file {model_path} is missing (the bundle was recorded from {recorded.get('path')})")
    if file_sha256(model_path) != recorded.get("sha256"):
        raise UsageError(f"the bundle was recorded from another model ({recorded.get('name')}, sha256 "
                         f"{str(recorded.get('sha256'))[:12]}), not {model_path}")


def compare(bundle: Bundle, spec: ModelSpec, compiler: Compiler | None = None, device: str = "cpu") -> tuple[Comparison, list[dict[str, Any]]]:
    """Recompute here and judge each recorded node; returns the comparison and, per change, the
    values its repro needs."""
    seed = int(bundle.manifest.get("settings", {}).get("seed", 0))
    return compare_graphs(bundle, capture_graphs(spec, seed), model_outputs(spec, seed), compiler, device)


def compare_graphs(bundle: Bundle, captured: list[CapturedGraph], outputs: list[Any], compiler: Compiler | None = None,
                   device: str = "cpu", patches: Mapping[str, dict[str, Any]] | None = None,
                   ) -> tuple[Comparison, list[dict[str, Any]]]:
    """:func:`compare` on graphs captured here already (a model file's, or those a script compiled);
    ``patches``: the Inductor config each graph was compiled under here, by graph name."""
    compiler = compiler or Compiler()
    seed = int(bundle.manifest.get("settings", {}).get("seed", 0))
    current = {graph.name: graph for graph in captured}
    recorded = {graph["name"]: graph for graph in bundle.graphs}
    results, repros = [], []
    for name, graph_record in recorded.items():
        if name not in current:
            continue
        with inductor_config.patch((patches or {}).get(name, {})):
            result, inputs = _compare_graph(bundle, graph_record, current[name], compiler, seed)
        results.append(result)
        repros += inputs
    output_change = max((elementwise_change(bundle.values[key], new) for key, new in
                         zip(bundle.manifest.get("model_outputs", []), outputs) if key in bundle.values), default=0.0)
    comparison = Comparison(tuple(environment_differences(bundle.environment, environment_facts(device))), tuple(results),
                            tuple(sorted(set(recorded) - set(current))), tuple(sorted(set(current) - set(recorded))),
                            output_change, compiler.compiles)
    return comparison, repros


def _compare_graph(bundle: Bundle, record: dict[str, Any], graph: CapturedGraph, compiler: Compiler,
                   seed: int) -> tuple[GraphComparison, list[dict[str, Any]]]:
    context = GraphContext.from_captured(graph, Oracle(seed=seed))
    view = context.view
    pairs, structure = align(record["nodes"], view, context.eager_values)
    mapping = _value_mapping(record, pairs, view, graph, context.eager_values)
    fed, unmapped = _recorded_inputs(bundle, record["name"], mapping, context.eager_values)
    measured = measure(GraphContext(graph, view, fed, Oracle(seed=seed)), compiler, label=f"compare {graph.name}")
    changes, not_checked = [], []
    by_name = {n["name"]: n for n in record["nodes"]}
    for recorded_node, node in pairs:
        missing = [source.name for source in node.all_input_nodes if source.name in unmapped]
        if not recorded_node.get("checked") or node.name not in {n.name for n in view.compute_nodes if view.checkable(n)}:
            continue
        if missing:
            not_checked.append(f"{node.name}: its inputs {missing} were not recorded (changed part of the graph, or beyond the value cap)")
            continue
        if not reads_as_recorded(recorded_node, node, by_name, mapping):
            not_checked.append(f"{node.name}: aligned with {recorded_node['name']} by op and shapes, but it reads "
                               "other values than the recorded op did (the graph changed around it)")
            continue
        change = _judge_node(bundle, record["name"], recorded_node, node, measured, not_checked)
        if change is not None:
            changes.append(change)
    result = GraphComparison(record["name"], len(pairs), len(record["nodes"]), len(view.compute_nodes),
                             tuple(structure), tuple(changes), tuple(not_checked), measured.compile_error)
    return result, [_repro_values(change, view, fed) for change in changes]


def signature(op: str, metas: list[dict[str, Any]]) -> str:
    return op + "".join(f"|{m.get('dtype')}{m.get('shape')}" for m in metas)


# Copies without arithmetic: Dynamo / AOT Autograd add or drop them between versions. They are
# aligned among themselves, so a dropped copy never shifts the alignment of the ops around it, and a
# node reading one is checked as reading what it copies.
TRANSPARENT = ("aten.clone.default", "aten.alias.default")


def align(recorded_nodes: list[dict[str, Any]], view: GraphView,
          values: dict[str, Any]) -> tuple[list[tuple[dict[str, Any], fx.Node]], list[str]]:
    """Pairs of (recorded node, current node) with equal op and value shapes, by a sequence
    alignment (the arithmetic ops, then the copies among themselves); and one line per inserted,
    removed or replaced stretch of ops."""
    pairs, structure = [], []
    for copies in (False, True):
        old = [n for n in recorded_nodes if (n["op"] in TRANSPARENT) == copies]
        new = [n for n in view.compute_nodes if (str(n.target) in TRANSPARENT) == copies]
        found, said = _align(old, new, values)
        pairs += found
        structure += said
    order = {id(n): i for i, n in enumerate(recorded_nodes)}
    return sorted(pairs, key=lambda pair: order[id(pair[0])]), structure


def _align(recorded_nodes: list[dict[str, Any]], nodes: list[fx.Node],
           values: dict[str, Any]) -> tuple[list[tuple[dict[str, Any], fx.Node]], list[str]]:
    before = [signature(n["op"], [v["meta"] for v in n["values"]]) for n in recorded_nodes]
    after = [signature(str(n.target), [value_meta(values.get(name)) for name in tensor_value_names(n)]) for n in nodes]
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    pairs, structure = [], []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs += list(zip(recorded_nodes[i1:i2], nodes[j1:j2]))
            continue
        old = ", ".join(f"{n['name']} ({n['op']})" for n in recorded_nodes[i1:i2]) or "nothing"
        new = ", ".join(f"{n.name} ({n.target})" for n in nodes[j1:j2]) or "nothing"
        structure.append(f"{tag}: {old} -> {new}")
    return pairs, structure


def reads_as_recorded(recorded_node: dict[str, Any], node: fx.Node, recorded_nodes: dict[str, dict[str, Any]],
                      mapping: dict[str, tuple[str, str, dict[str, Any] | None]]) -> bool:
    """Whether ``node`` here reads the values its recorded partner read (through copies on either
    side): only then is running it on the recorded inputs the recorded op again. Equal op and
    shapes alone can pair a node with its twin in another layer (a false alarm if judged)."""
    def through_copies_recorded(name: str) -> str:
        while name in recorded_nodes and recorded_nodes[name]["op"] in TRANSPARENT and recorded_nodes[name]["inputs"]:
            name = recorded_nodes[name]["inputs"][0]
        return name

    def through_copies_here(source: fx.Node) -> fx.Node:
        while str(source.target) in TRANSPARENT and source.all_input_nodes:
            source = source.all_input_nodes[0]
        return source

    here = [through_copies_recorded(mapping.get(through_copies_here(source).name, ("",))[0])
            for source in node.all_input_nodes]
    return here == [through_copies_recorded(name) for name in recorded_node.get("inputs", [])]


def _value_mapping(record: dict[str, Any], pairs: list[tuple[dict[str, Any], fx.Node]], view: GraphView,
                   graph: CapturedGraph, graph_values: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, Any] | None]]:
    """Current value name -> (recorded value name, side it is stored under, its digest)."""
    mapping: dict[str, tuple[str, str, dict[str, Any] | None]] = {}
    for recorded, (name, value) in zip(record["placeholders"], zip(view.placeholder_names(), graph.inputs)):
        if recorded["meta"] == value_meta(value):
            mapping[name] = (recorded["name"], "input", recorded.get("digest"))
    constants = {(c["name"], str(c["meta"])): c for c in record.get("constants", [])}
    for name, value in graph_constants(view, graph_values):
        recorded_constant = constants.get((name, str(value_meta(value))))
        if recorded_constant is not None:  # AOT Autograd names them by position: _tensor_constant0, ...
            mapping[name] = (name, "constant", recorded_constant.get("digest"))
    for recorded_node, node in pairs:
        for recorded_value, name in zip(recorded_node["values"], tensor_value_names(node)):
            mapping[name] = (recorded_value["name"], "eager", recorded_value.get("eager"))
    return mapping


def _recorded_inputs(bundle: Bundle, graph: str, mapping: dict[str, tuple[str, str, dict[str, Any] | None]],
                     current: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """The values each node here is fed: the recorded ones (or this environment's where they are
    bit-identical to a recorded digest); and the names no recorded value stands for."""
    fed = dict(current)
    unmapped = {name for name in current if name not in mapping}
    for name, (recorded_name, side, summary) in mapping.items():
        key = f"{graph}/{recorded_name}/{side}"
        if key in bundle.values:
            fed[name] = bundle.values[key]
        elif not (summary and name in current and hasattr(current[name], "shape")
                  and bit_hash(current[name]) == summary.get("bit_hash")):
            unmapped.add(name)
    return fed, unmapped


def _judge_node(bundle: Bundle, graph: str, recorded_node: dict[str, Any], node: fx.Node, measured: NodeValues,
                not_checked: list[str]) -> OpChange | None:
    for recorded_value, name in zip(recorded_node["values"], tensor_value_names(node)):
        stored = {side: bundle.values.get(f"{graph}/{recorded_value['name']}/{side}") for side in ("eager", "fp64", "compiled")}
        if stored["eager"] is None:
            not_checked.append(f"{node.name}: beyond the value cap (digest only)")
            continue
        eager = drift(stored["eager"], stored["fp64"], measured.eager.get(name))
        compiled = (drift(stored["compiled"], stored["fp64"], measured.compiled[name])
                    if stored["compiled"] is not None and name in measured.compiled else None)
        gap = eager_gap(stored["eager"], stored["compiled"], stored["fp64"], measured.eager.get(name),
                        measured.compiled.get(name))
        if eager.changed:
            return OpChange(graph, node.name, recorded_node["name"], str(node.target), "eager", name, eager,
                            bool(compiled and compiled.changed), gap)
        if compiled is not None and compiled.changed:
            return OpChange(graph, node.name, recorded_node["name"], str(node.target), "compiled", name, compiled,
                            eager_gap=gap)
    return None


def _repro_values(change: OpChange, view: GraphView, fed: dict[str, Any]) -> dict[str, Any]:
    node = view.nodes[change.node]
    return {"change": change, "node": node, "inputs": {source.name: fed[source.name] for source in node.all_input_nodes}}
