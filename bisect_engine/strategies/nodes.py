"""Per-node verdicts: every checkable node compiled at once, each fed its reference inputs.

One candidate checks all N nodes (an isolated :class:`~bisect_engine.verdict.candidate.GraphCandidate`):
nodes that Inductor would compile to the same kernel share one compiled copy, run once per node,
so a deep stack of identical layers costs what one layer does. A node whose compiled output fails
the oracle on clean inputs is a *culprit*. When that one compile crashes, the group is halved
until the nodes that crash on their own are found (``search.split_failing``): a crash is a
finding with its error, never a reason to treat every node as passing. The halving runs over
groups of nodes with one signature (one compiled copy each), not over nodes: 20 identical sin
nodes cost what one does, and a group whose first node crashes alone has the rest judged at once. Nodes downstream that
diverge only because a culprit fed them are *propagators*, found by an eager replay (no compile).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..search import split_failing
from ..verdict.candidate import GraphCandidate
from ..verdict.compare import Outcome
from ..verdict.judgement import judge_against_eager, scalar_exact
from ..verdict.fx_eval import interpret
from ..verdict.graphs import node_signature, value_nodes
from ..verdict.oracle import GraphContext, SubgraphVerdict, merged
from .protocol import GraphSearch


@dataclass(frozen=True)
class NodeCheck:
    verdict: SubgraphVerdict  # every node that compiled, judged alone
    checked: tuple[str, ...]
    culprits: tuple[str, ...]  # compiled alone, wrong on clean inputs (graph order)
    crashes: tuple[tuple[str, str], ...] = ()  # (node, error): its compile or run raises on its own
    group_error: str = ""  # the combined compile raised, though no node does alone
    compiled_copies: int = 0  # distinct nodes in the compiled graph(s)
    calls: int = 1  # runs of that graph (one per member of the largest group)


def check_nodes(context: GraphContext, search: GraphSearch, split_crash: bool = True) -> NodeCheck:
    """``split_crash=False``: a crash of the one compile is left as it is (``group_error``), not
    halved down to the nodes that crash alone (the caller will decide whether that is worth it)."""
    view = context.view
    # Random nodes are checked too: in data mode only for NaN/Inf their draws should not hold
    # (a bad decomposition of a random op), in strict mode against eager's draws.
    checked = tuple(n.name for n in view.compute_nodes if view.checkable(n) or view.is_random_tensor_op(n))

    def judge(names: tuple[str, ...]) -> SubgraphVerdict:
        return search.judge(GraphCandidate(context.name, frozenset(names), isolated=True, purpose="nodes"))

    verdict = judge(checked)
    crashes: tuple[tuple[str, str], ...] = ()
    group_error = ""
    if verdict.outcome is Outcome.CRASH and checked:
        group_error = verdict.error
        if not split_crash:
            return NodeCheck(verdict, checked, (), (), group_error, verdict.copies, verdict.calls)
        crashes, verdict = _crashing_nodes(context, checked, judge)
        if crashes:
            group_error = ""
    failing = set(verdict.failing_outputs)
    culprits = tuple(
        name for name in checked if any(v.name in failing for v in value_nodes(view.nodes[name]))
    )
    return NodeCheck(verdict, checked, culprits, crashes, group_error, verdict.copies, verdict.calls)


def _signature_groups(context: GraphContext, names: tuple[str, ...]) -> list[tuple[str, ...]]:
    """``names`` grouped by :func:`node_signature` (one compiled copy each), in graph order."""
    groups: dict[Any, list[str]] = {}
    for name in names:
        signature = node_signature(context.view.nodes[name], context.eager_values)
        groups.setdefault(("alone", name) if signature is None else signature, []).append(name)
    return [tuple(group) for group in groups.values()]


def crash_key(error: str) -> tuple[str, tuple[str, ...]]:
    """What tells one crash from another, paths and line numbers aside: the exception's first line
    and the compiler's ``error:`` messages (a C++ compile error names its generated file)."""
    lines = error.strip().splitlines()
    messages = sorted({line.split("error:", 1)[1].strip() for line in lines if "error:" in line})
    return (lines[0] if lines else "", tuple(messages))


