"""The divergence profile of a graph: every node's error in graph order, eager and compiled.

Pure and torch-free, over one ``report.json`` graph (its ``digests``, whose ``error`` is the
node's verdict) and the report's culprit and NaN findings. :func:`node_rows` gives the rows that
the profile plots and the node table lists; :func:`profile_svg` draws them: errors in ulps of
the output dtype against fp64 on a log axis, compiled as dots (red where the node fails), eager
as rings, zero errors on their own baseline, non-finite outputs as triangles in a band above the
axis, the culprit as a red line, the nodes it spreads to shaded, and a hover title per node.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .svg import LogAxis, decade_label, element, nice_step, number, text, title
from .wording import ulps

WIDTH, HEIGHT = 1000.0, 218.0
LEFT, RIGHT = 64.0, 12.0
NONFINITE_Y, TOP, BOTTOM, ZERO_Y, TICKS_Y = 13.0, 30.0, 170.0, 185.0, 210.0


@dataclass(frozen=True)
class NodeRow:
    """One value of a graph, as the profile and the node table show it."""

    index: int
    node: str  # the value's name (a getitem for multi-output ops)
    producer: str  # the compute node that made it
    op: str
    source: str
    shape: str
    compiled: float | None  # RMS error in ulps against fp64; None: not judged
    eager: float | None
    compiled_max: float | None
    outcome: str  # "match", "mismatch", "" (not judged)
    compiled_nonfinite: int  # NaN + Inf entries in the compiled output
    eager_nonfinite: int
    role: str  # "culprit", "crash", "nan origin", "propagator", ""

    @property
    def failing(self) -> bool:
        return self.outcome not in ("", "match") or self.role in ("culprit", "crash") or self.nonfinite

    @property
    def nonfinite(self) -> bool:
        return self.compiled_nonfinite > 0 or self.eager_nonfinite > 0


def as_float(value: Any) -> float | None:
    """An error from ``report.json``: a number, or ``"inf"``/``"nan"`` for a non-finite one."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def roles(graph: dict[str, Any], report: dict[str, Any]) -> dict[str, str]:
    """Compute-node name -> its role in the finding, for this graph."""
    found: dict[str, str] = {}
    culprit = report.get("culprit") or {}
    if culprit.get("graph") == graph.get("name"):
        found.update({name: "propagator" for name in culprit.get("propagators") or []})
    nan = report.get("nan") or {}
    for side in ("eager", "compiled"):
        origin = nan.get(side) or {}
        if origin.get("graph") == graph.get("name") and origin.get("node"):
            found[origin["node"]] = "nan origin"
    found.update({crash["node"]: "crash" for crash in graph.get("crashed_nodes") or [] if "node" in crash})
    if culprit.get("graph") == graph.get("name"):
        found.update({name: "culprit" for name in culprit.get("nodes") or [culprit.get("node")] if name})
    return found


def node_rows(graph: dict[str, Any], report: dict[str, Any]) -> list[NodeRow]:
    role_of = roles(graph, report)
    return [_row(index, entry, role_of) for index, entry in enumerate(graph.get("digests") or [])]


def _row(index: int, entry: dict[str, Any], role_of: dict[str, str]) -> NodeRow:
    error = entry.get("error") or {}
    eager, compiled = entry.get("eager") or {}, entry.get("compiled") or {}
    producer = str(entry.get("producer") or entry.get("node") or "")
    node = str(entry.get("node") or producer)
    shape = "×".join(str(s) for s in eager.get("shape") or []) or "scalar"
    return NodeRow(
        index=index, node=node, producer=producer, op=str(entry.get("op") or "?"),
        source=str(entry.get("source") or ""), shape=f"{eager.get('dtype', '?')}[{shape}]",
        compiled=as_float(error.get("compiled_rms_ulps")), eager=as_float(error.get("eager_rms_ulps")),
        compiled_max=as_float(error.get("compiled_max_ulps")), outcome=str(error.get("outcome") or ""),
        compiled_nonfinite=_nonfinite(compiled), eager_nonfinite=_nonfinite(eager),
        role=role_of.get(producer) or role_of.get(node, ""),
    )


def _nonfinite(digest: dict[str, Any]) -> int:
    return int(digest.get("nan") or 0) + int(digest.get("inf") or 0)


def profile_svg(rows: list[NodeRow], label: str) -> str:
    """The profile of ``rows`` (one graph) as an inline ``<svg>``; empty for no rows."""
    if not rows:
        return ""
    axis = LogAxis.spanning([v for r in rows for v in (r.compiled, r.eager) if v is not None], TOP, BOTTOM)
    slot = (WIDTH - LEFT - RIGHT) / len(rows)
    parts = [_frame(axis, len(rows), slot), _shading(rows, slot), _culprit_lines(rows, slot),
             _points(rows, slot, axis), _hover_columns(rows, slot)]
    return element("svg", {"class": "profile", "viewBox": f"0 0 {number(WIDTH)} {number(HEIGHT)}",
                           "role": "img", "aria-label": label}, title(label) + "".join(parts))


def x_of(index: int, slot: float) -> float:
    return LEFT + (index + 0.5) * slot


