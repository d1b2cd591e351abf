"""A culprit that is a higher-order op: the search descends into its subgraphs (strategies.inside)."""
from __future__ import annotations

import dataclasses
from typing import Any

import torch

from ..verdict.candidate import GraphCandidate, Switch
from ..verdict.compare import Outcome
from ..strategies.inside import Inside, descend, hop_name
from ..strategies.protocol import GraphSearch
from ..strategies.subsystems import Attribution, attribute
from .judge import Judge
from .records import GraphFinding


def descend_into_hop(finding: GraphFinding, judge: Judge, search: GraphSearch) -> Inside | None:
    """The op inside the culprit HOP's subgraph that is wrong alone (``GraphFinding.inside``; a node
    culprit only: a crash or a window has no one op to look inside). None: not a HOP culprit."""
    if finding.crash or finding.culprit_kind != "node" or len(finding.culprit_nodes) != 1:
        return None
    (name,) = finding.culprit_nodes
    context = finding.context
    if hop_name(context.view.nodes[name]) is None:
        return None
    with search.progress.step(f"{context.name}: inside {name}"):
        return descend(context, name, search, judge.add)


def later_iteration_window(finding: GraphFinding) -> GraphFinding | None:
    """An op found wrong inside a loop's body on a later iteration (``Inside.at``): that
    iteration's body as the finding's graph, cut from the carry it enters with to the op (the
    op's ancestors there), so the repro holds that iteration's carry. None otherwise."""
    inside = finding.inside
    if inside is None or inside.at is None or inside.node is None:
        return None
    context = inside.at
    upstream = context.view.ancestors([inside.node])
    window = (inside.node, *(node.name for node in context.view.compute_nodes  # the op first: the repro's title
                             if node.name in upstream and node.name != inside.node))
    return dataclasses.replace(finding, context=context, window=window, kernels=(), sweeps=[], sized_context=None,
                               amplification=None)


def attribute_inside(finding: GraphFinding, judge: Judge, search: GraphSearch) -> tuple[bool, Attribution | None]:
    """The subsystem behind the op named inside a HOP, judged on that op alone in its subgraph (the
    HOP as a whole has no switch of its own); a lowering fallback is then tried on the HOP node
    itself (one compile) and the note says whether it fixes it there. (False, None): no op inside
    named (the caller attributes the HOP); else (True, the attribution or None)."""
    inside = finding.inside
    if inside is None or inside.op is None or inside.graph not in judge.contexts:
        return False, None
    with search.progress.step(f"{inside.graph}: subsystem bisection"):
        attribution = attribute(judge.contexts[inside.graph], (inside.node,), search)
        if attribution is None:
            return True, finding.attribution
        note, fixes = _where(attribution, inside, finding.context.name, search)
        workaround = attribution.workaround if fixes else (
            f"# none known: the switch ({attribution.name}) does not apply inside {inside.hop}")
        return True, dataclasses.replace(
            attribution, workaround=workaround, note=f"{attribution.note}; {note}" if attribution.note else note)


def _where(attribution: Any, inside: Any, graph: str, search: GraphSearch) -> tuple[str, bool]:
    """Whether the switch found on the op alone also fixes the HOP node (lowerings: checked), and
    the note that says so."""
    alone = f"found on {inside.op} compiled alone, outside {inside.hop}"
    ops = [_op(name) for name in attribution.name.split(", ")] if attribution.kind == "lowering" else []
    if not ops or None in ops:
        return f"{alone}; not checked on the {inside.hop} node itself", True
    switch = Switch("lowering", attribution.name, fallbacks=frozenset(ops))
    verdict = search.judge(GraphCandidate(graph, frozenset([inside.hop_node]), switch=switch,
                                          purpose="subsystem on the hop"))
    if verdict.outcome is Outcome.MATCH:
        return f"{alone}; the fallback fixes the {inside.hop} node too (checked)", True
    return (f"{alone}; the fallback does not fix the {inside.hop} node (checked: {verdict.outcome.value}): "
            f"the {inside.subgraph} is generated inside the HOP's own code, so no workaround is known"), False


def _op(name: str) -> Any:
    """``aten.sin.default`` -> torch.ops.aten.sin.default (None: not an op)."""
    value: Any = torch.ops
    for part in name.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value
