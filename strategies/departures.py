""""Compiled differs from eager but is closer to fp64": not a bug by the fp64 rule, never silent.

Inductor often computes more exactly than eager (a fused bf16 chain kept in fp32 where eager
rounds after every op). Such a value is no culprit, but the user sees different numbers. This
strategy lists them (:func:`~bisect_engine.verdict.compare.closer_to_fp64`): per node when the
per-node check ran, else per output of the whole graph. One fp64 replay (no compile) gives the
reference; then one candidate, the whole graph under ``EAGER_ROUNDING`` (one compile), says
whether that setting makes compiled follow eager's rounding.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..verdict.candidate import GraphCandidate, Switch
from ..verdict.compare import Departure, Outcome, closer_to_fp64, compare_tensor
from ..verdict.fx_eval import interpret
from ..verdict.graphs import value_nodes
from .amplify import random_values
from ..verdict.oracle import GraphContext

# Inductor's setting that rounds intermediate low-precision values as eager does.
EAGER_ROUNDING = Switch.config("config", "emulate_precision_casts", {"emulate_precision_casts": True})
MAX_LISTED = 16


@dataclass(frozen=True)
class DepartedValue:
    value: str  # the value (node or output) that departs
    node: str  # its compute node
    scope: str  # "node": judged on eager inputs; "graph": an output of the whole graph
    departure: Departure
    elements: int


def find_departures(context: GraphContext, compiled_values: dict[str, Any], scope: str) -> list[DepartedValue]:
    """Values whose compiled departs from eager beyond the floors while closer to fp64."""
    random = random_values(context)  # compiled draws other numbers: data, not a difference
    departing = [name for name, value in compiled_values.items()
                 if name not in random and compare_tensor(context.eager_values.get(name), context.eager_values.get(name), value,
                                   context.tolerance).outcome is Outcome.MISMATCH]
    if not departing:
        return []
    fp64 = interpret(context.captured.graph_module, context.captured.inputs, upcast=True)
    producers = {v.name: node.name for node in context.view.compute_nodes for v in value_nodes(node)}
    found = []
    for name in departing:
        eager, compiled = context.eager_values.get(name), compiled_values[name]
        departure = closer_to_fp64(eager, fp64.get(name), compiled, context.tolerance)
        if departure is not None:
            elements = int((eager != compiled).sum())
            found.append(DepartedValue(name, producers.get(name, name), scope, departure, elements))
    return found[:MAX_LISTED]


def follows_eager_with(context: GraphContext, search: Any, switch: Switch = EAGER_ROUNDING) -> bool:
    """One compile of the whole graph under ``switch``: do its outputs then match eager's
    (eager taken as the reference, within the floors)?"""
    names = context.view.compilable_names(keep_random=context.rng_strict)
    verdict = search.judge(GraphCandidate(context.name, frozenset(names), switch=switch, purpose="eager rounding"))
    if verdict.outcome is Outcome.CRASH or not verdict.compiled_values:
        return False
    return all(compare_tensor(context.eager_values.get(n), context.eager_values.get(n), v,
                              context.tolerance).outcome is Outcome.MATCH
               for n, v in verdict.compiled_values.items())
