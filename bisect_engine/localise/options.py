"""What a localisation run does: the engine's settings, separate from where and how it writes.

``stop_after`` is the one way to say where a run stops: after naming the op (``localise``), after
naming the Inductor subsystem (``subsystem``), or after writing and verifying the repro
(``repro``). Output settings (folder, verification runs, random inputs) live with the writer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..verdict.compare import Tolerance
from ..verdict.judgement import GRAPH, Oracle

STAGES = ("localise", "subsystem", "repro")
Stage = Literal["localise", "subsystem", "repro"]


@dataclass(frozen=True)
class EngineOptions:
    tolerance: Tolerance = Tolerance()
    seed: int = 0
    rng: Literal["data", "strict"] = "data"  # data: random draws fed to both sides; strict: must match
    # outputs: the headline culprit is the first whose divergence reaches a model output (a masked
    # one is still listed); strict: the first divergent node, as the minifier's strict accuracy does.
    # eager: eager's values are the reference (a compiled value closer to fp64 but beyond the floors
    # from eager is a finding); bitwise: eager's values, exactly (every node judged by equality).
    oracle: Literal["outputs", "strict", "eager", "bitwise"] = "outputs"
    stop_after: Stage = "repro"
    max_compiles: int | None = None  # every Inductor compile of the run counts
    timeout_s: float | None = None  # seconds from the start of the run
    # bytes of RSS the run may hold (--memory-budget; None: stop when the machine runs short)
    memory_budget_bytes: int | None = None
    # the per-node check runs before the whole-graph compile, which is skipped when a confirmed
    # culprit's compiled value, replayed eagerly, already makes the graph's outputs diverge
    # (False: the whole graph is always compiled first, as before)
    culprit_first: bool = True
    # the program is known to diverge (script mode, a scan's failing batch or step): every graph
    # takes the per-node check first; unknown (a model file), a graph whose whole compile is no
    # dearer than its per-node check is compiled whole first, so a clean graph costs one compile
    # (see localise/order.py)
    divergence_known: bool = False
    # worker processes for independent candidates (localise/workers.py); 1: all in this process
    workers: int = 1
    # script mode, a call that matched end to end yet differs from eager bit for bit: a cast the
    # program wrote is looked for as elided wherever compiled differs in any element (one fp16 ulp,
    # pytorch#182131), and emulate_precision_casts checked to bring compiled clearly closer to eager
    cast_elision_exact: bool = False
    # script mode, a program whose backend traces through AOT Autograd and hands Inductor nothing
    # (aot_eager): no graph is compiled (what the program ran is not Inductor's); only what our
    # capture traced is judged against the Dynamo graph, eagerly (a decomposition at capture)
    capture_only: bool = False

    @property
    def judgement(self) -> Oracle:
        """The run's judgement policy, the one every stage judges by (:mod:`bisect_engine.verdict.judgement`)."""
        return Oracle(self.tolerance, self.oracle, self.rng == "strict", self.seed)

    @property
    def reference(self) -> Literal["fp64", "eager"]:
        """What a compiled value is judged against."""
        return "eager" if self.judgement.reference == "eager" else "fp64"

    @property
    def graph_tolerance(self) -> Tolerance:
        """The tolerance graphs and nodes are judged with (exact equality for ``bitwise``)."""
        return self.judgement.tolerance_at(GRAPH)

    def runs(self, stage: Stage) -> bool:
        return STAGES.index(stage) <= STAGES.index(self.stop_after)