def _frame(axis: LogAxis, count: int, slot: float) -> str:
    """Decade grid lines and labels, the NaN/Inf and zero bands, node-index ticks."""
    right = WIDTH - RIGHT
    parts = []
    for exponent in axis.decades():
        y = axis.y(10.0 ** exponent)
        parts.append(element("line", {"class": "grid", "x1": LEFT, "x2": right, "y1": y, "y2": y}))
        parts.append(element("text", {"class": "tick", "x": LEFT - 6, "y": y + 4.0, "text-anchor": "end"},
                             decade_label(exponent)))
    for y, words in ((NONFINITE_Y, "NaN/Inf"), (ZERO_Y, "0")):
        parts.append(element("line", {"class": "band", "x1": LEFT, "x2": right, "y1": y, "y2": y}))
        parts.append(element("text", {"class": "tick", "x": LEFT - 6, "y": y + 4.0, "text-anchor": "end"}, words))
    step = nice_step(count)
    for index in range(0, count, step):
        parts.append(element("text", {"class": "tick", "x": x_of(index, slot), "y": TICKS_Y, "text-anchor": "middle"},
                             str(index)))
    parts.append(element("text", {"class": "axis-label", "x": 12.0, "y": (TOP + BOTTOM) / 2,
                                  "transform": f"rotate(-90 12 {number((TOP + BOTTOM) / 2)})",
                                  "text-anchor": "middle"}, "ulps vs fp64"))
    return "".join(parts)


def _runs(indices: list[int]) -> list[tuple[int, int]]:
    """Consecutive indices as (first, last) runs."""
    runs: list[tuple[int, int]] = []
    for index in indices:
        if runs and runs[-1][1] == index - 1:
            runs[-1] = (runs[-1][0], index)
        else:
            runs.append((index, index))
    return runs


def _shading(rows: list[NodeRow], slot: float) -> str:
    """The nodes the culprit's wrong output spreads to, shaded (merged where consecutive)."""
    spread = [r.index for r in rows if r.role == "propagator"]
    return "".join(element("rect", {"class": "spread", "x": LEFT + first * slot, "y": TOP - 4.0,
                                    "width": (last - first + 1) * slot, "height": BOTTOM - TOP + 8.0})
                   for first, last in _runs(spread))


def _culprit_lines(rows: list[NodeRow], slot: float) -> str:
    parts = []
    marked = [r for r in rows if r.role in ("culprit", "crash", "nan origin")]
    for row in marked:
        x = x_of(row.index, slot)
        kind = "culprit" if row.role in ("culprit", "crash") else "origin"
        parts.append(element("line", {"class": f"mark-{kind}", "x1": x, "x2": x, "y1": NONFINITE_Y + 6.0,
                                      "y2": ZERO_Y}))
    for row in marked[:3]:  # a label each for the first few; the hover says the rest
        x = x_of(row.index, slot)
        anchor = "start" if x < WIDTH * 0.7 else "end"
        words = f"{row.role}: {row.producer}"
        parts.append(element("text", {"class": "mark-label", "x": x + (4.0 if anchor == "start" else -4.0),
                                      "y": TOP + 8.0, "text-anchor": anchor}, text(words)))
    return "".join(parts)


def _points(rows: list[NodeRow], slot: float, axis: LogAxis) -> str:
    radius = min(3.4, max(1.2, slot * 0.42))
    eager: list[str] = []
    compiled: list[str] = []
    failing: list[str] = []
    nonfinite: list[str] = []
    for row in rows:
        x = x_of(row.index, slot)
        for value, count, into, side in ((row.eager, row.eager_nonfinite, eager, "eager"),
                                         (row.compiled, row.compiled_nonfinite,
                                          failing if _drawn_failing(row) else compiled, "compiled")):
            if count or (value is not None and not math.isfinite(value)):
                nonfinite.append(_triangle(x, max(radius, 2.4), side))
            elif value is not None:
                y = ZERO_Y if value == 0 else axis.y(value)
                # compiled dots sit inside eager's rings (equal errors still show both); failing
                # dots stay large however many nodes share the width
                size = radius if side == "eager" else (max(radius, 2.6) if into is failing else radius * 0.7)
                into.append(element("circle", {"cx": x, "cy": y, "r": size}))
    return (element("g", {"class": "eager"}, "".join(eager)) + element("g", {"class": "compiled"}, "".join(compiled))
            + element("g", {"class": "failing"}, "".join(failing)) + "".join(nonfinite))


def _drawn_failing(row: NodeRow) -> bool:
    return row.outcome == "mismatch" or row.role in ("culprit", "crash")


def _triangle(x: float, radius: float, side: str) -> str:
    """A triangle in the NaN/Inf band: compiled filled, eager a larger outline around it."""
    size = radius * (1.5 if side == "compiled" else 2.1)
    y = NONFINITE_Y
    path = f"M{number(x)} {number(y - size)}L{number(x + size)} {number(y + size)}L{number(x - size)} {number(y + size)}Z"
    return element("path", {"class": f"nonfinite-{side}", "d": path})


def _hover_columns(rows: list[NodeRow], slot: float) -> str:
    columns = []
    for row in rows:
        columns.append(element("rect", {"x": LEFT + row.index * slot, "y": 0.0, "width": slot, "height": TICKS_Y - 10.0},
                               title(hover_text(row))))
    return element("g", {"class": "hover"}, "".join(columns))


def hover_text(row: NodeRow) -> str:
    lines = [f"#{row.index} {row.node} = {row.op}" + (f"  ({row.role})" if row.role else ""),
             row.source or "source unknown"]
    if row.compiled is not None or row.eager is not None:
        lines.append(f"compiled {ulps(row.compiled)} ulps RMS (max {ulps(row.compiled_max)}), "
                     f"eager {ulps(row.eager)}: {row.outcome or 'not judged'}")
    else:
        lines.append("not judged on its own")
    if row.nonfinite:
        lines.append(f"NaN/Inf entries: eager {row.eager_nonfinite}, compiled {row.compiled_nonfinite}")
    return "\n".join(lines)
