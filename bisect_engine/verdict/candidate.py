"""Candidates: the values strategies propose and the one search object judges.

A candidate says *what* to compile and *how*, never does it: :class:`GraphCandidate` names nodes of
one captured graph (compiled together, or each alone on reference inputs) under a
:class:`Switch` (a subsystem turned off); :class:`ModelCandidate` is the user's whole model through a
real ``torch.compile`` under a switch; :class:`ReplayCandidate` is an eager replay with some nodes'
compiled values injected (no compile); :class:`DroppedWorkCandidate` a window run eagerly with one
node's work skipped (no compile); :class:`DecompositionCandidate` is a torch-level call run
as written against the aten graph AOT Autograd traces of it (no compile); :class:`ScanCandidate` is one batch or training step of a
scan (the whole model run eager, in fp64 and compiled on it). All are frozen and hashable, so the search caches their
verdicts. :func:`compile_arguments` turns a switch into ``compile_fx`` arguments.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from .inductor_adapter import default_decompositions, is_lowered

SwitchKind = Literal["none", "decomposition", "lowering", "pass", "config", "precision"]


@dataclass(frozen=True)
class Switch:
    """One way to compile differently: a config patch, decomposition entries removed, ops forced
    to fall back to their aten kernels. ``kind``/``name`` say what it turns off, for the report."""

    kind: SwitchKind = "none"
    name: str = ""
    patch: tuple[tuple[str, Any], ...] = ()
    without: frozenset[Any] = frozenset()  # decomposition-table entries removed
    fallbacks: frozenset[Any] = frozenset()  # ops lowered as aten fallbacks

    @classmethod
    def config(cls, kind: SwitchKind, name: str, patch: dict[str, Any]) -> "Switch":
        return cls(kind, name, tuple(sorted(patch.items())))

    @property
    def patch_dict(self) -> dict[str, Any]:
        return dict(self.patch)


NO_SWITCH = Switch()


@dataclass(frozen=True)
class GraphCandidate:
    """Nodes of captured graph ``graph``, compiled once.

    ``isolated``: each node reads the reference values of its inputs (the per-node check), else the
    nodes form one region fed reference values at its boundary. ``inputs="random"``: the region's
    inputs are drawn from the real inputs' statistics (the repro's ``--random-inputs`` check).
    ``keep_code``: the verdict carries what Inductor generated (for the compiles that show the
    culprit: confirming it alone, the minimal window).
    """

    graph: str
    nodes: frozenset[str]
    isolated: bool = False
    switch: Switch = NO_SWITCH
    inputs: Literal["reference", "random"] = "reference"
    purpose: str = field(default="", compare=False)  # a label for logs; not part of what is judged
    # The verdict keeps Inductor's generated code (the culprit's kernels). Part of what is judged:
    # a verdict cached without the code cannot answer for a candidate that wants it.
    keep_code: bool = False
    # "as_captured": a graph with symbolic sizes compiles symbolically (as the job's did);
    # "static": at the checked call's sizes (does the finding need symbolic code?).
    shapes: Literal["as_captured", "static"] = "as_captured"


@dataclass(frozen=True)
class SizeCandidate:
    """Nodes of captured graph ``graph`` compiled once symbolically, then run with symbol
    ``symbol`` at each of ``sizes`` (the graph's inputs resized, eager's values recomputed there):
    the verdict's ``sizes`` says which fail. No recompile per size."""

    graph: str
    nodes: frozenset[str]
    symbol: str
    sizes: tuple[int, ...]
    purpose: str = field(default="", compare=False)


@dataclass(frozen=True)
class ModelCandidate:
    """The user's model through ``torch.compile`` with Inductor under ``switch``, against eager
    and fp64 (outputs, and gradients with a loss)."""

    switch: Switch = NO_SWITCH


@dataclass(frozen=True)
class ReplayCandidate:
    """An eager replay of captured graph ``graph`` with the per-node check's compiled values of
    ``injected`` substituted (everything else recomputed eagerly): do ``outputs`` then differ
    materially from eager's? Costs no compile (see :mod:`bisect_engine.verdict.replay`)."""

    graph: str
    injected: frozenset[str]
    outputs: tuple[str, ...]
    purpose: str = field(default="", compare=False)


@dataclass(frozen=True)
class DroppedWorkCandidate:
    """Window ``window`` of captured graph ``graph`` run eagerly with node ``node``'s work skipped:
    its value is its input ``kept``'s, unchanged (a scatter that never scatters, an update never
    applied). MISMATCH when the window's outputs then differ materially from eager's; the verdict's
    ``compiled_values`` are those replayed outputs, which the strategy holds against the window's
    compiled ones (see :mod:`bisect_engine.strategies.dropped`). No compile."""

    graph: str
    window: frozenset[str]
    node: str
    kept: str
    purpose: str = field(default="", compare=False)


@dataclass(frozen=True)
class DecompositionCandidate:
    """Captured graph ``graph``'s Dynamo (torch-level) graph, run eagerly as the program wrote it,
    against what our capture made of it, run eagerly: no compile. ``node`` None: the whole Dynamo
    graph against the captured aten graph; a node: that call alone against its own trace as AOT
    Autograd traces it (composite ops decomposed); with ``op`` k: the k-th aten op the call runs
    eagerly (as eager dispatches it) against that op's decomposition alone."""

    graph: str
    node: str | None = None
    op: int | None = None
    purpose: str = field(default="", compare=False)


@dataclass(frozen=True)
class ScanCandidate:
    """Batch (``kind="batch"``) or training step (``"step"``) ``index`` of the model file's
    ``get_batches()``, run by the scan's eager, fp64 and compiled copies of the model (one compiled
    copy for the whole scan: Dynamo compiles only a batch it holds no compile for, each compile
    checked against the budget as it happens). Judged in order, each once."""

    kind: Literal["batch", "step"]
    index: int


Candidate = (GraphCandidate | ModelCandidate | ReplayCandidate | SizeCandidate | ScanCandidate | DecompositionCandidate
             | DroppedWorkCandidate)


def compile_metered(candidate: Candidate) -> bool:
    """Whether every compile of the candidate's evaluation is checked against the budget where it
    happens (the search then checks only the clock before it): a scan's batch or step, which may
    compile nothing at all."""
    return isinstance(candidate, ScanCandidate)


def compile_arguments(switch: Switch) -> tuple[dict[str, Any] | None, dict[Any, Callable[..., Any]] | None, tuple[Any, ...]]:
    """``(config_patches, decompositions, fallbacks)`` for ``compile_fx`` under ``switch``.

    An op whose decomposition is removed and which has no lowering of its own would be left to
    Inductor's implicit fallback, which refuses ops with a decomposition when ``CI`` is set: it is
    made an explicit fallback.
    """
    decompositions = None
    removed = set(switch.without) | set(switch.fallbacks)
    if removed:
        decompositions = {op: fn for op, fn in default_decompositions().items() if op not in removed}
    unlowered = tuple(op for op in switch.without if not is_lowered(op))
    fallbacks = tuple(dict.fromkeys((*sorted(switch.fallbacks, key=str), *sorted(unlowered, key=str))))
    patch = switch.patch_dict
    if patch.get("cpp.simdlen") == 1:
        # A build setting, not codegen: scalar kernels include the C++ prefix header without vector
        # ISA macros, so Inductor would first build a precompiled header just for them (about 5 s
        # on a 2-core machine) to compile one small kernel (about 2 s without). Same source, same
        # flags, same kernel either way.
        patch = {**patch, "cpp_cache_precompile_headers": False}
    return patch or None, decompositions, fallbacks
