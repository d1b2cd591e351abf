"""A captured graph too large to judge at once, cut into segments at module boundaries (issue 34).

Judging a graph holds several copies of what it reads (eager values, the fp64 reference, compiled
values: ``localise/release.graph_need``). Where that does not fit the memory left, the graph is cut
between the modules it runs (``nn_module_stack``; a backward node's from the forward node it
differentiates): consecutive modules go into one segment while the segment's need fits
(:func:`plan_segments`), and each segment becomes a graph of its own (:func:`segment_graphs`) whose
inputs are the graph's own (parameters by reference) and eager's values of what the segments before
it computed (one eager run of the graph, each value freed after its last use). A segment is then
judged as any captured graph is: on eager's values at its boundary, as a window is, so an error
made in one segment is never carried into the next.

Pure but for :func:`segment_graphs`'s one eager run. Static graphs that write nothing in place and
draw no random numbers only (:func:`segmentable`): the rest keep the memory stop.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import torch.fx as fx

from .fx_eval import mutates, watch_graph
from .graphs import CapturedGraph, GraphView, Segment, build_subgraph, fed_inputs, is_random, module_path

SEPARATOR = "_segment"
# Tests only: the bytes the run may still take when the engine decides whether to cut a graph (a
# small model then cut as a large one is where memory is short; the memory guard is unchanged).
ROOM_FOR_TESTS = "BISECT_TESTING_GRAPH_ROOM"


def unit_of(node: fx.Node, backward: bool, fine: bool = False) -> str | None:
    """The module a node belongs to at the grain graphs are cut at: its module path up to the first
    index of a module list (``blocks.3``, ``transformer.h.11``, ``model.layers.0``), else its first
    part (``head``, ``embed``); ``fine``: its whole module path (``blocks.3.mlp.fc1``), the grain a
    module-list item too large alone is cut at; None where the node belongs to no module (the
    graph's top level)."""
    path = module_path(node, backward=backward)
    if path is None or fine:
        return path
    parts = path.split(".")
    for position, part in enumerate(parts):
        if re.fullmatch(r"\d+", part):
            return ".".join(parts[:position + 1])
    return parts[0]


def runs_of_units(view: GraphView, backward: bool, names: Sequence[str] | None = None,
                  fine: bool = False) -> list[tuple[str, list[str]]]:
    """The compute nodes in graph order (``names``: those only) as runs of one unit each (a node of
    no module joins the run before it; those before any module, the first run)."""
    runs: list[tuple[str, list[str]]] = []
    leading: list[str] = []
    for node in view.compute_nodes if names is None else [view.nodes[name] for name in names]:
        unit = unit_of(node, backward, fine)
        if runs and (unit is None or unit == runs[-1][0]):
            runs[-1][1].append(node.name)
        elif unit is None:
            leading.append(node.name)
        else:
            runs.append((unit, [*leading, node.name]))
            leading = []
    if leading:  # no node belongs to a module
        runs.append(("", leading))
    return runs


def segmentable(graph: CapturedGraph) -> str | None:
    """Why ``graph`` cannot be cut into segments (None: it can): symbolic sizes, in-place writes,
    random draws (a segment's eager run would draw again)."""
    if graph.shape_signature is not None:
        return "it has symbolic sizes"
    if mutates(graph.graph_module):
        return "it writes its inputs in place"
    if any(is_random(node) for node in graph.graph_module.graph.nodes):
        return "it draws random numbers"
    return None


def _value_bytes(node: fx.Node) -> int:
    value = node.meta.get("val", node.meta.get("example_value"))
    values = value if isinstance(value, (tuple, list)) else [value]
    total = 0
    for item in values:
        try:
            total += int(item.numel()) * item.element_size()
        except (AttributeError, TypeError, RuntimeError):  # not a tensor, or symbolic sizes
            continue
    return total


def plan_segments(view: GraphView, input_bytes: dict[str, int], need_of: Callable[[int], int], room: int,
                  backward: bool) -> list[tuple[str, ...]] | None:
    """The graph's compute nodes cut at module boundaries into consecutive segments, each as many
    whole modules as fit: a segment's need (``need_of`` the bytes of the values it reads from
    outside itself: ``input_bytes`` for the graph's placeholders, the node's recorded size for a
    value computed before it) at most ``room``. A module-list item that does not fit alone is cut
    at its submodules (:func:`unit_of`'s ``fine`` grain). None where it cannot be cut so (one
    module alone does not fit, or the graph is one module)."""
    runs = runs_of_units(view, backward)
    if len(runs) < 2:
        return None

    def need(names: Sequence[str]) -> int:
        inside = set(names)
        read: dict[str, int] = {}
        for name in names:
            for source in fed_inputs(view.nodes[name]):
                if source.name not in inside and source.name not in read:
                    read[source.name] = input_bytes.get(source.name, 0) if source.op == "placeholder" \
                        else _value_bytes(source)
        return need_of(sum(read.values()))

    pieces: list[list[str]] = []
    for _unit, names in runs:  # a run too large alone: its submodules' runs instead
        pieces += [names] if need(names) <= room else [finer for _, finer in runs_of_units(view, backward, names, True)]
    segments = _packed(pieces, need, room)
    if segments is None or len(segments) < 2:
        return None
    # a stack cut into alike chunks where that compiles less than the plain packing: its full
    # chunks compile once, each other segment once
    aligned = _aligned(runs, need, room) if len(pieces) == len(runs) else None
    if aligned is not None and aligned[1] < len(segments):
        return aligned[0]
    return [tuple(names) for names in segments]


def _packed(pieces: Sequence[Sequence[str]], need: Callable[[Sequence[str]], int], room: int) -> list[list[str]] | None:
    """Consecutive ``pieces`` packed into as few segments as fit ``room``, in order (None: a piece
    does not fit alone)."""
    segments: list[list[str]] = []
    current: list[str] = []
    for names in pieces:
        if current and need([*current, *names]) <= room:
            current += names
            continue
        if need(names) > room:
            return None
        if current:
            segments.append(current)
        current = list(names)
    if current:
        segments.append(current)
    return segments


def _list_item(unit: str) -> str | None:
    """The module list a unit is an item of (``transformer.h`` for ``transformer.h.7``), or None."""
    match = re.fullmatch(r"(.+)\.\d+", unit)
    return match.group(1) if match else None


def _aligned(runs: Sequence[tuple[str, list[str]]], need: Callable[[Sequence[str]], int],
             room: int) -> tuple[list[tuple[str, ...]], int] | None:
    """The cut that makes a stack's segments alike: the longest run of items of one module list
    (``blocks.0`` ... ``blocks.11``; in a backward, last to first) cut into chunks of the same number
    of items, the most that fit, from its first item; what comes before it packed on its own, what
    comes after it packed after the last chunk (into it where that one is short and it fits). Each
    full chunk of a stack of identical blocks is then the same graph under other names, compiled
    once (``verdict/compiler.reuse_key``). With the number of distinct segments (what it compiles);
    None where it gives fewer than two full chunks (the stack fits in one segment, or nearly)."""
    best: tuple[int, int] | None = None  # (start, length) of the longest run of one list's items
    start = 0
    while start < len(runs):
        owner = _list_item(runs[start][0])
        end = start + 1
        while owner is not None and end < len(runs) and _list_item(runs[end][0]) == owner:
            end += 1
        if owner is not None and (best is None or end - start > best[1]):
            best = (start, end - start)
        start = end
    if best is None or best[1] < 2:
        return None
    first, length = best
    items = [names for _, names in runs[first:first + length]]
    chunk = next((size for size in range(length, 0, -1)
                  if all(need([n for names in items[i:i + size] for n in names]) <= room for i in range(0, length, size))),
                 None)
    if chunk is None or chunk == length or length // chunk < 2:
        return None
    chunks = [[n for names in items[i:i + chunk] for n in names] for i in range(0, length, chunk)]
    before = _packed([names for _, names in runs[:first]], need, room)
    after = [names for _, names in runs[first + length:]]
    if after and len(items) % chunk and need([*chunks[-1], *after[0]]) <= room:  # a short last chunk is unlike the rest anyway
        chunks[-1] = [*chunks[-1], *after.pop(0)]
    rest = _packed(after, need, room)
    if before is None or rest is None:
        return None
    full = length // chunk
    return [tuple(names) for names in [*before, *chunks, *rest]], len(before) + 1 + (len(chunks) - full) + len(rest)


def segment_graphs(graph: CapturedGraph, plan: Sequence[Sequence[str]]) -> list[CapturedGraph]:
    """Each planned segment as a captured graph of its own, named ``<graph>_segment<k>``: its inputs
    the graph's (by reference) and eager's values of what the segments before it computed, from
    one eager run of the graph in which every other value is freed after its last use."""
    view = GraphView(graph.graph_module)
    given = dict(zip(view.placeholder_names(), graph.inputs))
    cuts = [build_subgraph(view, names) for names in plan]
    wanted = sorted({name for cut in cuts for name in cut.input_names if name not in given})
    computed: dict[str, Any] = {}
    if wanted:
        watch_graph(graph.graph_module, graph.inputs, wanted, sink=computed.__setitem__)
    backward = graph.kind == "backward"
    segments = []
    for index, (names, cut) in enumerate(zip(plan, cuts), start=1):
        inputs = [given[name] if name in given else computed[name] for name in cut.input_names]
        units = [unit for unit in (unit_of(view.nodes[name], backward) for name in names) if unit]
        segments.append(CapturedGraph(
            name=f"{graph.name}{SEPARATOR}{index}", kind=graph.kind, index=graph.index,
            graph_module=cut.graph_module, inputs=inputs, called=graph.called, model_outputs=None,
            compile_id=graph.compile_id, guards=graph.guards,
            frozen=tuple(name for name in graph.frozen if name in cut.input_names),
            shared=tuple((tensor, version) for tensor, version in graph.shared
                         if any(tensor is value for value in inputs)),
            segment=Segment(graph.name, index, len(plan), units[0] if units else "", units[-1] if units else "",
                            len(names))))
    return segments
