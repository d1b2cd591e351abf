"""Per-node verdicts: every checkable node compiled at once, each fed its reference inputs.

One compile checks all N nodes (:meth:`GraphContext.judge_nodes`): nodes that Inductor would
compile to the same kernel (same op, constants and input metadata) share one compiled copy, run
once per node, so a deep stack of identical layers costs what one layer does. A node whose compiled
output fails the oracle on clean inputs is a *culprit*; nodes downstream that diverge only because
a culprit fed them are *propagators*, found by an eager replay (no compile).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..compare import Outcome, compare_tensor
from ..graphs import value_nodes
from ..oracle import GraphContext, SubgraphVerdict
from ..runner import Compiler, interpret


@dataclass(frozen=True)
class NodeCheck:
    verdict: SubgraphVerdict
    checked: tuple[str, ...]
    culprits: tuple[str, ...]
    compiled_copies: int = 0  # distinct nodes in the one compiled graph
    calls: int = 1  # runs of that graph (one per member of the largest group)


def check_nodes(context: GraphContext, compiler: Compiler) -> NodeCheck:
    view = context.view
    # Random nodes are checked too: in data mode only for NaN/Inf their draws should not hold
    # (a bad decomposition of a random op), in strict mode against eager's draws.
    checked = [n.name for n in view.compute_nodes if view.checkable(n) or view.is_random_tensor_op(n)]
    verdict, plan = context.judge_nodes(checked, compiler, label=f"{context.name}:nodes")
    failing = set(verdict.failing_outputs)
    culprits = tuple(
        name for name in checked if any(v.name in failing for v in value_nodes(view.nodes[name]))
    )
    copies, calls = (len(plan.members), plan.calls) if plan is not None else (len(checked), 1)
    return NodeCheck(verdict, tuple(checked), culprits, copies, calls)


def propagators(context: GraphContext, culprit: str, verdict: SubgraphVerdict) -> tuple[list[str], dict[str, Any]]:
    """Nodes after ``culprit`` that diverge in an eager replay fed the culprit's compiled output,
    and the replay's values (where a wrong but finite value turns into NaN further down)."""
    view = context.view
    overrides = {
        v.name: verdict.compiled_values[v.name]
        for v in value_nodes(view.nodes[culprit])
        if v.name in verdict.compiled_values
    }
    replayed = interpret(context.captured.graph_module, context.captured.inputs, overrides=overrides)
    start = view.position[culprit] + 1
    diverging = []
    for node in view.compute_nodes[start:]:
        if not view.checkable(node):
            continue
        for value in value_nodes(node):
            reference = context.eager_values.get(value.name)
            check = compare_tensor(reference, reference, replayed.get(value.name), context.tolerance)
            if check.outcome is not Outcome.MATCH:
                diverging.append(node.name)
                break
    return diverging, replayed
