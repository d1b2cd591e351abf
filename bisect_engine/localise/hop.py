"""A culprit that is a higher-order op: the search descends into its subgraphs (strategies.inside)."""
from __future__ import annotations

from typing import Any

from ..progress import Progress
from ..strategies.inside import descend, hop_name
from .judge import Judge


def descend_into_hop(finding: Any, judge: Judge, search: Any, progress: Progress) -> None:
    """``finding.inside``: the op inside the culprit HOP's subgraph that is wrong alone (a node
    culprit only: a crash or a window has no one op to look inside)."""
    if finding is None or finding.crash or finding.culprit_kind != "node" or len(finding.culprit_nodes) != 1:
        return
    (name,) = finding.culprit_nodes
    context = finding.context
    if hop_name(context.view.nodes[name]) is None:
        return
    with progress.step(f"{context.name}: inside {name}"):
        finding.inside = descend(context, name, search, judge.add)
