"""Where NaN/Inf come from, and when they are a problem: pure functions over a graph's values.

The rules (the report's ``nan`` follows them):

- A node is a non-finite *origin* when its output holds NaN while none of its inputs does, or Inf
  while its inputs are finite and it did not ask for an infinity (``masked_fill(x, m, -inf)``,
  ``scalar_tensor(-inf)`` in an attention mask are intended, not bugs).
- Eager is only at fault when NaN/Inf reach the **model's outputs** (a training forward graph's
  saved tensors are not outputs): an intermediate NaN the model masks away (``where``,
  comparisons) is not a problem. Reaching the outputs, it is the model's (an origin upstream of
  them), the inputs' (NaN/Inf fed in, no origin), or nobody's (only intended infinities).
- Compiled is at fault when it turns a value non-finite where eager and fp64 are finite (the
  comparison's ``new_nonfinite``), at any node: eager and compiled disagree about it.
Nothing here runs a graph or touches global state.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Literal, Mapping

import torch
import torch.fx as fx

from .compare import TensorVerdict
from .graphs import GraphView, value_nodes


@dataclass(frozen=True)
class Nonfinite:
    """Non-finite values in a run's outputs: who makes them, and where."""

    made_by: Literal["model", "input"]
    origin: str | None  # the node that first makes them (made_by "model")
    inputs: tuple[tuple[str, int, int], ...] = ()  # (graph input, NaN count, Inf count) they come from


def flags(value: Any) -> tuple[bool, bool]:
    """(has NaN, has Inf) of a value that may be a tensor or a tuple of them."""
    if isinstance(value, torch.Tensor):
        if not (value.is_floating_point() or value.is_complex()):
            return False, False
        return bool(torch.isnan(value).any()), bool(torch.isinf(value).any())
    if isinstance(value, (tuple, list)):
        found = [flags(v) for v in value]
        return any(f[0] for f in found), any(f[1] for f in found)
    return False, False


def _counts(value: Any) -> tuple[int, int]:
    if isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex()):
        return int(torch.isnan(value).sum()), int(torch.isinf(value).sum())
    return 0, 0


def _asks_for_infinity(node: fx.Node) -> bool:
    literals = [*node.args, *node.kwargs.values()]
    return any(isinstance(v, float) and math.isinf(v) for v in literals)


def _node_output(node: fx.Node, values: Mapping[str, Any]) -> Any:
    return [values[v.name] for v in value_nodes(node) if v.name in values]


def first_origin(view: GraphView, outputs: Mapping[str, Any], inputs: Mapping[str, Any] | None = None,
                 among: Iterable[str] | None = None) -> fx.Node | None:
    """The first node (execution order) whose own output turns non-finite.

    ``outputs`` holds each node's output; ``inputs`` the values its inputs had (by default the
    same run). ``among``: only these nodes (e.g. the ancestors of an output).
    """
    inputs = outputs if inputs is None else inputs
    allowed = None if among is None else set(among)
    for node in view.compute_nodes:
        if allowed is not None and node.name not in allowed:
            continue
        if not any(v.name in outputs for v in value_nodes(node)):
            continue
        has_nan, has_inf = flags(_node_output(node, outputs))
        if not (has_nan or has_inf):
            continue
        input_flags = [flags(inputs[source.name]) for source in node.all_input_nodes if source.name in inputs]
        inputs_nan = any(f[0] for f in input_flags)
        inputs_inf = any(f[1] for f in input_flags)
        if has_nan and not inputs_nan:
            return node
        if has_inf and not (inputs_nan or inputs_inf or _asks_for_infinity(node)):
            return node
    return None


def outputs_problem(view: GraphView, values: Mapping[str, Any], outputs: Iterable[str]) -> Nonfinite | None:
    """NaN/Inf in the model's ``outputs`` (value names) of one run, and who made them; None when
    they hold none, or only infinities an op asked for."""
    bad = [name for name in outputs if any(flags(values.get(name)))]
    if not bad:
        return None
    upstream = view.ancestors(bad)
    origin = first_origin(view, values, among=upstream)
    if origin is not None:
        return Nonfinite("model", origin.name)
    fed = tuple((name, *_counts(values.get(name))) for name in view.placeholder_names()
                if name in upstream and any(flags(values.get(name))))
    return Nonfinite("input", None, fed) if fed else None


def compiled_origin(view: GraphView, verdicts: Mapping[str, TensorVerdict]) -> str | None:
    """The first node (execution order) whose compiled output turns non-finite where eager's and
    fp64's are finite (per value node, from the per-node check)."""
    for node in view.compute_nodes:
        if any(verdicts[v.name].new_nonfinite for v in value_nodes(node) if v.name in verdicts):
            return node.name
    return None


def turned_nonfinite(eager: Mapping[str, Any], other: Mapping[str, Any], outputs: Iterable[str]) -> bool:
    """Whether any of ``outputs`` holds NaN/Inf in ``other`` where it is finite in ``eager``."""
    for name in outputs:
        a, b = eager.get(name), other.get(name)
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and b.is_floating_point() \
                and a.shape == b.shape and bool((torch.isfinite(a) & ~torch.isfinite(b)).any()):
            return True
    return False
