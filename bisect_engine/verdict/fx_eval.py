"""Eager evaluation of FX graphs, in the model's dtype or in fp64, recording every node's value.

Depends on torch and the standard library only: the repro renderer embeds this file verbatim in
every emitted ``repro.py``, so a repro computes its references with exactly the tool's code.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import torch
import torch.fx as fx

log = logging.getLogger(__name__)

_FLOATING = (torch.float16, torch.bfloat16, torch.float32)


def clone_value(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return faithful_copy(value.detach())
    if isinstance(value, (tuple, list)):
        return type(value)(clone_value(v) for v in value)
    return value


# A strided view is copied with its layout while the storage span it covers is at most this many
# times its elements; a wider span (one column of a large matrix) is copied dense instead.
SPAN_LIMIT = 4


def faithful_copy(tensor: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A copy of ``tensor`` (cast to ``dtype``) with its sizes and strides.

    ``clone()`` and ``to()`` keep the strides of a dense tensor but lay out an expanded or padded
    view afresh, and some kernels check their inputs' strides: memory-efficient attention refuses
    a bias whose row stride is not a multiple of 4 (an expanded, padded mask on CUDA). A value
    recorded from an eager run and fed again must be laid out as the op first saw it, so such a
    view is copied as the storage span it covers and viewed with its own strides."""
    dtype = dtype or tensor.dtype
    if tensor.layout != torch.strided or tensor.is_contiguous() or tensor.numel() == 0 or any(s < 0 for s in tensor.stride()):
        return tensor.clone() if dtype == tensor.dtype else tensor.to(dtype)
    span = 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))
    if span > SPAN_LIMIT * tensor.numel():
        return tensor.clone() if dtype == tensor.dtype else tensor.to(dtype)
    if span == tensor.numel():  # no gaps: a dense (permuted) tensor, whose strides clone() keeps
        dense = tensor.clone() if dtype == tensor.dtype else tensor.to(dtype)
        if dense.stride() == tensor.stride():
            return dense
    covered = torch.as_strided(tensor, (span,), (1,), tensor.storage_offset()).to(dtype, copy=True)
    return torch.as_strided(covered, tensor.shape, tensor.stride(), 0)


def fresh_inputs(values: Any) -> Any:
    """A private copy of a model's arguments (any nesting): every tensor cloned, keeping whether it
    requires grad, so a model that writes to its inputs changes nobody else's."""
    import torch.utils._pytree as pytree

    def copy(tensor: torch.Tensor) -> torch.Tensor:
        cloned = tensor.detach().clone()
        cloned = cloned.requires_grad_() if tensor.requires_grad and cloned.is_floating_point() else cloned
        # Dynamo's marks (torch._dynamo.mark_dynamic, mark_static, ...) are attributes of the
        # tensor object: the copy keeps them, so it compiles with the dynamism the user asked for.
        for name, mark in getattr(tensor, "__dict__", {}).items():
            if name.startswith("_dynamo_"):
                setattr(cloned, name, mark.copy() if isinstance(mark, (set, dict, list)) else mark)
        return cloned

    return pytree.tree_map_only(torch.Tensor, copy, values)


class _RecordingInterpreter(fx.Interpreter):
    """Runs a graph node by node and keeps every node's value (cloned, detached)."""

    def __init__(self, graph_module: fx.GraphModule, upcast: bool, overrides: dict[str, Any]):
        super().__init__(graph_module, garbage_collect_values=False)
        self.upcast = upcast
        self.overrides = overrides
        self.values: dict[str, Any] = {}

    def run_node(self, node: fx.Node) -> Any:
        if node.op == "placeholder":  # always consume the positional input, even when overridden
            result = super().run_node(node)
            result = self.overrides.get(node.name, result)
        elif node.name in self.overrides:
            result = self.overrides[node.name]
        elif self.upcast and node.op == "call_function":
            result = self._run_fp64(node)
        else:
            result = super().run_node(node)
        self.values[node.name] = clone_value(result)
        return result

    @staticmethod
    def _target(node: fx.Node) -> Callable[..., Any]:
        assert callable(node.target), node.format_node()  # call_function nodes only
        return node.target

    def _run_fp64(self, node: fx.Node) -> Any:
        args, kwargs = self.fetch_args_kwargs_from_env(node)
        try:
            return self._target(node)(*to_fp64(args), **_fp64_kwargs(to_fp64(kwargs)))
        except Exception as error:  # an op without an fp64 kernel: its eager result stands in
            log.debug("fp64 failed for %s: %s", node.name, error)
            args = fx.node.map_arg(node.args, self._in_model_dtype)
            kwargs = fx.node.map_arg(node.kwargs, self._in_model_dtype)
            return to_fp64(self._target(node)(*args, **kwargs))

    def _in_model_dtype(self, source: fx.Node) -> Any:
        """An input's fp64 value cast back to the dtype the graph recorded for it."""
        value = self.env[source]
        recorded = source.meta.get("val", source.meta.get("example_value"))
        if not isinstance(value, torch.Tensor) or value.dtype != torch.float64:
            return value
        # No record (a hand-built graph): float32, the dtype every floating kernel has.
        return faithful_copy(value, recorded.dtype if isinstance(recorded, torch.Tensor) else torch.float32)



def to_fp64(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype in _FLOATING:
        return faithful_copy(value.detach(), torch.float64)
    if isinstance(value, (tuple, list)):
        return type(value)(to_fp64(v) for v in value)
    if isinstance(value, dict):
        return {k: to_fp64(v) for k, v in value.items()}
    return value


def _fp64_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    if kwargs.get("dtype") in _FLOATING:
        return {**kwargs, "dtype": torch.float64}
    return kwargs


def interpret(
    graph_module: fx.GraphModule,
    inputs: Sequence[Any],
    *,
    upcast: bool = False,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every node's value, running eagerly (``upcast``: every floating op in fp64).

    ``overrides`` replaces named nodes' values as they are produced (a replay that injects one
    node's compiled output).
    """
    interpreter = _RecordingInterpreter(graph_module, upcast, overrides or {})
    with torch.no_grad():
        interpreter.run(*(to_fp64(list(inputs)) if upcast else inputs))
    return interpreter.values


def run_graph(graph_module: fx.GraphModule, inputs: Sequence[Any], *, upcast: bool = False,
              overrides: dict[str, Any] | None = None) -> list[Any]:
    """A graph's outputs, eagerly; ``upcast`` runs every floating op in fp64."""
    values = interpret(graph_module, inputs, upcast=upcast, overrides=overrides)
    output_node = next(n for n in reversed(graph_module.graph.nodes) if n.op == "output")
    outputs = fx.node.map_arg(output_node.args[0], lambda n: values[n.name])
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