def _crashing_nodes(context: GraphContext, checked: tuple[str, ...],
                    judge: Any) -> tuple[tuple[tuple[str, str], ...], SubgraphVerdict]:
    """The nodes whose compile or run raises on their own, with their error, and the verdict of
    every other node. Halving over signature groups; a crashing group's first node is judged
    alone, then the rest of its group at once: raising the same error, they share its crash
    (one compiled copy); else the group is halved node by node."""
    def crashes(groups: tuple[tuple[str, ...], ...]) -> bool:
        return judge(tuple(n for group in groups for n in group)).outcome is Outcome.CRASH

    split = split_failing(tuple(_signature_groups(context, checked)), crashes, infer=True)
    found: list[tuple[str, str]] = []
    passing = [judge(tuple(n for group in groups for n in group)) for groups in split.passing]
    for group in split.failing:
        alone = judge(group[:1])
        rest = judge(group[1:]) if alone.outcome is Outcome.CRASH and len(group) > 1 else None
        if alone.outcome is Outcome.CRASH and (rest is None or (rest.outcome is Outcome.CRASH
                                                                and crash_key(rest.error) == crash_key(alone.error))):
            found += [(name, alone.error) for name in group]
            continue
        if rest is not None and rest.outcome is not Outcome.CRASH:
            found.append((group[0], alone.error))
            passing.append(rest)
            continue
        within = split_failing(group, lambda names: judge(names).outcome is Outcome.CRASH, infer=True)
        alone_crashes = [(name, verdict.error) for name, verdict in ((n, judge((n,))) for n in within.failing)
                         if verdict.outcome is Outcome.CRASH]
        found += alone_crashes
        passing += [judge(names) for names in within.passing]
        if not alone_crashes and judge(group).outcome is not Outcome.CRASH:
            passing.append(judge(group))  # inferred to crash, but it does not (values, interactions)
    order = {name: i for i, name in enumerate(checked)}
    return tuple(sorted(found, key=lambda pair: order[pair[0]])), merged(passing)


def propagators(context: GraphContext, culprit: str, verdict: SubgraphVerdict) -> tuple[list[str], dict[str, Any]]:
    """Nodes after ``culprit`` that diverge in an eager replay fed the culprit's compiled output,
    and the replay's values (where a wrong but finite value turns into NaN further down)."""
    view = context.view
    overrides = {
        v.name: verdict.compiled_values[v.name]
        for v in value_nodes(view.nodes[culprit])
        if v.name in verdict.compiled_values
    }
    replayed = context.replay(overrides)
    start = view.position[culprit] + 1
    diverging = []
    for node in view.compute_nodes[start:]:
        if not view.checkable(node):
            continue
        for value in value_nodes(node):
            reference = context.eager_values.get(value.name)
            check = judge_against_eager(context.oracle, reference, replayed.get(value.name))
            if check.outcome is not Outcome.MATCH:
                diverging.append(node.name)
                break
    return diverging, replayed


# Eager replays to rank culprits: each is one eager run of the graph, no compile.
MAX_RANKED = 16


@dataclass(frozen=True)
class Reach:
    """How one culprit's compiled value, replayed eagerly, changes the graph's model outputs."""

    culprit: str
    outputs: tuple[tuple[str, float], ...]  # (output, its RMS error in ulps against eager's value)

    @property
    def reaches_output(self) -> bool:
        return bool(self.outputs)


def output_reach(context: GraphContext, culprit: str, verdict: SubgraphVerdict, model_outputs: list[str]) -> Reach:
    """Feed ``culprit``'s compiled output to an eager replay of the graph: the model outputs that
    then differ from eager's beyond the tolerance (a masked or compared-away error reaches none)."""
    overrides = {v.name: verdict.compiled_values[v.name] for v in value_nodes(context.view.nodes[culprit])
                 if v.name in verdict.compiled_values}
    replayed = context.replay(overrides)
    reached = []
    for name in model_outputs:
        reference = context.eager_values.get(name)
        exact = scalar_exact(context.view.nodes.get(name))  # a remainder's output: one right answer
        check = judge_against_eager(context.oracle, reference, replayed.get(name), exact=exact)
        if check.outcome is not Outcome.MATCH:
            reached.append((name, check.compiled_rms_ulps))
    return Reach(culprit, tuple(reached))


def rank_culprits(context: GraphContext, check: NodeCheck, model_outputs: list[str],
                  strict: bool = False) -> tuple[str, list[Reach]]:
    """The headline culprit and how each culprit reaches the outputs: the first (graph order) whose
    divergence reaches a model output, else the first; ``strict``: the first, as it is."""
    ranked = [output_reach(context, name, check.verdict, model_outputs) for name in check.culprits[:MAX_RANKED]]
    if strict:
        return check.culprits[0], ranked
    reaching = next((r.culprit for r in ranked if r.reaches_output), None)
    return reaching or check.culprits[0], ranked
