"""``bisect-accuracy record``: capture a model's aten graphs and write what this environment
computes for each node (see :mod:`bisect_engine.load.bundle` for the format)."""
from __future__ import annotations

from typing import Any, Callable, Mapping

import torch
import torch.utils._pytree as pytree
from torch._inductor import config as inductor_config

from ..errors import ModelError
from ..load.bundle import DEFAULT_VALUE_CAP, bundle_files, environment_facts, file_sha256
from ..load.capture import capture, nothing_captured
from ..load.model_file import ModelSpec
from ..verdict.compiler import Compiler
from ..verdict.digest import digest
from ..verdict.fx_eval import fresh_inputs
from ..verdict.graphs import CapturedGraph, GraphView
from ..verdict.judgement import Oracle
from ..verdict.oracle import GraphContext
from .measure_env import NodeValues, checkable_names, measure, tensor_value_names

SIDES = ("eager", "fp64", "compiled")


def capture_graphs(spec: ModelSpec, seed: int = 0) -> list[CapturedGraph]:
    torch.manual_seed(seed)
    captured = [graph for graph in capture(spec.model, spec.inputs, spec.loss_fn, spec.dynamic)[0] if graph.called]
    if not captured:
        raise ModelError(nothing_captured(spec.model))
    return captured


def model_outputs(spec: ModelSpec, seed: int = 0) -> list[torch.Tensor]:
    """The model's eager outputs (tensors, flattened), as a plain call returns them."""
    torch.manual_seed(seed)
    with torch.no_grad():
        output = spec.model(*fresh_inputs(spec.inputs))
    return [leaf.detach() for leaf in pytree.tree_leaves(output) if isinstance(leaf, torch.Tensor)]


def record(spec: ModelSpec, write: Callable[[str, bytes], Any], value_cap: int = DEFAULT_VALUE_CAP, seed: int = 0,
           compiler: Compiler | None = None, device: str = "cpu") -> dict[str, Any]:
    """Write the bundle's files with ``write(name, data)`` (the output folder's); returns its manifest
    (without the tensors)."""
    model = {"path": str(spec.path), "name": spec.path.name, "sha256": file_sha256(spec.path)}
    settings = {"inductor_config_set_by_model": _plain(spec.inductor_config), "backend": spec.backend,
                "dynamic": spec.dynamic}
    return record_graphs(capture_graphs(spec, seed), model_outputs(spec, seed), write, model, settings,
                         value_cap, seed, compiler, device)


def record_graphs(captured: list[CapturedGraph], outputs: list[torch.Tensor], write: Callable[[str, bytes], Any],
                  model: dict[str, Any], settings: dict[str, Any], value_cap: int = DEFAULT_VALUE_CAP, seed: int = 0,
                  compiler: Compiler | None = None, device: str = "cpu",
                  patches: Mapping[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The bundle of graphs captured already (a model file's, or those a script compiled):
    every op measured alone; ``patches``: the Inductor config each graph was compiled under (a
    script's ``torch.compile(mode=, options=)``), by graph name."""
    compiler = compiler or Compiler()
    values: dict[str, Any] = {}
    graphs = []
    for graph in captured:
        with inductor_config.patch((patches or {}).get(graph.name, {})):
            context = GraphContext.from_captured(graph, Oracle(seed=seed))
            measured = measure(context, compiler, label=f"record {graph.name}")
        graphs.append(graph_record(graph, context, measured, values, value_cap))
    for index, output in enumerate(outputs):
        _keep(values, f"model/out{index}", output, value_cap)
    manifest = {
        "model": model,
        "environment": environment_facts(device),
        "settings": {"value_cap": value_cap, "seed": seed, **settings},
        "graphs": graphs,
        "model_outputs": [f"model/out{index}" for index in range(len(outputs))],
        "compiles": compiler.compiles,
    }
    for name, data in bundle_files(manifest, values):
        write(name, data)
    return manifest


def graph_record(graph: CapturedGraph, context: GraphContext, measured: NodeValues, values: dict[str, Any],
                 value_cap: int) -> dict[str, Any]:
    view = context.view
    placeholders = []
    for name, value in zip(view.placeholder_names(), graph.inputs):
        placeholders.append({"name": name, "meta": value_meta(value),
                             "digest": _keep(values, f"{graph.name}/{name}/input", value, value_cap)})
    constants = [{"name": name, "meta": value_meta(value), "digest": _keep(values, f"{graph.name}/{name}/constant", value, value_cap)}
                 for name, value in graph_constants(view, context.eager_values)]
    checkable = set(checkable_names(view))
    nodes = []
    for node in view.compute_nodes:
        entry: dict[str, Any] = {"name": node.name, "op": str(node.target),
                                 "inputs": [source.name for source in node.all_input_nodes],
                                 "checked": node.name in checkable, "values": []}
        for value_name in tensor_value_names(node):
            record_value: dict[str, Any] = {"name": value_name, "meta": value_meta(context.eager_values.get(value_name))}
            for side, side_values in (("eager", context.eager_values), ("fp64", measured.fp64),
                                      ("compiled", measured.compiled)):
                if value_name in side_values:
                    record_value[side] = _keep(values, f"{graph.name}/{value_name}/{side}", side_values[value_name], value_cap)
            entry["values"].append(record_value)
        nodes.append(entry)
    return {"name": graph.name, "kind": graph.kind, "code": graph.graph_module.code,
            "placeholders": placeholders, "constants": constants, "nodes": nodes, "compile_error": measured.compile_error}


def graph_constants(view: GraphView, values: dict[str, Any]) -> list[tuple[str, torch.Tensor]]:
    """The tensors a graph holds as attributes (``get_attr``: AOT Autograd's ``_tensor_constantN``),
    in graph order: recorded like inputs, so an op reading one is judged too."""
    return [(node.name, values[node.name]) for node in view.graph_module.graph.nodes
            if node.op == "get_attr" and isinstance(values.get(node.name), torch.Tensor)]


def value_meta(value: Any) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        return {"shape": list(value.shape), "dtype": str(value.dtype)}
    return {"type": type(value).__name__, "repr": repr(value)[:80]}


def _keep(values: dict[str, Any], key: str, value: Any, value_cap: int) -> dict[str, Any] | None:
    """Store ``value`` under ``key`` when within the cap; its digest either way (None: no tensor)."""
    if not isinstance(value, torch.Tensor) or value.is_sparse:
        return None
    summary = {**digest(value).to_json(), "stored": value.numel() <= value_cap}
    if summary["stored"]:
        values[key] = value.detach().cpu().clone()
    return summary


def _plain(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v if isinstance(v, (bool, int, float, str, type(None))) else repr(v) for k, v in config.items()}
