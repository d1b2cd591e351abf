"""Amplified divergences: the op whose tiny compiled difference the model blows up.

When the whole graph's outputs differ *materially* between eager and compiled
(:func:`~bisect_engine.verdict.compare.material_difference`) but no node is wrong by the fp64
rule, the per-node check still holds every node's compiled value on eager inputs. This strategy
proposes sets of those values to inject into an otherwise eager replay of the graph
(:class:`~bisect_engine.verdict.candidate.ReplayCandidate`, judged by the run's one search, no
compile): the first prefix (graph order) of differing nodes whose injection reproduces the
output difference (``first_failing_prefix``), then narrowed to the node that tips it (alone, or
with the fewest others, ``ddmin``). One more replay of that node alone walks the path from it to
the output and names the *amplifiers*: nodes whose output changes by orders of magnitude more
than their inputs (a quantising op turning a float difference into a different integer or
boolean, a value turning non-finite, or a relative change ``JUMP`` times its inputs').
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.fx as fx

from ..search import ddmin, first_failing_prefix
from ..verdict.candidate import ReplayCandidate
from ..verdict.compare import Difference, Outcome, elementwise_change, material_difference, rounding_unit
from ..verdict.graphs import value_nodes
from ..verdict.oracle import GraphContext
from ..verdict.replay import injected_values, replay
from .protocol import GraphSearch

JUMP = 2.0 ** 10  # an amplifier's relative change over its inputs' (three orders of magnitude)
MAX_AMPLIFIERS = 4


@dataclass(frozen=True)
class Amplifier:
    node: str
    why: str  # "quantises" | "nonfinite" | "jump"
    change: float  # the largest elementwise relative change of its output (inf: finiteness changed)
    inputs_change: float  # the largest among its inputs on the path


@dataclass(frozen=True)
class Amplification:
    culprit: str
    together: tuple[str, ...]  # other nodes whose compiled values it needs (usually none)
    own: Difference  # the culprit's compiled value against eager's, on eager inputs
    own_ulps: float  # its largest elementwise difference in ulps of its dtype
    output: str  # the output that differs materially
    output_difference: Difference
    path: tuple[str, ...]  # nodes from the culprit to that output, graph order
    amplifiers: tuple[Amplifier, ...]
    replays: int


def material_outputs(context: GraphContext, compiled_values: dict[str, Any], outputs: list[str]) -> list[tuple[str, Difference]]:
    """The outputs whose compiled value differs materially from eager's."""
    found = []
    for name in outputs:
        if name in compiled_values:
            difference = context.material_output_difference(name, compiled_values[name])
            if difference is not None:
                found.append((name, difference))
    return found


def differing_nodes(context: GraphContext, checked: tuple[str, ...], compiled_values: dict[str, Any]) -> list[str]:
    """Checked nodes whose compiled value on eager inputs is not bit-for-bit eager's (graph order)."""
    differing = []
    random = random_values(context)
    for name in checked:
        for value in value_nodes(context.view.nodes[name]):
            if value.name in compiled_values and value.name not in random and material_difference(
                    context.eager_values.get(value.name), compiled_values[value.name]).elements:
                differing.append(name)
                break
    return differing


def random_values(context: GraphContext) -> set[str]:
    """Values random ops draw, and the RNG state attention kernels return: compiled draws other
    numbers, never a difference to attribute."""
    return context.not_results


def find_amplification(context: GraphContext, search: GraphSearch, checked: tuple[str, ...],
                       compiled_values: dict[str, Any], outputs: list[str]) -> Amplification | None:
    """The first node whose compiled value, injected into an eager replay, makes ``outputs``
    differ materially; None when no injection of the check's values does."""
    candidates = differing_nodes(context, checked, compiled_values)
    if not candidates:
        return None
    before = search.calls

    def reproduces(names: Any) -> bool:
        candidate = ReplayCandidate(context.name, frozenset(names), tuple(outputs), purpose="amplify")
        return search.judge(candidate).outcome is Outcome.MISMATCH

    if not reproduces(candidates):
        return None
    length = first_failing_prefix(len(candidates), lambda k: reproduces(candidates[:k]))
    assert length is not None
    culprit = candidates[length - 1]
    together: tuple[str, ...] = ()
    if not reproduces((culprit,)):
        needed = ddmin(candidates[:length], reproduces)
        together = tuple(n for n in needed if n != culprit)
    values = replay(context, injected_values(context, (culprit, *together), compiled_values))
    output, difference = next(((n, d) for n, d in ((n, context.output_difference(n, values.get(n)))
                                                   for n in outputs) if d.material),
                              (outputs[0], Difference(False)))
    path = path_between(context, culprit, output)
    own_value = value_nodes(context.view.nodes[culprit])[0].name
    eager_own, compiled_own = context.eager_values.get(own_value), compiled_values.get(own_value)
    return Amplification(
        culprit, together, material_difference(eager_own, compiled_own), _in_ulps(eager_own, compiled_own),
        output, difference, path, amplifiers(context, path, values), search.calls - before + 1,
    )


