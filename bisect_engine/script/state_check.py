"""Script mode: graphs that write the tensors they hold (a compiled optimizer step).

``torch.compile(opt.step)`` gives a Dynamo graph with no outputs whose parameters and optimizer
state are ``get_attr`` attributes it writes in place. On the first checked call the graph is
judged with every tensor attribute lifted to an input (:func:`~bisect_engine.verdict.state.lift_attributes`):
eager and fp64 write copies, the compiled call writes the live tensors (the program's one step),
and every attribute the eager run wrote is compared like an input written in place. A graph that
writes none of its attributes keeps its own form. The live tensors are read, never written, by
the tool.
"""
from __future__ import annotations

import gc
import logging
from typing import Any, Sequence

import torch
import torch.fx as fx

from ..verdict.state import lift_attributes, placeholder_name
from .call_check import References

log = logging.getLogger(__name__)


def call_arguments(record: Any, args: Sequence[Any]) -> list[Any]:
    """The arguments the record's (possibly lifted) graph takes: the call's, then the live state.
    On the first call of a graph holding tensors, its graph becomes the lifted one (tentatively:
    see :func:`settle`)."""
    if not record.live_state:
        return list(args)
    if record.state_targets is None:
        record.state_targets = list(record.live_state)
        record.unlifted = record.graph_module
        record.graph_module = lift_attributes(record.graph_module, record.state_targets)
    return list(args) + [record.live_state[target] for target in record.state_targets]


def settle(record: Any, references: References, arguments: int) -> References:
    """After the first reference run of a lifted graph: keep the lifted form only when the graph
    wrote one of its attributes; else the graph goes back to its own form and the references
    drop the lifted inputs."""
    if record.unlifted is None:
        return references
    if any(i >= arguments for i in references.mutated):
        written = [record.state_targets[i - arguments] for i in references.mutated if i >= arguments]
        record.notes.append(f"the graph writes {len(written)} tensor(s) it holds (get_attr: parameters, "
                            "buffers, optimizer state); each is compared, eager vs fp64 vs compiled, on copies")
        record.unlifted = None
        return references
    record.graph_module, record.unlifted, record.state_targets = record.unlifted, None, []
    return References(references.eager, references.fp64, references.eager_inputs[:arguments],
                      references.fp64_inputs[:arguments], references.mutated, references.random,
                      references.fp64_error)


def state_names(graph_module: fx.GraphModule, live_state: dict[str, torch.Tensor]) -> dict[str, str]:
    """Lifted placeholder name -> what the program calls that tensor (``parameter up.weight``,
    ``exp_avg_sq of up.weight``), found through the program's optimizers and modules (best
    effort: a tensor none of them holds keeps Dynamo's name)."""
    labels = _program_labels()
    names: dict[str, str] = {}
    by_placeholder = {placeholder_name(target): tensor for target, tensor in live_state.items()}
    for node in graph_module.graph.nodes:
        tensor = by_placeholder.get(str(node.target)) if node.op == "placeholder" else None
        if tensor is not None and id(tensor) in labels:
            names[str(node.target)] = labels[id(tensor)]
    return names


def _dynamo_graph(module: torch.nn.Module) -> bool:
    """Dynamo's graph modules (and their compiled wrappers) hold the parameters too, by its names."""
    return isinstance(module, fx.GraphModule) or isinstance(module.__dict__.get("_modules", {}).get("_orig_mod"),
                                                            fx.GraphModule)


def _program_labels() -> dict[int, str]:
    """id(tensor) -> a name, for every parameter of the program's modules and every tensor of its
    optimizers' state; the longest module path wins (the root model's, not a submodule's)."""
    parameters: dict[int, str] = {}
    optimizers = []
    for obj in gc.get_objects():
        kind = type(obj)  # not isinstance: it reads __class__ (weak proxies raise, deprecated modules warn)
        if issubclass(kind, torch.nn.Module) and not _dynamo_graph(obj):
            for name, parameter in obj.named_parameters():
                name = name.replace("_orig_mod.", "")  # a torch.compile'd module's wrapper
                if len(name) > len(parameters.get(id(parameter), "")):
                    parameters[id(parameter)] = name
        elif issubclass(kind, torch.optim.Optimizer):
            optimizers.append(obj)
    labels = {key: f"parameter {name}" for key, name in parameters.items()}
    for optimizer in optimizers:
        for group_index, group in enumerate(optimizer.param_groups):
            for index, parameter in enumerate(group["params"]):
                owner = parameters.get(id(parameter), f"param_groups[{group_index}]['params'][{index}]")
                labels.setdefault(id(parameter), f"parameter {owner}")
                for key, value in optimizer.state.get(parameter, {}).items():
                    if isinstance(value, torch.Tensor):
                        labels[id(value)] = f"optimizer state {key!s} of {owner}"
    return labels


NOTHING_COMPARED = ("a checked call compared nothing (the graph returns no tensor and writes none it can be "
                    "judged on): not checked, never a match")


def state_labels(record: Any) -> dict[str, str]:
    """The program's names for a lifted graph's state inputs, looked up once per graph."""
    if record.state_targets and not record.state_labels:
        try:
            record.state_labels = state_names(record.graph_module, record.live_state) or {"": ""}
        except Exception as error:  # noqa: BLE001 - names are a courtesy; Dynamo's stay
            log.debug("naming the state failed: %s", error)
            record.state_labels = {"": ""}
    return record.state_labels


def not_checked_lines(script: dict[str, Any]) -> str:
    """Summary lines for the graphs whose checked calls compared nothing."""
    unchecked = [g for g in script.get("graphs", []) if g.get("outcome") == "not_checked"]
    named = [f"\n  {g['graph']}: {note}" for g in unchecked for note in g.get("notes", []) if note.startswith("not checked:")]
    graphs = [g["graph"] for g in unchecked if not any(n.startswith("not checked:") for n in g.get("notes", []))]
    if not graphs:
        return "".join(named) + ("; exit status 4" if named else "")
    return "".join(named) + (f"\n  not checked: {', '.join(graphs)}: the checked call compared nothing (no output, "
                             "no tensor written); exit status 4")
