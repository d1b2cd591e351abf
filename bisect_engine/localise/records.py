"""What a run learned, as frozen records: :class:`GraphFinding` per captured graph, :class:`RunFinding`
for the run.

A record is never changed in place: each step of the search (``localise/graph_steps.py``,
``localise/run_steps.py``) returns a new one made by :func:`dataclasses.replace`, and the driver
(``localise/drive.py``) keeps the latest, so a budget cut or an interrupt leaves exactly what the
completed steps learned. **A new strategy** adds one step and the one field it fills here (with a
default, so every other path leaves it empty); output reads only these records.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..load.capture import BackendRun
from ..load.model_file import ModelSpec
from ..strategies.amplify import Amplification
from ..strategies.departures import Consequence, DepartedValue, ElidedCast, LayoutMisread
from ..strategies.dropped import DroppedWork
from ..strategies.nodes import NodeCheck, Reach
from ..strategies.pregrad import PassRewrite
from ..strategies.sizes import SizeSweep
from ..strategies.subsystems import Attribution
from ..strategies.windows import attributed_node, window_culprit
from ..verdict.compare import Outcome
from ..verdict.compiler import Compiler
from ..verdict.graphs import CapturedGraph
from ..verdict.kernels import Kernel
from ..verdict.nonfinite import Nonfinite
from ..verdict.oracle import GraphContext, SubgraphVerdict
from .below_tolerance import BelowTolerance
from .upstream import WithinUpstream

if TYPE_CHECKING:
    from .judge import RunSearch


@dataclass(frozen=True)
class GraphFinding:
    """Everything learned about one captured graph."""

    context: GraphContext
    whole: SubgraphVerdict
    nodes: NodeCheck | None = None
    window: tuple[str, ...] | None = None
    window_verdict: SubgraphVerdict | None = None
    # the window node whose work its compiled code drops: skipped in an eager replay, it gives the
    # window's compiled outputs (strategies/dropped.py, no compile); the window is named by it
    dropped: DroppedWork | None = None
    eager_nonfinite: Nonfinite | None = None  # NaN/Inf in eager's model outputs, and who makes them
    compiled_nan: str | None = None  # where compiled first turns non-finite (alone, or agreeing with eager)
    nan_problem: bool = False
    propagators: list[str] = field(default_factory=list)
    replay_values: dict[str, Any] = field(default_factory=dict)  # eager replay of the culprit's output
    attribution: Attribution | None = None
    confirmed: bool | None = None  # the culprit subgraph, compiled on its own, still diverges (or crashes)
    # Our own recompile of this graph failed where a real torch.compile does not (see graph_steps):
    # {"problem", "fallback", "changed", "judged"}; never a finding about the compiler.
    harness: dict[str, Any] | None = None
    headline: str | None = None  # the culprit named first (see strategies.nodes.rank_culprits)
    reach: list[Reach] = field(default_factory=list)  # each culprit: the model outputs it reaches
    kernels: tuple[Kernel, ...] = ()  # what Inductor generated for the culprit (its confirm or window compile)
    # outputs where eager and compiled differ materially, and the op whose tiny difference makes it
    material: list[Any] = field(default_factory=list)
    amplification: Amplification | None = None
    # compiled departs from eager while closer to fp64 (never a finding by the fp64 rule), and
    # whether Inductor's eager-rounding setting makes compiled follow eager (one compile)
    departures: list[DepartedValue] = field(default_factory=list)
    eager_rounding_follows: bool | None = None
    # a .to(bf16)/.to(fp16) round trip the user wrote that compiled skips (eager replayed without it
    # gives compiled's outputs), with eager_rounding_follows checked for it (one compile)
    elided_cast: ElidedCast | None = None
    # a forward departure that the backward turns into materially different gradients (no compile)
    consequence: Consequence | None = None
    # a value the forward saves that compiled lays out otherwise (equal values), which a backward op
    # misreads: the gradients it changes and that op (departures.saved_layout_consequence, no compile)
    layout_misread: LayoutMisread | None = None
    # A culprit in a graph with symbolic sizes: "dynamic-only" | "static-too" (one static compile),
    # each symbol of its inputs swept (one symbolic compile each), and the graph at the smallest
    # failing size of the headline sweep (the repro's inputs come from there)
    shapes: str | None = None
    sweeps: list[SizeSweep] = field(default_factory=list)
    sized_context: GraphContext | None = None
    # How ``whole`` was learned: "compile" (the whole graph compiled at once), or "eager_injection"
    # (not compiled: the confirmed culprit's compiled value, injected into an eager replay of the
    # graph, makes its outputs diverge by the same rule; see graph_steps.culprit_first)
    whole_by: str = "compile"
    # outputs within tolerance, compiled's error clearly above eager's: the per-node check's ops
    # wrong alone, said beside a clean verdict (see localise/below_tolerance.py)
    below: BelowTolerance | None = None
    # A culprit HOP node (cond, flex_attention, invoke_subgraph): the op inside it (strategies.inside.Inside)
    inside: Any = None
    # the last deciding step of the graph's plan that ran (see drive.Step.decides): "whole",
    # "confirm", "window", "amplify", ...
    ended_by: str | None = None
    # every tensor value's digests, taken when a clean graph let go of its values (localise/release.py)
    digests: tuple[dict[str, Any], ...] | None = None
    # a finding by the ulp rule alone whose program outputs pass at scope model (upstream's
    # ``same``, or the end-to-end rule): listed with their errors, never the headline (localise/upstream.py)
    within_upstream: WithinUpstream | None = None

    @property
    def eager_nan(self) -> str | None:
        """The node that first makes eager's outputs non-finite (the model's own NaN)."""
        return self.eager_nonfinite.origin if self.eager_nonfinite else None

    @property
    def model_outputs(self) -> list[str]:
        return self.context.view.output_names(self.context.captured.model_outputs)

    @property
    def crash(self) -> tuple[str, str] | None:
        """(node, error) of the first node whose compile or run raises on its own."""
        return self.nodes.crashes[0] if self.nodes and self.nodes.crashes else None

    @property
    def culprit_nodes(self) -> tuple[str, ...]:
        if self.window:
            return self.window
        if self.crash:
            return (self.crash[0],)
        if self.nodes and self.nodes.culprits:
            return (self.headline or self.nodes.culprits[0],)
        if self.amplification:
            return (self.amplification.culprit,)
        return ()

    @property
    def named_node(self) -> str | None:
        """The node the culprit is named by: a window's node whose op the subsystem's lowering or
        decomposition fallback names (``strategies.windows.attributed_node``), else the node whose
        work its compiled code drops (``strategies.dropped``), else its node whose own output
        departs, or the one its compile error names (``window_culprit``); else the culprit."""
        names = self.culprit_nodes
        if self.window and names == self.window:
            crashed = self.window_verdict is not None and self.window_verdict.outcome is Outcome.CRASH
            attribution = self.attribution
            by_switch = None if crashed or attribution is None else attributed_node(
                self.context.view, self.window, attribution.kind, attribution.name)
            dropped = self.dropped.node if self.dropped is not None and not crashed else None
            return by_switch or dropped or window_culprit(self.context.view, self.window, self.window_verdict)
        return names[0] if names else None

    @property
    def culprit_kind(self) -> str:
        return "window" if self.window else "amplified" if self.amplification else "node"

    @property
    def harness_failed(self) -> bool:
        """Our recompile of the whole graph failed, no fallback compiled, and the real compile works."""
        return self.harness is not None and not self.harness.get("judged")

    @property
    def cast_elision_explains(self) -> bool:
        """Against fp64, a skipped ``.to(bf16/fp16)`` round trip (Inductor's intent unless
        ``emulate_precision_casts``, checked to make compiled follow eager) is the whole story: a
        listed difference, not a finding. Judged against eager, it is one."""
        return (self.elided_cast is not None and bool(self.eager_rounding_follows)
                and self.context.oracle.reference == "fp64")

    @property
    def has_finding(self) -> bool:
        if self.cast_elision_explains or self.within_upstream is not None:
            return False
        if self.harness_failed:
            return bool(self.culprit_nodes) or self.nan_problem
        return bool(self.culprit_nodes) or self.nan_problem or self.whole.outcome is not Outcome.MATCH

    @property
    def draws_random(self) -> bool:
        return bool(self.context.view.random_names())


@dataclass(frozen=True)
class RunFinding:
    """The run: each judged graph's record in the order judged, and the run-level steps' findings."""

    spec: ModelSpec
    graphs: tuple[GraphFinding, ...]
    compiler: Compiler
    seconds: float
    captured: list[CapturedGraph] = field(default_factory=list)
    model_level: str | None = None  # "match" | "mismatch" | "crash" | None (not run)
    # the model-level check decided over runs (either side changed run to run on the same inputs):
    # (compiled runs that mismatched, compiled runs judged), and whose values changed (issue 36)
    model_level_runs: tuple[int, ...] = ()
    model_level_side: str = ""
    model_attribution: Attribution | None = None
    pre_grad: PassRewrite | None = None  # the torch-level rewrite behind a pre-grad pass's divergence
    scan: dict[str, Any] = field(default_factory=dict)  # "batch" / "step" findings of a scan
    budget: str | None = None  # what the exhausted budget cut, when it did
    peak_rss_bytes: int | None = None  # this process's peak resident memory when the search ended
    offload: dict[str, Any] | None = None  # what waited on disk and where (verdict/offload.Offload.to_json)
    interrupted: dict[str, Any] | None = None  # {"signal", "signum", "stage"}: SIGINT/SIGTERM stopped the run
    search: RunSearch | None = None  # the run's one search object (the writer judges with it too)
    model_level_check: bool = True  # may the engine recompile the model through torch.compile
    # The model came compiled with the user's own backend and the graphs it hands Inductor were
    # captured inside it (None: captured the plain way).
    backend_run: BackendRun | None = None
    # Graphs judged in segments because judging them at once would not fit the memory left
    # (``release.graph_pieces``): each graph's compute nodes, segment by segment
    segments: dict[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)

    @property
    def draws_random(self) -> bool:
        """Some judged graph draws random numbers (dropout): raw eager/compiled comparisons of the
        whole model differ by draws alone; the engine feeds eager's draws to both sides."""
        return any(g.draws_random for g in self.graphs)

    @property
    def captured_count(self) -> int:
        return len(self.captured)

    @property
    def forward_graphs(self) -> dict[int, Any]:
        return {g.index: g.graph_module for g in self.captured if g.kind == "forward"}

    @property
    def finding(self) -> GraphFinding | None:
        return next((g for g in self.graphs if g.has_finding), None)

    @property
    def names_an_op(self) -> bool:
        """An op is named: a graph's finding, a torch-level pass's rewrite, or a backward op that
        misreads the layout compiled saved."""
        return self.finding is not None or self.pre_grad is not None or self.layout_finding is not None

    @property
    def layout_finding(self) -> GraphFinding | None:
        """The forward graph whose saved value the compiled forward lays out otherwise and a backward
        op misreads (``GraphFinding.layout_misread``): a finding of the run without a culprit subgraph
        (each graph matches alone), named by that backward op, its repro the op on both layouts."""
        return next((g for g in self.graphs if g.layout_misread is not None), None) if self.finding is None else None


def model_level_noted(verdict: SubgraphVerdict) -> dict[str, Any]:
    """The model-level check's verdict as the run records it (``RunFinding.model_level``): its
    outcome and, where it was decided over runs, how (``runs``, the side whose values changed)."""
    return {"model_level": verdict.outcome.value, "model_level_runs": verdict.runs,
            "model_level_side": verdict.nondeterministic}