def _in_ulps(eager: Any, compiled: Any) -> float:
    change = elementwise_change(eager, compiled)
    if isinstance(eager, torch.Tensor) and eager.is_floating_point() and math.isfinite(change):
        return change / rounding_unit(eager.dtype)
    return change


def path_between(context: GraphContext, culprit: str, output: str) -> tuple[str, ...]:
    """The compute nodes downstream of ``culprit`` that ``output`` depends on, and the culprit."""
    view = context.view
    target = view.nodes.get(output)
    if target is None:
        return (culprit,)
    ancestors: set[str] = set()
    stack = [target]
    while stack:
        node = stack.pop()
        if node.name in ancestors:
            continue
        ancestors.add(node.name)
        stack.extend(node.all_input_nodes)
    descendants: set[str] = set()
    stack = [view.nodes[culprit]]
    while stack:
        node = stack.pop()
        if node.name in descendants:
            continue
        descendants.add(node.name)
        stack.extend(node.users)
    on_path = ancestors & descendants
    return tuple(n.name for n in view.compute_nodes if n.name in on_path and not _is_getitem(n))


def _is_getitem(node: fx.Node) -> bool:
    import operator

    return node.target is operator.getitem


def amplifiers(context: GraphContext, path: tuple[str, ...], values: dict[str, Any],
               roots: int = 1) -> tuple[Amplifier, ...]:
    """Nodes on ``path`` (after its first ``roots``: the culprit, or the inputs a replay substituted)
    whose change in the replay jumps over their inputs'."""
    eager = context.eager_values
    return amplifiers_of(context, path, lambda v: elementwise_change(eager.get(v), values.get(v)), roots)


def amplifiers_of(context: GraphContext, path: tuple[str, ...], change_of: Callable[[str], float],
                  roots: int = 1) -> tuple[Amplifier, ...]:
    """:func:`amplifiers` from each value's elementwise change in the replay (``change_of``, by
    value name: the value nodes of ``path``'s nodes), so a streamed replay holds no value for it."""
    view, eager = context.view, context.eager_values
    change = {root: max(change_of(v.name) for v in value_nodes(view.nodes[root])) for root in path[:roots]}
    found = []
    for name in path[roots:]:
        node = view.nodes[name]
        outputs = [v.name for v in value_nodes(node)]
        change[name] = max(change_of(v) for v in outputs)
        sources = [_producer_name(n) for n in node.all_input_nodes]
        inputs_change = max((change.get(s, 0.0) for s in sources), default=0.0)
        why = _amplifies(node, outputs, eager, sources, change[name], inputs_change)
        if why:
            found.append(Amplifier(name, why, change[name], inputs_change))
    return tuple(found[:MAX_AMPLIFIERS])


def _producer_name(node: fx.Node) -> str:
    if _is_getitem(node) and node.args and isinstance(node.args[0], fx.Node):
        return node.args[0].name
    return node.name


def _amplifies(node: fx.Node, outputs: list[str], eager: dict[str, Any], sources: list[str],
               change: float, inputs_change: float) -> str:
    if change == 0.0 or inputs_change == 0.0:
        return ""
    if math.isinf(change) and math.isfinite(inputs_change):
        return "nonfinite"
    exact_out = any(isinstance(eager.get(v), torch.Tensor) and not eager[v].is_floating_point() for v in outputs)
    float_in = any(isinstance(eager.get(s), torch.Tensor) and eager[s].is_floating_point() for s in sources)
    if exact_out and float_in:
        return "quantises"
    if math.isfinite(change) and change > JUMP * inputs_change:
        return "jump"
    return ""
