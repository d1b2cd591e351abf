"""The op whose work a window's compiled code drops.

A window diverges only when its nodes compile together, and :func:`~.windows.window_culprit`
names it by the node whose own output departs. Where the fused code leaves out a node's work
altogether (pytorch#185509: a max-pool backward's ``scatter_add`` into a zero buffer, fused with
the ``add`` that reads the buffer, and the kernel adds the zeros; the scatter's indices are not
even among its arguments), that is the node that reads the missing work, not the node whose work
is missing. So each window node in graph order is replayed eagerly with its work skipped, its
value being the input it updates (its first tensor input, same shape and dtype: a scatter's
destination, an addend): the first whose skipped work gives the window's compiled outputs, where
eager's differ, is the op the compiler drops. Work skipped early explains everything downstream of
it: where two skips give the same values (the scatter, then the ``add`` of its zeros) the earlier
is named. Only proposes :class:`~bisect_engine.verdict.candidate.DroppedWorkCandidate`\\ s (eager
replays, no compile) to the run's search; each node's replay is judged once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

from ..verdict.candidate import DroppedWorkCandidate
from ..verdict.compare import Outcome, material_difference
from ..verdict.graphs import value_nodes
from ..verdict.oracle import GraphContext, SubgraphVerdict
from ..verdict.replay import reproduces
from .protocol import GraphSearch


@dataclass(frozen=True)
class DroppedWork:
    """Window node ``node``'s work, skipped (its value left as its input ``kept``'s), gives the
    window's compiled ``outputs`` where eager's differ: the compiled code drops it."""

    node: str
    kept: str
    outputs: tuple[str, ...]
    tried: int  # nodes replayed with their work skipped
    output: str = ""  # the first output the skip changes: its largest |replay - compiled| and |eager - compiled|
    max_abs_diff: float = 0.0
    eager_max_abs_diff: float = 0.0


def kept_input(context: GraphContext, name: str) -> str | None:
    """The input ``name``'s op updates: its first tensor input, when that has the node's shape and
    dtype (a scatter's destination, an addend). None for a node of several values, or whose first
    tensor input is another kind of value (a mask, an index, a view's other shape)."""
    node = context.view.nodes[name]
    if value_nodes(node) != [node]:
        return None
    value = context.eager_values.get(name)
    first = next((arg for arg in node.args if isinstance(arg, fx.Node)
                  and isinstance(context.eager_values.get(arg.name), torch.Tensor)), None)
    if first is None or not isinstance(value, torch.Tensor):
        return None
    kept = context.eager_values[first.name]
    return first.name if (kept.shape, kept.dtype, kept.device) == (value.shape, value.dtype, value.device) else None


def find_dropped_work(context: GraphContext, search: GraphSearch, window: tuple[str, ...],
                      verdict: SubgraphVerdict) -> DroppedWork | None:
    """The first window node (graph order) whose work, skipped in an eager replay, gives the
    compiled window's outputs (``verdict``: the window's mismatch, with its compiled values) where
    eager's differ materially; None where no skip does, or the window draws random numbers (a
    replay draws others)."""
    if verdict.outcome is not Outcome.MISMATCH or set(context.view.random_names()) & set(window):
        return None
    compiled: dict[str, Any] = verdict.compiled_values
    tried = 0
    for name in window:
        kept = kept_input(context, name)
        if kept is None:
            continue
        tried += 1
        replay = search.judge(DroppedWorkCandidate(context.name, frozenset(window), name, kept,
                                                   purpose=f"{name}'s work skipped"))
        if replay.outcome is Outcome.MISMATCH and reproduces(context, replay.compiled_values, compiled):
            output = replay.failing_outputs[0]
            near = material_difference(replay.compiled_values[output], compiled[output]).max_abs
            far = material_difference(context.eager_values.get(output), compiled[output]).max_abs
            return DroppedWork(name, kept, tuple(replay.compiled_values), tried, output, near, far)
    return None
