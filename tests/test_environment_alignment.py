"""localise/environments.py alignment, no compile: a copy (clone) dropped by a newer Dynamo / AOT
Autograd must not shift a block of ops onto its twin in another layer, and a node paired by op and
shapes alone is judged only when it reads what its recorded partner read."""
from __future__ import annotations

from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from bisect_engine.localise.environments import _align, align, reads_as_recorded
from bisect_engine.localise.env_record import value_meta
from bisect_engine.localise.measure_env import tensor_value_names
from bisect_engine.verdict.graphs import GraphView

aten = torch.ops.aten


def _with_copies(x: torch.Tensor) -> torch.Tensor:  # layer 1 holds copies (as an older version made it)
    x = aten.tanh(aten.clone(aten.mul(x, 2.0)))
    x = aten.tanh(aten.clone(aten.mul(x, 2.0)))
    return aten.tanh(aten.mul(aten.tanh(aten.mul(x, 2.0)), 2.0))


def _without_copies(x: torch.Tensor) -> torch.Tensor:
    for _ in range(4):
        x = aten.tanh(aten.mul(x, 2.0))
    return x


def _graph(function: Any) -> tuple[GraphView, dict[str, Any]]:
    module = make_fx(function, tracing_mode="fake")(torch.randn(4))
    view = GraphView(module)
    return view, {n.name: n.meta.get("val") for n in module.graph.nodes}


def _recorded(view: GraphView, values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": n.name, "op": str(n.target), "inputs": [s.name for s in n.all_input_nodes],
             "values": [{"name": v, "meta": value_meta(values.get(v))} for v in tensor_value_names(n)]}
            for n in view.compute_nodes]


def _mapping(pairs: list[tuple[dict[str, Any], Any]], old: GraphView, new: GraphView) -> dict[str, Any]:
    mapping = {a: (b, "input", None) for a, b in zip(new.placeholder_names(), old.placeholder_names())}
    return {**mapping, **{node.name: (record["name"], "eager", None) for record, node in pairs}}


def test_dropped_copies_keep_every_op_on_its_own_layer() -> None:
    old, old_values = _graph(_with_copies)
    new, new_values = _graph(_without_copies)
    recorded = _recorded(old, old_values)
    pairs, structure = align(recorded, new, new_values)
    assert len(pairs) == len(new.compute_nodes) == 8
    assert structure and all("clone" in line and "-> nothing" in line for line in structure)
    mapping, by_name = _mapping(pairs, old, new), {n["name"]: n for n in recorded}
    assert all(reads_as_recorded(record, node, by_name, mapping) for record, node in pairs)


def test_a_twin_paired_by_op_and_shapes_alone_is_not_judged() -> None:
    old, old_values = _graph(_with_copies)
    new, new_values = _graph(_without_copies)
    recorded = _recorded(old, old_values)
    pairs, _ = _align(recorded, new.compute_nodes, new_values)  # copies in the sequence: the twin layer wins
    mapping, by_name = _mapping(pairs, old, new), {n["name"]: n for n in recorded}
    skipped = [(record["name"], node.name) for record, node in pairs if not reads_as_recorded(record, node, by_name, mapping)]
    positions = {n["name"]: i for i, n in enumerate(n for n in recorded if "clone" not in n["op"])}
    here = {n.name: i for i, n in enumerate(new.compute_nodes)}
    # the shifted block's first op reads from outside it: a twin of another layer, never judged (the ops
    # inside the block that are judged read their partner's own recorded inputs, so their verdict holds)
    assert skipped and all(positions[a] != here[b] for a, b in skipped)
