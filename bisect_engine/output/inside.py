"""Pure: a culprit HOP's inside (strategies.inside.Inside) in report.json and the summary."""
from __future__ import annotations

from typing import Any


def apply_inside(culprit: dict[str, Any], inside: Any) -> None:
    """``culprit.inside`` = {hop, hop_node, subgraph, attribute, op, node, source, ...}; when an op
    inside is wrong alone it is the culprit's ``op`` (the HOP stays ``node``, ``ops`` and ``inside.hop``)."""
    if inside is None:
        return
    culprit["inside"] = inside.to_json()
    if inside.op is not None:
        culprit["op"] = inside.op
        if inside.source:
            culprit["source"] = inside.source


def inside_lines(culprit: dict[str, Any]) -> list[str]:
    inside = culprit.get("inside")
    if not inside:
        return []
    if inside.get("op"):
        on = (f" on iteration {inside['iteration']} (counting from 0; the carry that iteration enters with, "
              f"replayed eagerly; right on the earlier ones)") if inside.get("iteration") else ""
        return [f"  inside:  {inside['op']} (node {inside['node']}) in the {inside['subgraph']} of {inside['hop']} "
                f"(node {inside['hop_node']}){on}; wrong alone, compiled outside the HOP too"]
    return [f"  inside:  {inside['hop']} (node {inside['hop_node']}): {inside.get('note') or 'no op inside named'}"]
