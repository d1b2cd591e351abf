"""The one oracle: compile a subgraph, feed it reference inputs, judge its outputs.

Every strategy (single nodes, windows, decompositions, ...) asks the same question through
:meth:`GraphContext.judge`, so a node, a window and the whole graph are held to one rule
(:mod:`bisect_engine.verdict.compare`). A compile or run that raises is a ``CRASH`` verdict, never a
swallowed exception.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
import operator
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence, TypeVar

import torch
import torch.fx as fx

from ..search import stop_if_out_of_memory
from .graphs import CapturedGraph, ReadOnlyInputWritten
from .compare import (Departure, Difference, clearly_above_eager, closer_to_fp64, Outcome, Tolerance, TensorVerdict,
                      material_difference, same_bits, same_layout_and_bits, worst)
from .graphs import (GraphView, Subgraph, build_copies, build_subgraph, constant_names, is_bookkeeping, plan_copies,
                     reference_inputs, value_nodes)
from .compiler import Compiler, run_compiled
from .fx_eval import clone_value, interpret, mutates, run_graph, stream_graph, to_fp64
from .judgement import (GRAPH, Oracle, OutputFacts, computed_by, decided_by_runs, judge_against_eager, judge_outputs,
                        output_facts, run_to_run_spread, scale_floor, with_run_floors)
from .kernels import OutputCode
from .noise import NoiseFloors, noise_floors, program_data
from .offload import spill_graph_values, spill_unread

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SubgraphVerdict:
    """The judgement of one compiled subgraph: per output, and overall."""

    outcome: Outcome
    outputs: dict[str, TensorVerdict] = field(default_factory=dict)
    compiled_values: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    copies: int = 0  # per-node check: distinct compiled copies (0: not a per-node check)
    calls: int = 0  # per-node check: runs of the compiled graph
    code: tuple[OutputCode, ...] = ()  # what Inductor generated, when the candidate asked to keep it
    sizes: tuple[tuple[int, str], ...] = ()  # a size sweep: (size, "match"/"mismatch"/"crash"/"invalid")
    # a mismatch whose values changed run to run (same inputs): (compiled runs that mismatched, compiled runs judged)
    runs: tuple[int, ...] = ()
    # which side's values changed run to run there: "compiled", "eager" or "both" ("": neither, or not asked)
    nondeterministic: str = ""

    @property
    def failing_outputs(self) -> list[str]:
        return [name for name, v in self.outputs.items() if v.outcome is not Outcome.MATCH]


@dataclass
class GraphContext:
    """A captured graph with its eager reference values, ready to be judged piecewise."""

    captured: CapturedGraph
    view: GraphView
    eager_values: dict[str, Any]
    oracle: Oracle = Oracle()  # the run's judgement policy (reference, tolerance, units, draws, seed)
    # the last few eager replays (see replay): (key, the injected values, every node's replayed value)
    _replays: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = field(default_factory=list, repr=False, compare=False)
    # The whole graph's outputs compiled computes otherwise than eager, each with how it departs
    # from eager against fp64 (:func:`~bisect_engine.verdict.compare.closer_to_fp64`, None where
    # compiled is not the closer), decided from its plain judgement's fp64 run as each output came
    # (:meth:`take_departing`), with the compiled outputs they were judged against: (name ->
    # compiled value, name -> departure). No fp64 value is held for them.
    _departing: tuple[dict[str, Any], dict[str, Departure | None]] | None = field(default=None, repr=False,
                                                                                   compare=False)

    @classmethod
    def from_captured(cls, captured: CapturedGraph, oracle: Oracle = Oracle()) -> "GraphContext":
        captured.check_inputs()
        torch.manual_seed(oracle.seed)
        values = interpret(captured.graph_module, captured.inputs)
        return cls(captured, GraphView(captured.graph_module), values, oracle)

    @property
    def tolerance(self) -> Tolerance:
        """The tolerance graphs and nodes are judged with (exact equality for ``--oracle bitwise``)."""
        return self.oracle.tolerance_at(GRAPH)

    @property
    def rng_strict(self) -> bool:
        return self.oracle.rng_strict

    @property
    def seed(self) -> int:
        return self.oracle.seed

    @property
    def reference(self) -> str:
        """"fp64", or "eager": compiled is judged against eager's values (--oracle eager/bitwise)."""
        return self.oracle.reference

    def _draws(self, fp64: bool) -> dict[str, Any]:
        return {name: to_fp64(self.eager_values[name]) if fp64 else self.eager_values[name]
                for name in self._random_values if name in self.eager_values}

    @functools.cached_property
    def _random_values(self) -> set[str]:
        return {v.name for name in self.view.random_names() for v in value_nodes(self.view.nodes[name])}

    @property
    def not_results(self) -> set[str]:
        """Values that are no result to compare: what random ops draw, and the RNG state attention
        kernels return."""
        return self._random_values | self._bookkeeping

    @functools.cached_property
    def _bookkeeping(self) -> set[str]:
        """The RNG state and unused slots attention kernels return (:func:`is_bookkeeping`):
        judged by shape and dtype only, whatever the RNG rule."""
        return {name for name, node in self.view.nodes.items() if is_bookkeeping(node)}

    @property
    def name(self) -> str:
        return self.captured.name

    @functools.cached_property
    def constants(self) -> frozenset[str]:
        """Values the user's compile froze into constants (its parameters under
        ``freezing``, and what is computed from them alone); every copy compiles them so."""
        return constant_names(self.view, self.captured.frozen)

    def constant_positions(self, input_names: Sequence[str]) -> list[int]:
        return [i for i, name in enumerate(input_names) if name in self.constants]

    @property
    def constants_frozen(self) -> bool:
        """Whether the constants are parameters frozen by the user's ``freezing`` (then every
        constant is compiled as a parameter, and Inductor freezes them all); else they are the
        graph's own tensor constants, compiled as plain attributes."""
        return bool(self.captured.frozen)

    def release_values(self) -> None:
        """Let go of every value this context holds (its eager values, its replays): the graph is
        judged and nothing later reads them (``localise/release.py``)."""
        self.eager_values = {}
        self._replays = []
        self._departing = None

    def take_departing(self, compiled_values: dict[str, Any]) -> dict[str, Departure | None] | None:
        """The whole graph's outputs whose compiled value departs from eager's (eager as the
        reference, :func:`~bisect_engine.verdict.judgement.judge_against_eager`), by name in
        ``compiled_values``' order, each with its departure against fp64 (None: compiled is not the
        closer), decided in the whole graph's judgement as its fp64 run gave each output (no fp64
        value is held, nor computed again), then let go; None where they were not kept for these
        very values (a graph that draws random numbers, writes in place, or was not judged)."""
        kept, self._departing = self._departing, None
        if kept is None:
            return None
        judged, departures = kept
        if len(judged) != len(compiled_values) or any(compiled_values.get(n) is not v for n, v in judged.items()):
            return None
        return {name: departures[name] for name in compiled_values if name in departures}

    def drop_departing(self) -> None:
        """Let go of the kept departures (a graph that diverges: no departures look reads them)."""
        self._departing = None

    def _keeps_departing(self, subgraph: Subgraph) -> bool:
        """Whether judging ``subgraph`` keeps the departing outputs' departures: the whole graph
        (its fp64 run then gives the captured graph's fp64 values), no random draws, fp64 as the
        reference (departures are judged against fp64 only)."""
        return self.oracle.reference == "fp64" and not self.view.random_names() and self._is_whole(subgraph)

    def _is_whole(self, subgraph: Subgraph) -> bool:
        """Whether ``subgraph`` is the captured graph's whole (its placeholders in, every compilable node)."""
        return (set(subgraph.input_names) <= set(self.view.placeholder_names())
                and set(subgraph.node_names) == set(self.view.compilable_names(keep_random=self.rng_strict)))

    def replay(self, overrides: dict[str, Any]) -> dict[str, Any]:
        """Every node's value in an eager run of the captured graph with ``overrides`` substituted
        (a node's compiled value injected). The last few are kept: a culprit's replay is asked for
        by its reach, the whole graph's injected verdict and its propagators, each an eager run of
        the whole graph. Keyed by the injected objects themselves (held, so no id is reused)."""
        self.captured.check_inputs()
        key = tuple(sorted((name, id(value)) for name, value in overrides.items()))
        for index, (known, _held, values) in enumerate(self._replays):
            if known == key:
                self._replays.append(self._replays.pop(index))
                return values
        values = interpret(self.captured.graph_module, self.captured.inputs, overrides=overrides)
        self._replays.append((key, tuple(overrides.values()), values))
        del self._replays[:-REPLAYS_KEPT]
        return values

    def subgraph(self, names: Any, *, isolate: bool = False) -> Subgraph:
        return build_subgraph(self.view, names, isolate=isolate, outputs="all" if isolate else "escaping")

    def whole(self) -> Subgraph:
        return self.subgraph(self.view.compilable_names(keep_random=self.rng_strict))

    def judge(
        self,
        subgraph: Subgraph,
        compiler: Compiler,
        *,
        label: str,
        config_patches: dict[str, Any] | None = None,
        decompositions: dict[Any, Callable[..., Any]] | None = None,
        fallbacks: tuple[Any, ...] = (),
        inputs: list[Any] | None = None,
        keep_code: bool = False,
        shapes: str = "as_captured",
    ) -> SubgraphVerdict:
        """``inputs``: other values for the subgraph's placeholders (e.g. random ones); eager then
        runs the subgraph on them instead of reading the reference values. ``keep_code``: the
        verdict keeps what Inductor generated (even when the compiled code then fails to run)."""
        if not subgraph.node_names:
            return SubgraphVerdict(Outcome.INVALID, error="empty subgraph")
        self.captured.check_inputs()  # outside the try: our harness's failure, never a crash verdict
        own_inputs = inputs is not None
        inputs = inputs if inputs is not None else reference_inputs(subgraph, self.eager_values)
        code: list[OutputCode] | None = [] if keep_code else None
        try:
            compiled = compiler.compile(
                subgraph.graph_module, inputs, label=label,
                config_patches=config_patches, decompositions=decompositions, fallbacks=fallbacks,
                output_code=code, shapes=shapes, constants=self.constant_positions(subgraph.input_names),
                constants_frozen=self.constants_frozen,
            )
            torch.manual_seed(self.seed)
            writes = mutates(subgraph.graph_module)  # inputs copied for a run only where it may write them
            held = not writes and self._is_whole(subgraph)  # views of parameters and inputs held as eager's are
            compiled_outputs = run_compiled(compiled, inputs, writes, held)
            verdict = self._verdict(subgraph, inputs, compiled_outputs, own_inputs)
            if verdict.outcome is Outcome.MISMATCH:
                verdict = self._over_runs(verdict, compiled_outputs,
                                          lambda: run_compiled(compiled, inputs, writes, held),
                                          lambda outputs, spreads: self._verdict(subgraph, inputs, outputs, own_inputs,
                                                                                 spreads),
                                          self._eager_runs(subgraph, inputs, own_inputs))
        except ReadOnlyInputWritten:  # the recorded values are no longer trusted: never a verdict
            raise
        except Exception as error:  # the verdict says so (a budget cut is no Exception: it goes on)
            return dataclasses.replace(_crash(label, error), code=tuple(code or ()))
        return dataclasses.replace(verdict, code=tuple(code)) if code else verdict

    def _over_runs(self, verdict: SubgraphVerdict, outputs: list[Any], run: Callable[[], list[Any]],
                   judge: Callable[[list[Any], list[float]], SubgraphVerdict],
                   eager: EagerRuns | None = None) -> SubgraphVerdict:
        """A mismatch decided over runs where the compiled values, or eager's (``eager``), change
        run to run on the same inputs (:func:`over_runs`: judged against the union of both sides'
        spread, then by most runs; the verdict's ``runs`` says how many mismatched, its
        ``nondeterministic`` which side changed). ``judge``: outputs and their run-to-run spreads in."""
        decided = over_runs(verdict, outputs, run, judge, lambda v: v.outcome is not Outcome.MATCH, self.seed,
                            eager=eager)
        if decided is None:
            return verdict
        chosen, runs, side = decided
        log.info("%s: %s values change run to run; %d of %d compiled runs mismatch", self.name, side, *runs)
        return dataclasses.replace(chosen, runs=runs, nondeterministic=side)

    def _eager_runs(self, subgraph: Subgraph, inputs: list[Any], own_inputs: bool) -> EagerRuns:
        """Eager's side of a candidate for :func:`over_runs`: its first values (the captured ones,
        None where the candidate ran eager on inputs of its own) and one more eager run of the
        subgraph on the same inputs (random draws as judged; inputs copied only for a graph that
        writes them: a whole graph's parameters are not held twice)."""
        first = None if own_inputs else [self.eager_values.get(name) for name in subgraph.output_names]
        writes = mutates(subgraph.graph_module)
        return first, lambda: run_graph(subgraph.graph_module, [clone_value(v) for v in inputs] if writes else inputs,
                                        overrides=self._draws(fp64=False))

    def judge_nodes(self, names: list[str], compiler: Compiler, *, label: str,
                    max_calls: int | None = None) -> SubgraphVerdict:
        """Judge each named node alone on its reference inputs, in one compile.

        The same verdict as judging ``subgraph(names, isolate=True)``, but nodes with one
        :func:`~bisect_engine.verdict.graphs.node_signature` share one compiled copy, which is run once
        per member (a 40-layer stack compiles each distinct node once, not 40 times). With
        ``rng_strict`` every node keeps a copy of its own: compiled draws must then follow
        eager's in graph order.
        """
        self.captured.check_inputs()
        subgraph = self.subgraph(names, isolate=True)
        if self.rng_strict or not names:
            verdict = self.judge(subgraph, compiler, label=label)
            return dataclasses.replace(verdict, copies=len(names), calls=1)
        plan = plan_copies(self.view, names, self.eager_values, max_calls, self.constants)
        copies = build_copies(self.view, plan)
        first: dict[str, Any] = {}  # the first run's values, by name: a rerun keeps of its own only what changed
        try:
            # Every placeholder its own tensor: a value fed to two copies must not look aliased.
            example = [clone_value(v) for v in copies.inputs(self.view, self.eager_values, 0)]
            compiled = compiler.compile(copies.graph_module, example, label=label,
                                        constants=copies.positions(self.view, self.constants),
                                        constants_frozen=self.constants_frozen)
            del example  # copies for the compile only: gone before the compiled values come

            writes = mutates(copies.graph_module)  # the nodes' inputs (most of the graph's values) copied only then
            # where nothing writes in place, a node's compiled value that is eager's bit for bit, with its
            # strides, is held as eager's own tensor (the same bits to every judgement)
            as_eager = not writes and not mutates(self.captured.graph_module)

            def run() -> list[Any]:
                # as the values come, call by call: the first run's that are eager's are eager's; a
                # rerun's that are the first run's bit for bit are the first's (``changed_only``). A run
                # holds what differs, not a second set of every node's values.
                values: dict[str, Any] = {}
                for call in range(plan.calls):
                    torch.manual_seed(self.seed)
                    outputs = run_compiled(compiled, copies.inputs(self.view, self.eager_values, call), writes)
                    for name, value in copies.assign(self.view, call, outputs).items():
                        if first:
                            kept = first.get(name)
                            values[name] = kept if kept is not None and _same_bits(kept, value) else value
                        else:
                            kept = self.eager_values.get(name) if as_eager else None
                            values[name] = kept if same_layout_and_bits(kept, value) else value
                    del outputs
                return [values[name] for name in subgraph.output_names]

            inputs = reference_inputs(subgraph, self.eager_values)
            compiled_outputs = run()
            first.update(zip(subgraph.output_names, compiled_outputs))
            verdict = self._verdict(subgraph, inputs, compiled_outputs, own_inputs=False)
            if verdict.outcome is Outcome.MISMATCH:
                verdict = self._over_runs(verdict, compiled_outputs, run,
                                          lambda outputs, spreads: self._verdict(subgraph, inputs, outputs, False, spreads),
                                          self._eager_runs(subgraph, inputs, False))
        except ReadOnlyInputWritten:  # the recorded values are no longer trusted: never a verdict
            raise
        except Exception as error:  # a crash verdict (a budget cut is no Exception: it goes on)
            return dataclasses.replace(_crash(label, error), copies=len(plan.members), calls=plan.calls)
        return dataclasses.replace(verdict, copies=len(plan.members), calls=plan.calls)

    def judge_whole_values(self, values: dict[str, Any]) -> SubgraphVerdict:
        """The whole graph's outputs judged by the rule a compiled whole graph meets, on values
        computed without compiling it (an eager replay with some nodes' compiled values injected)."""
        subgraph = self.whole()
        if not subgraph.node_names:
            return SubgraphVerdict(Outcome.INVALID, error="empty subgraph")
        inputs = reference_inputs(subgraph, self.eager_values)
        return self._verdict(subgraph, inputs, [values.get(name) for name in subgraph.output_names], own_inputs=False)

    def output_facts(self, names: Sequence[str], outputs: Sequence[Any],
                     candidate: fx.GraphModule | None = None, with_noise: bool = True) -> list[OutputFacts]:
        """The policy's facts of the named outputs, by the captured graph (units from ``outputs``,
        or coarser from an op upstream in ``candidate``, the subgraph that computes them; the
        noise floor an output carries from upstream where ``candidate`` computes its inputs too,
        its op's own where they are the candidate's inputs, as in a per-node check)."""
        noise = ({name: self.noise_floor(name, carried=_computed_upstream(candidate, name)) for name in names}
                 if with_noise else None)
        return output_facts(self.oracle, self.view.nodes, self.eager_values, names, self._random_values, outputs,
                            candidate, self._bookkeeping, noise)

    @functools.cached_property
    def noise(self) -> NoiseFloors:
        """The noise model of this graph (``verdict/noise.py``): one more fp64 run, perturbed, from
        the captured inputs. It reads none of the graph's eager values and replays: they wait on disk
        meanwhile where memory asks (``offload.spill_graph_values``; paged back in as judged)."""
        dtypes = {name: value.dtype for name, value in self.eager_values.items() if isinstance(value, torch.Tensor)}
        self.captured.check_inputs()
        spill_graph_values(self)
        return noise_floors(self.captured.graph_module, self.captured.inputs, dtypes, self._undrawn())

    def _undrawn(self) -> dict[str, Any]:
        """The values the noise model holds as they are, drawing no rounding: what is no result
        (:attr:`not_results`), and the graph's inputs that are the program's data
        (:func:`~bisect_engine.verdict.noise.program_data`: a float mask of 0 and 1, autograd's seed
        of ones), its parameters aside (held by reference: a LayerNorm's weight of ones is still
        drawn, as before)."""
        fixed = {name: self.eager_values[name] for name in self.not_results if name in self.eager_values}
        parameters = {id(tensor) for tensor, _ in self.captured.shared}
        for name, value in zip(self.view.placeholder_names(), self.captured.inputs):
            if name not in fixed and id(value) not in parameters and program_data(value):
                fixed[name] = value
        return fixed

    def noise_floor(self, name: str, carried: bool = True) -> float:
        """The scale ``name``'s rounding noise lives at where it cancelled (0: it did not): what
        it inherits from upstream (``carried``, against the fp64 reference only: against eager,
        an upstream rounding compiled skipped is what the user asked to see), else its op's own."""
        return self.noise.floor(name, carried and self.oracle.reference == "fp64")

    def scale_floor(self, name: str) -> float:
        """The scale of what a reduction or matmul combined, looking through reshapes
        (:func:`~bisect_engine.verdict.judgement.scale_floor`), or the scale the noise it carries
        lives at, the larger."""
        return max(scale_floor(self.view.nodes, self.eager_values, name), self.noise_floor(name))

    def computed_by(self, name: str) -> fx.Node | None:
        """The node that computed value ``name``, looking through the views and copies that only
        reshape or copy it (a tensor saved for the backward is often ``clone(add)``)."""
        return computed_by(self.view.nodes, name)

    def output_difference(self, name: str, value: Any) -> Difference:
        """Whether ``value`` differs materially from eager's ``name``, at the scale of what produced
        it (:meth:`scale_floor`): the one way a graph value is judged by the material rule."""
        return material_difference(self.eager_values.get(name), value, scale_floor=self.scale_floor(name))

    def material_output_difference(self, name: str, value: Any) -> Difference | None:
        """:meth:`output_difference` where it is material, else None; the noise model is consulted
        only where the value differs materially at the floor without it. A floor only raises the
        scale ``material_difference`` measures at (material: ``max |diff| > k * max(RMS, RMS,
        floor)``; every other reason ignores the floor), so what is not material at the lower
        floor is not material at the higher one: a clean graph's outputs cost no noise run."""
        eager = self.eager_values.get(name)
        if not material_difference(eager, value, scale_floor=scale_floor(self.view.nodes, self.eager_values, name)).material:
            return None
        difference = self.output_difference(name, value)
        return difference if difference.material else None

    def verdict_from(self, subgraph: Subgraph, inputs: list[Any], compiled_outputs: list[Any] | None,
                     own_inputs: bool, error: str = "", reruns: Sequence[Sequence[Any]] = ()) -> SubgraphVerdict:
        """The verdict :meth:`judge` gives, from outputs compiled and run elsewhere (a worker
        process: ``localise/workers.py``), or from the ``error`` text its compile or run raised.
        ``reruns``: the worker's further runs on the same inputs, sent only where they changed
        (``RUNS - 1`` of them): a mismatch is then decided over runs as :meth:`judge` decides it."""
        if compiled_outputs is None:
            return SubgraphVerdict(Outcome.CRASH, error=error)
        verdict = self._verdict(subgraph, inputs, compiled_outputs, own_inputs)
        if verdict.outcome is Outcome.MISMATCH:
            # no reruns sent: the worker's second run gave the same bits (eager's side is still asked)
            further = iter(reruns) if len(reruns) == RUNS - 1 else iter([compiled_outputs])
            verdict = self._over_runs(verdict, compiled_outputs, lambda: list(next(further)),
                                      lambda outputs, spreads: self._verdict(subgraph, inputs, outputs, own_inputs, spreads),
                                      self._eager_runs(subgraph, inputs, own_inputs))
        return verdict

    def _verdict(self, subgraph: Subgraph, inputs: list[Any], compiled_outputs: list[Any],
                 own_inputs: bool, spreads: Sequence[float] = ()) -> SubgraphVerdict:
        """The outputs judged first without the noise model: its floors only loosen the rule, so a
        match that is not clearly above eager's error stands with them too, and the noise run (an
        fp64 run perturbed op by op, many times an fp64 run's cost on large weights) is made only
        for a graph where it can change the verdict or a below-tolerance look. ``spreads``: per
        output, how far its compiled values lie apart run to run (:meth:`_over_runs`)."""
        eager_outputs = (run_graph(subgraph.graph_module, inputs, overrides=self._draws(fp64=False)) if own_inputs
                         else [self.eager_values[name] for name in subgraph.output_names])
        names, candidate = subgraph.output_names, subgraph.graph_module
        plain_facts = with_run_floors(self.output_facts(names, eager_outputs, candidate, with_noise=False), spreads,
                                      eager_outputs)
        keep = not own_inputs and self._keeps_departing(subgraph)
        whole = not own_inputs and self._is_whole(subgraph)
        plain = self._judged(subgraph, inputs, eager_outputs, compiled_outputs, plain_facts, keep=keep, whole=whole)
        if plain.outcome is Outcome.MATCH and not any(clearly_above_eager(v) for v in plain.outputs.values()):
            return plain
        # Not clearly clean: judged again at the noise floors. The departures kept stand (which
        # outputs depart, and how, is decided against eager and fp64, not by the floors).
        facts = with_run_floors(self.output_facts(names, eager_outputs, candidate, with_noise=True), spreads,
                                eager_outputs)
        # An output's verdict is a function of its values and its facts alone: those whose facts the
        # noise floors leave as they were keep the plain verdict (judged once, not streamed again).
        changed = {i for i, (before, after) in enumerate(zip(plain_facts, facts)) if before != after}
        if len(plain.outputs) != len(names):
            changed = set(range(len(names)))
        if not changed:
            return plain
        known = [plain.outputs[name] for name in names] if len(plain.outputs) == len(names) else None
        return self._judged(subgraph, inputs, eager_outputs, compiled_outputs, facts, changed, known, whole=whole)

    def _judged(self, subgraph: Subgraph, inputs: list[Any], eager_outputs: list[Any], compiled_outputs: list[Any],
                facts: list[OutputFacts], only: set[int] | None = None,
                known: list[TensorVerdict] | None = None, keep: bool = False, whole: bool = False) -> SubgraphVerdict:
        """The outputs judged with ``facts``; ``only``: the positions judged again, the others'
        verdicts taken from ``known`` (judged before with the same facts); ``keep``: the departing
        outputs' departures kept (:meth:`take_departing`); ``whole``: the captured graph's whole on
        its recorded inputs, whose fp64 run reads none of the eager values between its inputs and
        its outputs: they wait on disk while it runs (``offload.spill_unread``, where memory asks;
        without ``--memory-budget`` always: a backward's activation gradients are as large as its
        weight gradients)."""
        if whole:
            spill_unread(self, [*subgraph.input_names, *subgraph.output_names, *self._random_values])
        verdicts = self._streamed(subgraph, inputs, eager_outputs, compiled_outputs, facts,
                                  only if known is not None else None, known, keep)
        if verdicts is None:
            # Random draws are data for the fp64 reference too: a redraw would be no reference at all.
            fp64_outputs = (run_graph(subgraph.graph_module, inputs, upcast=True, overrides=self._draws(fp64=True))
                            if self.oracle.needs_fp64(GRAPH) else None)
            verdicts = judge_outputs(self.oracle, GRAPH, eager_outputs, fp64_outputs, compiled_outputs, facts)
        if len(verdicts) != len(subgraph.output_names):
            return SubgraphVerdict(Outcome.MISMATCH, error=verdicts[0].reason)
        outputs = dict(zip(subgraph.output_names, verdicts))
        return SubgraphVerdict(
            worst(verdicts).outcome if verdicts else Outcome.MATCH,
            outputs,
            dict(zip(subgraph.output_names, compiled_outputs)),
        )

    def _streamed(self, subgraph: Subgraph, inputs: list[Any], eager_outputs: list[Any], compiled_outputs: list[Any],
                  facts: list[OutputFacts], only: set[int] | None = None,
                  known: list[TensorVerdict] | None = None, keep: bool = False) -> list[TensorVerdict] | None:
        """The fp64 judgement output by output as the fp64 run produces each (then dropped): the
        fp64 values held at once are the run's live set, not every output (a per-node check's
        subgraph outputs every node). None where it does not apply (no fp64 reference, outputs
        that do not pair up, a graph that writes in place): judged all at once instead."""
        graph_module = subgraph.graph_module
        output = next(n for n in reversed(graph_module.graph.nodes) if n.op == "output")
        returned = output.args[0] if isinstance(output.args[0], (tuple, list)) else [output.args[0]]
        if (not self.oracle.needs_fp64(GRAPH) or len(compiled_outputs) != len(eager_outputs)
                or len(returned) != len(eager_outputs) or mutates(graph_module)):
            return None
        positions: dict[fx.Node, list[int]] = {}
        for index, node in enumerate(returned):
            if isinstance(node, fx.Node):
                positions.setdefault(node, []).append(index)
        verdicts: list[TensorVerdict | None] = [None] * len(returned)
        if only is not None and known is not None and len(known) == len(returned):
            verdicts = [None if i in only else verdict for i, verdict in enumerate(known)]

        def judge_at(i: int, fp64: Any) -> None:
            if verdicts[i] is not None:
                return
            verdicts[i] = judge_outputs(self.oracle, GRAPH, [eager_outputs[i]], [fp64], [compiled_outputs[i]],
                                        [facts[i]])[0]
            name = subgraph.output_names[i]
            if keep and name not in departing and judge_against_eager(
                    self.oracle, eager_outputs[i], compiled_outputs[i]).outcome is Outcome.MISMATCH:
                # decided now, while its fp64 value is at hand: none is held to the departures look
                departing[name] = closer_to_fp64(eager_outputs[i], fp64, compiled_outputs[i], self.tolerance)

        def judge(node: fx.Node, fp64: Any) -> None:
            for i in positions[node]:
                judge_at(i, fp64)

        for index, node in enumerate(returned):  # a constant output (a backward's None): its own reference
            if not isinstance(node, fx.Node):
                judge_at(index, node)
        departing: dict[str, Departure | None] = {}
        stream_graph(graph_module, inputs, upcast=True, overrides=self._draws(fp64=True), sink=judge)
        judged = [v for v in verdicts if v is not None]
        if keep and len(judged) == len(verdicts):
            self._departing = (dict(zip(subgraph.output_names, compiled_outputs)), departing)
        return judged if len(judged) == len(verdicts) else None


REPLAYS_KEPT = 2
RUNS = 5  # a run-dependent mismatch: judged against the spread of this many runs, then by most of them
Judged = TypeVar("Judged")


# Eager's side of a candidate for over_runs: its first values (None: not kept) and one more eager run
EagerRuns = tuple[Optional[list[Any]], Callable[[], list[Any]]]


def over_runs(first: Judged, outputs: list[Any], run: Callable[[], list[Any]],
              judge: Callable[[list[Any], list[float]], Judged], failed: Callable[[Judged], bool],
              seed: int, runs: int = RUNS,
              eager: EagerRuns | None = None) -> tuple[Judged, tuple[int, int], str] | None:
    """A failing verdict (``first``, on ``outputs``) decided over runs, where the compiled values
    or eager's change run to run on the same inputs: one more compiled run (``run``, under
    ``seed``) and one more eager run (``eager``: :func:`eager_spread`) say whether they do (None:
    each side gave the same bits, ``first`` stands). Where compiled's change, ``runs`` compiled
    runs in all (else its one); each is judged again against the union of both sides' spreads
    (``judge(outputs, spreads)``, each side's from
    :func:`~bisect_engine.verdict.judgement.run_to_run_spread`, their larger per output, floors by
    :func:`~bisect_engine.verdict.judgement.with_run_floors`: a difference from the reference no
    larger than rounding-sized runs of either side differ among themselves is noise; eager's order
    is one valid order, a CUDA atomic's or a threaded reduction's), and the failure stands only
    where most compiled runs still fail there
    (:func:`~bisect_engine.verdict.judgement.decided_by_runs`). The one decision for a per-node
    check, a window, a whole graph and a scan's batch or step; runs cost no compile. Returns the
    verdict (a failing run's where it stands, else a passing run's), (runs that failed, runs) and
    the side whose values changed: "compiled", "eager" or "both". Of each rerun only the outputs
    that changed are held (:func:`changed_only`), and each run is let go once judged: no more
    than the decision needs (the spread needs every run before any is judged)."""
    torch.manual_seed(seed)
    again = changed_only(run(), outputs)
    compiled_changes = not bitwise_equal(outputs, again)
    eager_spreads = eager_spread(eager, seed, runs) if eager is not None else []
    eager_changes = bool(eager_spreads)
    if not compiled_changes and not eager_changes:
        return None
    seen = [outputs, again] if compiled_changes else [outputs]
    del again
    while compiled_changes and len(seen) < runs:
        torch.manual_seed(seed)
        seen.append(changed_only(run(), outputs))
    spreads = run_to_run_spread(seen)
    if len(eager_spreads) == len(spreads):  # the union: per output, the larger spread
        spreads = [max(pair) for pair in zip(spreads, eager_spreads)]
    # Each run judged in turn and let go: only the verdicts the decision returns are kept (a
    # verdict may hold its run's values), and a run's tensors go once it is judged.
    total, failures, first_failing, first_passing = len(seen), 0, None, None
    seen.reverse()
    while seen:
        verdict = judge(seen.pop(), spreads)
        if failed(verdict):
            failures += 1
            first_failing = verdict if first_failing is None else first_failing
        else:
            first_passing = verdict if first_passing is None else first_passing
        del verdict
    stands = decided_by_runs([True] * failures + [False] * (total - failures))
    chosen = first_failing if stands else first_passing
    assert chosen is not None  # stands: a run failed; else most passed
    side = "both" if compiled_changes and eager_changes else ("compiled" if compiled_changes else "eager")
    return chosen, (failures, total), side


def changed_only(run: list[Any], first: Sequence[Any]) -> list[Any]:
    """A rerun's outputs with each one bit for bit equal to ``first``'s replaced by ``first``'s own
    value (:func:`bitwise_equal`): the same values for every judgement and spread, and
    :func:`over_runs` holds of each run only the outputs that changed (a model whose one
    duplicate-index gradient changes run to run holds that gradient per run, not every output)."""
    if len(run) != len(first):
        return run
    return [kept if _same_bits(kept, value) else value for value, kept in zip(run, first)]


def _same_bits(a: Any, b: Any) -> bool:
    """:func:`bitwise_equal` with the sign of every zero too (an exact rule reads it). Two tensors
    with the very same bits are that at once (:func:`~bisect_engine.verdict.compare.same_bits`, one
    integer pass: a rerun's unchanged output, the common case); else the passes below decide."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and same_bits(a, b):
        return True
    if not bitwise_equal([a], [b]):
        return False
    if isinstance(a, torch.Tensor) and a.is_floating_point() and a is not b:
        return torch.equal(torch.signbit(a.detach()).cpu(), torch.signbit(b.detach()).cpu())
    return True


def eager_spread(eager: EagerRuns, seed: int, runs: int = RUNS) -> list[float]:
    """Per output, how far eager's runs of a candidate lie apart where they change run to run on
    the same inputs (:func:`~bisect_engine.verdict.judgement.run_to_run_spread` over ``runs``
    runs), else []: one more run compared with the first values (``eager``'s, or a run of its own
    where none are kept); where they differ, one more, and only where that one differs from the
    last too is eager nondeterministic (a captured value our harness computed otherwise, a whole
    graph interpreted where the candidate runs a cut of it, is no run-to-run change). Eager's runs
    cost no compile (where a candidate failed, one eager run of it) and are measured as they come:
    the first values and, of the reruns, only the outputs that changed (:func:`changed_only`)."""
    first, rerun = eager

    def again() -> list[Any]:
        torch.manual_seed(seed)
        return rerun()

    first = again() if first is None else first
    second = changed_only(again(), first)  # each rerun holds what changed: the first values stand for the rest
    if bitwise_equal(first, second):
        return []
    third = changed_only(again(), first)
    if bitwise_equal(second, third):
        log.debug("eager's first values differ from two equal reruns: our harness, not run to run")
        return []
    spreads = [max(pair) for pair in zip(run_to_run_spread([first, second]), run_to_run_spread([first, third]))]
    del second, third
    for _ in range(runs - 3):
        spreads = [max(pair) for pair in zip(spreads, run_to_run_spread([first, again()]))]
    return spreads


def bitwise_equal(first: Sequence[Any], second: Sequence[Any]) -> bool:
    """The same values bit for bit (NaNs in the same places count as equal)."""
    if len(first) != len(second):
        return False
    for a, b in zip(first, second):
        if a is b:  # one value (a rerun's output kept as the first's, :func:`changed_only`): NaNs count as equal
            continue
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.shape != b.shape or a.dtype != b.dtype:
                return False
            a, b = a.detach().cpu(), b.detach().cpu()
            if a.is_floating_point() and not torch.equal(a.isnan(), b.isnan()):
                return False
            if not torch.equal(a.nan_to_num(0.0) if a.is_floating_point() else a,
                               b.nan_to_num(0.0) if b.is_floating_point() else b):
                return False
        elif not (a is b or _same(a, b)):
            return False
    return True


_bitwise_equal = bitwise_equal


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable values are different values
        return False


def _computed_upstream(candidate: fx.GraphModule | None, name: str) -> bool:
    """Whether ``candidate`` computes the inputs of the op that makes ``name`` (a window, a whole
    graph) rather than reading them as placeholders (a per-node check); no candidate: True."""
    if candidate is None:
        return True
    node = next((n for n in candidate.graph.nodes if n.name == name), None)
    if node is None:
        return True
    if node.target is operator.getitem and node.args and isinstance(node.args[0], fx.Node):
        node = node.args[0]
    return any(source.op != "placeholder" for source in node.all_input_nodes)


def _crash(label: str, error: Exception) -> SubgraphVerdict:
    stop_if_out_of_memory(error, f"compiling or running {label}")  # the run's memory, not a crash of the code
    log.debug("compile/run of %s crashed:\n%s", label, traceback.format_exc())
    return SubgraphVerdict(Outcome.CRASH, error=f"{type(error).__name__}: {error}")


def merged(verdicts: list[SubgraphVerdict]) -> SubgraphVerdict:
    """One verdict for node groups judged apart (a per-node check split around a crash)."""
    outputs: dict[str, TensorVerdict] = {}
    values: dict[str, Any] = {}
    for verdict in verdicts:
        outputs.update(verdict.outputs)
        values.update(verdict.compiled_values)
    outcome = worst(list(outputs.values())).outcome if outputs else Outcome.MATCH
    return SubgraphVerdict(outcome, outputs, values, copies=sum(v.copies for v in verdicts),
                           calls=max((v.calls for v in verdicts), default=0))
