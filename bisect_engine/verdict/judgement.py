"""The one judgement: a frozen policy (:class:`Oracle`) and one function that judges outputs by it.

The policy is built once from the run's options (``EngineOptions.judgement``) and carried by every
stage that compares a compiled value with eager's: the per-graph context, the model-level check,
the batch and step scans, the pre-grad replays, the script session's calls, and the emitted repro
(which embeds this module and the policy, so it judges exactly as the tool did). What it fixes:

- the **reference**: fp64 (``--oracle outputs/strict``) or eager's own values (``eager/bitwise``);
- the **tolerance** (``--tolerance``; exact equality for ``bitwise``; looser end to end);
- the **unit rule**: an output the user let run below float32 (TF32/bf16 matmuls, convolutions) is
  measured in that unit (:func:`~bisect_engine.verdict.precision.allowed_precision`), read from the
  pinned :class:`~bisect_engine.verdict.precision.Precision` (``None``: torch's flags as they are);
- **scale floors**: a reduction's or matmul's output is measured at the scale of what it combined,
  and any value that cancelled at the scale its rounding noise lives at (``verdict/noise.py``: the
  noise model, computed by the tool and handed in as ``noise``; a repro embeds the numbers);
- the **random-draw rule**: with ``--rng data`` a random op's output is data (only its shape, dtype
  and finiteness count); with ``strict`` it must match eager's draw under the seed;
- the **headline ranking**: ``strict`` names the first divergent node, else the first whose
  divergence reaches an output;
- the **upstream gate**: at scope ``model`` (what the program returns: the model's outputs, a
  script call's), outputs that upstream's own criterion passes
  (``torch._dynamo.utils.same(eager, compiled, fp64_ref, tol=repro_tolerance)``, the check of
  Dynamo's accuracy minifier, with an output below one read at its own scale: :func:`at_own_scale`)
  are never a mismatch unless an exact rule fails (integers, bools,
  dtypes, shapes, non-finite values): :func:`upstream_gate`, whose verdicts keep their errors and
  read ``reason="upstream_same"`` (listed, never a headline).

Each site says which *scope* it judges at; the scope picks reference and tolerance from the policy:

=========  ==================================  ========================  =========================
scope      judges                              reference                 tolerance
=========  ==================================  ========================  =========================
graph      graphs, windows, nodes, repro       the policy's              the policy's graph one
eager      a replay against eager's values     eager                     the policy's graph one
program    pre-grad cuts, script grads          fp64 (eager if none)      ``--tolerance``
model      the model, a script call's outputs  fp64 (eager if none)      end to end (looser)
scan       a scan's batch or training step     fp64 (eager if none)      end to end, no gate
=========  ==================================  ========================  =========================

A scan judges what the whole model returns, as the model-level check does, so at the end-to-end
tolerance (a 40,000-row duplicate-index sum minus its rows' total is ~16 units of its noise floor
off fp64 in every run, eager's pairwise sum 1.6: compounded reordering, not a bug); without the
upstream gate, whose listing needs the graph the scan has not localised yet (a batch it passed
would be a bug made silent, not listed).

Pure: nothing here runs a graph. Embedded verbatim into every repro (after
:mod:`~bisect_engine.verdict.compare` and :mod:`~bisect_engine.verdict.precision`), so it imports
only torch and the standard library outside the ``__package__`` guard.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import torch

if __package__:  # imported by the tool; inside a repro these names are defined above
    from .compare import (BITWISE, Difference, Outcome, Tolerance, TensorVerdict, compare_random_draw,
                          compare_values, exact_float, exact_integer, exact_zero_sign, rounding_unit,
                          MATERIAL_ULPS)
    from .fx_eval import jumps_with_a_rounded_scalar, on_host
    from .precision import MATMUL_OPERANDS, Precision, allowed_precision, op_base_name

GRAPH, EAGER, PROGRAM, MODEL, SCAN = "graph", "eager", "program", "model", "scan"
SCOPES = (GRAPH, EAGER, PROGRAM, MODEL, SCAN)
# End to end, a model's error is the sum of every op's: per-op reorderings (a reduction split one
# way, a fused multiply-add) compound through the layers and the backward, so a clean compiled
# ResNet's BN-bias gradients sit at 3x eager's ulps. Judged with the per-graph rule, that is a
# false alarm; a material difference (a wrong pass: millions of ulps) still stands far outside.
MODEL_TOLERANCE = Tolerance(ratio=4.0, rms_floor_ulps=64.0, max_floor_ulps=1024.0)


@dataclass(frozen=True)
class Oracle:
    """How a compiled value is judged, for the whole run (see the module docstring)."""

    tolerance: Tolerance = Tolerance()  # --tolerance
    kind: str = "outputs"  # --oracle: outputs | strict | eager | bitwise
    rng_strict: bool = False  # --rng strict: random draws must match eager's under ``seed``
    seed: int = 0
    precision: "Precision | None" = None  # None: torch's flags when judging (the tool's own run)

    @property
    def reference(self) -> str:
        """What a graph's compiled values are judged against: "fp64" or "eager"."""
        return "eager" if self.kind in ("eager", "bitwise") else "fp64"

    @property
    def strict_headline(self) -> bool:
        """The headline culprit is the first divergent node (else the first reaching an output)."""
        return self.kind == "strict"

    def tolerance_at(self, scope: str) -> Tolerance:
        if scope in (MODEL, SCAN):
            return Tolerance(*(max(a, b) for a, b in zip(_fields(self.tolerance), _fields(MODEL_TOLERANCE))))
        if scope == PROGRAM:
            return self.tolerance
        return BITWISE if self.kind == "bitwise" else self.tolerance

    def needs_fp64(self, scope: str) -> bool:
        """Whether judging at ``scope`` reads an fp64 reference (else eager's values stand in)."""
        return scope in (PROGRAM, MODEL, SCAN) or (scope == GRAPH and self.reference == "fp64")

    def pinned(self) -> "Oracle":
        """This policy with torch's precision flags as they are now (what a repro embeds)."""
        return self if self.precision is not None else replace(self, precision=Precision.current())


@dataclass(frozen=True)
class OutputFacts:
    """What the policy needs to know of one output besides its values."""

    unit: "float | None" = None  # unit roundoff of a precision the user allowed below the dtype's
    scale_floor: float = 0.0  # the scale of what the op that computed it combined
    random: bool = False  # a random op's draw
    bookkeeping: bool = False  # RNG state an attention kernel returns: a draw whatever the RNG rule
    exact: bool = False  # an integer/bool value computed from integers and constants alone: eager's, exactly
    sign_observed: bool = False  # a float whose zeros' sign a later op reads (signbit, copysign, atan2, a divisor)
    # a float computed by an op whose result jumps with a Python scalar its fp16/bf16 dtype rounds
    # (remainder, fmod, floor division: fx_eval.jumps_with_a_rounded_scalar): eager's or the reference's, exactly
    scalar_exact: bool = False


def judge_outputs(oracle: Oracle, scope: str, eager: Sequence[Any], fp64: "Sequence[Any] | None",
                  compiled: Sequence[Any], facts: "Sequence[OutputFacts] | None" = None) -> "list[TensorVerdict]":
    """Every compiled output against eager's and the reference the policy names at ``scope``
    (``fp64`` may be None where it is not needed or could not be computed: eager then stands in).
    Lengths must agree, else one MISMATCH (as :func:`compare_values`)."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")
    reference = fp64 if oracle.needs_fp64(scope) and fp64 is not None else eager
    facts = list(facts) if facts is not None and len(facts) == len(eager) else [OutputFacts()] * len(eager)
    verdicts = compare_values(list(eager), list(reference), list(compiled), oracle.tolerance_at(scope),
                              [f.unit for f in facts], [f.scale_floor for f in facts])
    if len(verdicts) != len(eager):
        return verdicts
    verdicts = [compare_random_draw(e, c) if f.bookkeeping or (f.random and not oracle.rng_strict) else v
                for e, c, f, v in zip(eager, compiled, facts, verdicts)]
    verdicts = exact_rules(oracle, eager, compiled, verdicts, facts, reference)
    if scope == MODEL and oracle.reference == "fp64" and fp64 is not None:
        return upstream_gate(eager, fp64, compiled, verdicts, [f.scale_floor for f in facts])
    return verdicts


# A mismatch by the ulp rule alone, on outputs upstream's criterion passes: listed, never a headline.
UPSTREAM_SAME = "upstream_same"
_FLOAT_RULES = ("rms", "max")  # the ulp rule's reasons; every other reason is an exact rule


def upstream_gate(eager: Sequence[Any], fp64: Sequence[Any], compiled: Sequence[Any],
                  verdicts: "list[TensorVerdict]", floors: Sequence[float] = ()) -> "list[TensorVerdict]":
    """Never stricter than upstream where upstream is the user's judge (issue 36): when every
    mismatch is the ulp rule's (no exact rule: integers, bools, dtypes, shapes, non-finite values)
    and :func:`upstream_same` passes the outputs together, those mismatches become matches that
    keep their errors and say why (``reason=UPSTREAM_SAME``). ``floors``: each output's noise
    floor (``OutputFacts.scale_floor``), the least scale it is read at (:func:`at_own_scale`)."""
    if not any(v.outcome is Outcome.MISMATCH for v in verdicts) or not ulp_rule_only(verdicts):
        return verdicts
    floors = list(floors) if len(floors) == len(verdicts) else [0.0] * len(verdicts)
    # The mismatches first: ``same`` fails on one of them, or on none, and the outputs after a failure
    # are never read (on GPT-2 small's planted step the logits fail before its 38.6 M-entry gradient
    # is copied at its own scale: 617 MB). The answer is the same in any order.
    if len(eager) == len(compiled) == len(fp64) == len(verdicts):
        order = sorted(range(len(verdicts)), key=lambda i: verdicts[i].outcome is not Outcome.MISMATCH)
        eager, compiled, fp64, floors = ([values[i] for i in order] for values in (eager, compiled, fp64, floors))
    if not upstream_same(list(eager), list(compiled), list(fp64), floors):
        return verdicts
    return [replace(v, outcome=Outcome.MATCH, reason=UPSTREAM_SAME) if v.outcome is Outcome.MISMATCH else v
            for v in verdicts]


def ulp_rule_only(verdicts: "Sequence[TensorVerdict]", differences: "Sequence[Difference]" = ()) -> bool:
    """Every mismatch among ``verdicts`` is the ulp rule's, and every material difference among
    ``differences`` the float one (``scale``): no exact rule failed (integers, bools, dtypes,
    shapes, non-finite values, a saturated fill, the sign of a zero under bitwise), so upstream's
    ``same`` may be the judge of it (:func:`upstream_gate`)."""
    return all(v.outcome is not Outcome.MISMATCH
               or (v.reason in _FLOAT_RULES and not v.new_nonfinite and not v.lost_nonfinite) for v in verdicts) \
        and all(not d.material or d.reason == "scale" for d in differences)


def upstream_same(eager: Any, compiled: Any, fp64: Any, floors: Sequence[float] = ()) -> bool:
    """``torch._dynamo.utils.same(eager, compiled, fp64_ref=fp64, tol=repro_tolerance,
    equal_nan=True)``, as Dynamo's accuracy minifier (``same_two_models``) calls it, quietly (its
    log line on a failure is upstream's, not the user's), output by output, each read at its own
    scale where its values are below one, never below its noise floor in ``floors`` (:func:`at_own_scale`).
    Shared with ``assert_compiled_matches``."""
    import torch._dynamo.config
    from torch._dynamo.utils import same

    if not isinstance(eager, (list, tuple)) or not isinstance(compiled, (list, tuple)) \
            or not isinstance(fp64, (list, tuple)):
        eager, compiled, fp64 = [eager], [compiled], [fp64]
    if not len(eager) == len(compiled) == len(fp64):
        return False
    floors = list(floors) if len(floors) == len(eager) else [0.0] * len(eager)
    try:
        return all(same(*at_own_scale(*_on_one_device(one, other, exact), floor=floor),
                        tol=torch._dynamo.config.repro_tolerance, equal_nan=True, log_error=lambda *args, **kwargs: None)
                   for one, other, exact, floor in zip(eager, compiled, fp64, floors))
    except Exception:  # noqa: BLE001 - values upstream cannot compare: no pass, so the tool's rule stands
        return False


def _on_one_device(*values: Any) -> "tuple[Any, Any, Any]":
    """``values`` as they are where their tensors lie on one device, else each on the host (an fp64
    reference its device could not take was computed there: ``fx_eval.watch_op``)."""
    devices = {value.device for value in values if isinstance(value, torch.Tensor)}
    return values if len(devices) <= 1 else tuple(on_host(value) for value in values)  # type: ignore[return-value]


def at_own_scale(eager: Any, compiled: Any, fp64: Any, floor: float = 0.0) -> "tuple[Any, Any, Any]":
    """One output's three values, read at the output's own scale where it is below one, and never
    below ``floor``, the scale its rounding lives at (the noise model's floor): a value that cancels
    to ~0 (a loss summed over a LayerNorm's output: fp64 3e-14, its terms O(1)) read at its fp64
    magnitude made both sides' rounding 10^13 times larger than ``same`` was written for.

    ``same`` adds an absolute tolerance (``atol=tol`` in its allclose, ``tol / 10`` in its RMSE
    rule) sized for values of order one. On a tensor whose values all sit far below one (a small
    model's gradients, ~1e-4) that term passes any error: a derivative missing a term, 5,000x
    eager's error against fp64, passed. So a float tensor whose fp64 reference's largest finite
    magnitude ``m`` is below one is divided, with its eager and compiled values, by the power of two
    at or above ``m`` (exact in floating point). Never looser than ``same`` as upstream calls it: a
    tensor at or above one (or all zero) is left as it is, and scaling up by a power of two only
    tightens both of ``same``'s rules."""
    if not all(isinstance(value, torch.Tensor) for value in (eager, compiled, fp64)) \
            or not all(value.is_floating_point() for value in (eager, compiled, fp64)) \
            or not eager.shape == compiled.shape == fp64.shape or fp64.numel() == 0:
        return eager, compiled, fp64
    largest = max(_largest_finite(fp64.detach()), floor if math.isfinite(floor) else 0.0)
    if not 0.0 < largest < 1.0:
        return eager, compiled, fp64
    factor = 2.0 ** -math.ceil(math.log2(largest))
    return tuple(value.detach() * factor for value in (eager, compiled, fp64))  # type: ignore[return-value]


def _largest_finite(value: torch.Tensor, chunk: int = 1 << 22) -> float:
    """The largest finite magnitude of ``value`` (0.0 where none is), read ``chunk`` entries at a
    time: no value-sized mask or copy (a 38.6 M-entry fp64 gradient's was 656 MB)."""
    flat = value.reshape(-1)
    largest = 0.0
    for start in range(0, flat.numel(), chunk):
        part = flat[start:start + chunk].abs()
        part = part[torch.isfinite(part)]
        if part.numel():
            largest = max(largest, float(part.max()))
    return largest


def exact_rules(oracle: Oracle, eager: Sequence[Any], compiled: Sequence[Any],
                verdicts: "list[TensorVerdict]", facts: "Sequence[OutputFacts] | None" = None,
                reference: "Sequence[Any] | None" = None) -> "list[TensorVerdict]":
    """The rules where the program is exact, after the ulp rule and under every oracle: the sign of
    a zero where a later op observes it (``facts.sign_observed``), and everywhere under ``--oracle
    bitwise`` (``compare.exact_zero_sign``); an integer value computed from integers and constants
    alone equals eager's (``facts.exact``, ``compare.exact_integer``: never excused by fp64); a float
    an op that jumps with a rounded scalar computes is eager's or ``reference``'s rounded, element by
    element (``facts.scalar_exact``, ``compare.exact_float``)."""
    facts = list(facts) if facts is not None and len(facts) == len(verdicts) else [OutputFacts()] * len(verdicts)
    references = list(reference) if reference is not None and len(reference) == len(verdicts) else list(eager)
    judged = []
    for e, c, v, f, r in zip(eager, compiled, verdicts, facts, references):
        if oracle.kind == "bitwise" or f.sign_observed:
            v = exact_zero_sign(v, e, c)
        if f.scalar_exact:
            v = exact_float(v, e, r, c)
        judged.append(exact_integer(v, e, c) if f.exact else v)
    return judged


def judge_against_eager(oracle: Oracle, eager: Any, value: Any, scale_floor: float = 0.0,
                        exact: bool = False) -> "TensorVerdict":
    """One value against eager's (an eager replay with a compiled value injected): scope ``eager``;
    ``scale_floor``: the scale its rounding lives at (the noise model's floor); ``exact``: a value
    with one right answer (:func:`scalar_exact`)."""
    return judge_outputs(oracle, EAGER, [eager], None, [value],
                         [OutputFacts(scale_floor=scale_floor, scalar_exact=exact)])[0]


# ---- run-to-run nondeterminism: judged against the spread ------------------------------------------
def run_to_run_spread(runs: "Sequence[Sequence[Any]]") -> "list[float]":
    """Per output, how far one side's values (compiled's, or eager's: ``oracle.over_runs`` takes
    the larger of the two) that change run to run on the same inputs lie apart (a duplicate-index
    sum's atomics, a reduction split across threads; issue 36): the largest
    difference of any run from the first, in the value's units; 0 where every run agrees, or for a
    value that is not floating."""
    spreads: "list[float]" = []
    for position, first in enumerate(runs[0] if runs else ()):
        spread = 0.0
        if isinstance(first, torch.Tensor) and first.is_floating_point() and first.numel():
            for run in runs[1:]:
                other = run[position] if position < len(run) else None
                if isinstance(other, torch.Tensor) and other.shape == first.shape:
                    difference = (other.detach().double() - first.detach().double()).abs()
                    difference = difference[torch.isfinite(difference)]
                    if difference.numel():
                        spread = max(spread, float(difference.max()))
        spreads.append(spread)
    return spreads


def with_run_floors(facts: "Sequence[OutputFacts]", spreads: "Sequence[float]",
                    values: "Sequence[Any]") -> "list[OutputFacts]":
    """``facts`` with each output judged against its runs' spread (:func:`run_to_run_spread`): the
    scale floor raised to ``spread / u``, so one run's distance from another reads as one unit and
    a distance from fp64 or eager no larger is noise (eager's order is one more valid order). Only
    where the spread is rounding: at most ``MATERIAL_ULPS`` units of the value's scale (``values``:
    eager's, by output) or of the floor it already has; runs that differ by more disagree
    materially among themselves (a race, not a rounding order) and get no floor from it."""
    if len(spreads) != len(facts) or len(values) != len(facts):
        return list(facts)
    floored = []
    for f, spread, value in zip(facts, spreads, values):
        if spread > 0.0 and isinstance(value, torch.Tensor) and value.is_floating_point():
            unit = rounding_unit(value.dtype)
            if spread <= MATERIAL_ULPS * unit * max(_rms(value), f.scale_floor) and spread / unit > f.scale_floor:
                f = replace(f, scale_floor=spread / unit)
        floored.append(f)
    return floored


def decided_by_runs(failed: "Sequence[bool]") -> bool:
    """A verdict that depends on the run (judged against the spread) fails only where most runs fail."""
    return 2 * sum(bool(f) for f in failed) > len(failed)


def _fields(tolerance: Tolerance) -> "tuple[float, float, float]":
    return tolerance.ratio, tolerance.rms_floor_ulps, tolerance.max_floor_ulps


# ---- the facts of a graph's outputs ---------------------------------------------------------------
_RESHAPES = {"view", "_unsafe_view", "reshape", "squeeze", "unsqueeze", "permute", "transpose", "t", "clone",
             "alias", "expand", "_to_copy", "contiguous"}
_ADDS = {"add", "sub", "rsub"}
_MEANS = {"mean", "nanmean"}
_SUMS = {"sum", "nansum"}
# Duplicate-index sums: the rows that land on one output are summed in whatever order the kernel
# (atomics, threads) takes, run to run. (op, the source argument's position)
_ACCUMULATES = {"index_add": 3, "scatter_add": 3, "index_put": 2, "_unsafe_index_put": 2, "_index_put_impl": 2}
# Normalisations (op, its weight's position): output 0 is (x - mean) * rstd * w + b.
_NORMS = {"native_layer_norm": 2, "native_group_norm": 1}


def order_factor(terms: float) -> float:
    """How far a valid summation order's rounding reaches, in units of u * RMS(x) * sqrt(n): from
    ~1 for a pairwise tree (eager's CPU sums) to sqrt(n / 2) for one sequential loop (a kernel's
    lane, an atomic accumulation); the floor takes the geometric middle, n ** (1/4): a dropped or
    doubled term (an error of RMS(x)) still reads as 1 / (u n ** (3/4)) units, 4,000 at n = 10^4."""
    return max(terms, 1.0) ** 0.25


def output_facts(oracle: Oracle, nodes: "Mapping[str, torch.fx.Node]", values: "Mapping[str, Any]",
                 names: Sequence[str], random: "set[str] | frozenset[str]" = frozenset(),
                 outputs: "Sequence[Any] | None" = None,
                 candidate: "torch.fx.GraphModule | None" = None,
                 bookkeeping: "set[str] | frozenset[str]" = frozenset(),
                 noise: "Mapping[str, float] | None" = None) -> "list[OutputFacts]":
    """For each named value of a graph (``nodes`` by name, ``values`` eager's by name): the unit
    the user allowed the op that made it (read from ``outputs``, default ``values``) or, coarser,
    one the ``candidate`` computing them (a window, a whole graph) ran upstream of it, the scale
    floor of what that op combined, and whether a random op drew it (``random``: their names) or
    it is RNG state an attention kernel returns (``bookkeeping``: their names). ``noise``: by name,
    the scale a value's rounding noise lives at where it cancelled (``verdict/noise.py``): the
    floor is the larger of the two."""
    outputs = list(outputs) if outputs is not None else [values.get(name) for name in names]
    upstream = upstream_units(oracle, candidate, values) if candidate is not None else [None] * len(names)
    if len(upstream) != len(names):
        upstream = [None] * len(names)
    inherited = oracle.reference == "fp64"
    exact = integer_arithmetic(nodes, values, names, outputs)
    return [OutputFacts(_coarser(allowed_unit(oracle, nodes, name, output), above),
                        max(scale_floor(nodes, values, name, inherited), (noise or {}).get(name, 0.0)),
                        name in random, name in bookkeeping, name in exact, sign_observed(nodes, name, output),
                        scalar_exact(nodes.get(name)))
            for name, output, above in zip(names, outputs, upstream)]


def scalar_exact(node: "torch.fx.Node | None") -> bool:
    """Whether ``node``'s value (looked through to the op that computed it, past views and copies)
    comes from an op whose result jumps with a Python scalar its fp16/bf16 dtype rounds
    (``fx_eval.jumps_with_a_rounded_scalar``): a value with one right answer."""
    while node is not None and node.op == "call_function" and op_base_name(node.target) in _RESHAPES \
            and node.args and isinstance(node.args[0], torch.fx.Node):
        node = node.args[0]
    return node is not None and node.op in ("call_function", "call_method") and jumps_with_a_rounded_scalar(node)


def _integer(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and not (value.is_floating_point() or value.is_complex())


def integer_arithmetic(nodes: "Mapping[str, torch.fx.Node]", values: "Mapping[str, Any]", names: Sequence[str],
                       outputs: Sequence[Any]) -> "set[str]":
    """The named integer/bool values computed from integers and constants alone: no floating
    tensor the graph reads (an input, a parameter) reaches them. Index arithmetic (nearest
    interpolation's ``floor(iota / scale)``, ``arange(n) * 10**9``) has one right answer, eager's;
    a mask ``ge(x, 0)`` of a float ``x`` is not among them (compiled may set it closer to fp64)."""
    wanted = [name for name, output in zip(names, outputs) if _integer(output) and name in nodes]
    if not wanted:
        return set()
    floating: "set[torch.fx.Node]" = set()  # nodes a floating input or attribute reaches
    for node in nodes[wanted[0]].graph.nodes:  # in topological order
        value = values.get(node.name)
        if (node.op in ("placeholder", "get_attr") and isinstance(value, torch.Tensor) and not _integer(value)) \
                or any(source in floating for source in node.all_input_nodes):
            floating.add(node)
    return {name for name in wanted if nodes[name] not in floating}


# Ops that read the sign of a zero, by the argument positions they read it at: -0.0 and +0.0 are
# 0 ulps apart, yet these tell them apart (signbit, copysign's sign, atan2's quadrant, 1/-0 = -inf).
_SIGN_READERS = {"signbit": (0,), "copysign": (1,), "atan2": (0, 1), "div": (1,), "true_divide": (1,),
                 "reciprocal": (0,)}


def sign_observed(nodes: "Mapping[str, torch.fx.Node]", name: str, value: Any = None) -> bool:
    """Whether a later op of the graph reads the sign of value ``name``'s zeros (looking through
    the views and copies that only reshape it): there a -0.0 against +0.0 is a difference the
    program sees, under every oracle."""
    node = nodes.get(name)
    if node is None or (isinstance(value, torch.Tensor) and not value.is_floating_point()):
        return False
    frontier, seen = [node], set()
    while frontier:
        current = frontier.pop()
        for user in current.users:
            if user in seen or user.op != "call_function":
                continue
            seen.add(user)
            base = op_base_name(user.target)
            if base in _RESHAPES:
                frontier.append(user)
            elif any(i < len(user.args) and user.args[i] is current for i in _SIGN_READERS.get(base, ())):
                return True
    return False


def upstream_units(oracle: Oracle, graph_module: "torch.fx.GraphModule", values: "Mapping[str, Any]") -> "list[float | None]":
    """Per output of ``graph_module``: the coarsest unit the user allowed any op it was computed
    through (a TF32 convolution's error reaches the relu after it; eager's does too). A node of
    a per-node check reads its inputs as placeholders, so only its own op counts there."""
    precision = oracle.precision if oracle.precision is not None else Precision.current()
    units: "dict[torch.fx.Node, float | None]" = {}
    for node in graph_module.graph.nodes:  # in topological order
        own = None
        if node.op == "call_function":
            made_by = producer({node.name: node}, node.name)
            allowed = allowed_precision(made_by.target if made_by is not None else node.target,
                                        values.get(node.name), precision)
            own = allowed.unit if allowed else None
        for source in node.all_input_nodes:
            own = _coarser(own, units.get(source))
        units[node] = own
    output = next(node for node in reversed(graph_module.graph.nodes) if node.op == "output")
    returned: "list[torch.fx.Node]" = []
    torch.fx.node.map_arg(output.args[0], returned.append)
    return [units.get(node) for node in returned]


def _coarser(a: "float | None", b: "float | None") -> "float | None":
    return b if a is None else a if b is None else max(a, b)


def allowed_unit(oracle: Oracle, nodes: "Mapping[str, torch.fx.Node]", name: str, value: Any) -> "float | None":
    """A matmul/convolution output the user let run below float32 (TF32): measured in that unit."""
    node = producer(nodes, name)
    allowed = allowed_precision(node.target, value, oracle.precision) if node is not None else None
    return allowed.unit if allowed else None


def scale_floor(nodes: "Mapping[str, torch.fx.Node]", values: "Mapping[str, Any]", name: str,
                inherited: bool = True) -> float:
    """The scale of what a reduction or matmul combined (see :func:`combined_scale`), looking
    through the views and copies that reshape its result (a bias gradient is ``view(sum(...))``).
    ``inherited=False`` (eager's values are the reference): no floor for an add or sub, whose floor
    stands for the error it inherits from its operands; against eager, a rounding eager made
    upstream and compiled skipped (``(x + 32) - 32`` in bf16, fused in fp32) is what the user
    asked to see. A reordered reduction or matmul has no right order: its floor stays."""
    node = computed_by(nodes, name)
    if node is None or op_base_name(node.target) in _NORMS and _output_index(nodes, name) not in (None, 0):
        return 0.0  # a normalisation's mean and rstd: no floor of their own
    return combined_scale(node, values, inherited)


def _output_index(nodes: "Mapping[str, torch.fx.Node]", name: str) -> "int | None":
    """Which output of a multi-output op value ``name`` is (through reshapes), None for a single one."""
    node = nodes.get(name)
    for _ in range(8):
        if node is None or not node.args or not isinstance(node.args[0], torch.fx.Node):
            return None
        if node.target is operator.getitem:
            return node.args[1] if isinstance(node.args[1], int) else None
        if op_base_name(node.target) not in _RESHAPES:
            return None
        node = node.args[0]
    return None


def producer(nodes: "Mapping[str, torch.fx.Node]", name: str) -> "torch.fx.Node | None":
    """The node that made value ``name`` (a multi-output op for its ``getitem``)."""
    node = nodes.get(name)
    if node is not None and node.target is operator.getitem and node.args and isinstance(node.args[0], torch.fx.Node):
        return node.args[0]
    return node


def computed_by(nodes: "Mapping[str, torch.fx.Node]", name: str) -> "torch.fx.Node | None":
    """The node that computed value ``name``, looking through the views and copies that only
    reshape or copy it (a tensor saved for the backward is often ``clone(add)``)."""
    node = producer(nodes, name)
    for _ in range(8):
        if node is None or op_base_name(node.target) not in _RESHAPES or not node.args \
                or not isinstance(node.args[0], torch.fx.Node):
            break
        node = node.args[0]
    return node


def _rms(value: Any) -> float:
    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.numel() == 0:
        return 0.0
    # Every entry finite (the common case): the same 1-D values in the same order as the masked
    # path's below, squared and averaged by the same ops (the same bits), without the mask and
    # its copy; the widened copy squared in its own memory where it is a copy.
    flat = value.detach().reshape(-1).double()
    mean = (flat.square_() if value.dtype != torch.float64 else flat.square()).mean()
    del flat
    if math.isfinite(float(mean)):
        return float(mean.sqrt())
    finite = value.detach().double()
    finite = finite[torch.isfinite(finite)]
    return float(finite.square().mean().sqrt()) if finite.numel() else 0.0


def _normalised_scale(node: "torch.fx.Node", args: "list[Any]", out: Any, values: "Mapping[str, Any]") -> float:
    """A normalisation's output, (x - mean) * rstd * w + b: the mean's rounding lives at x's scale,
    multiplied by rstd: RMS(x) * RMS(rstd) * RMS(w). Where a row (group) of x is nearly constant its
    variance is ~0, rstd ~ 1/sqrt(eps) and the output is rounding residue: measured at its own scale,
    eager's error too reads as millions of ulps (pytorch#181694, GroupNorm of a constant row). Where x
    is centred (the usual case) this is ~RMS(output): no looser than the output's own scale."""
    rstd = out[2] if isinstance(out, (tuple, list)) and len(out) > 2 else next(
        (values.get(user.name) for user in node.users if user.target is operator.getitem and user.args[1:2] == (2,)), None)
    if not isinstance(rstd, torch.Tensor):
        return 0.0
    position = _NORMS[op_base_name(node.target)]
    weight = args[position] if len(args) > position else None
    return _rms(args[0]) * _rms(rstd) * (_rms(weight) if isinstance(weight, torch.Tensor) else 1.0)


def _magnitude(value: Any) -> float:
    if isinstance(value, torch.Tensor):
        return _rms(value)
    return abs(float(value)) if isinstance(value, (int, float)) else 0.0


def _accumulating(name: str, node: "torch.fx.Node", args: "list[Any]") -> bool:
    """index_put and its kin only with ``accumulate=True`` (else the last write wins: no sum)."""
    if "index_put" not in name:
        return True
    return bool(node.kwargs.get("accumulate", args[3] if len(args) > 3 else False))


def combined_scale(node: "torch.fx.Node", values: "Mapping[str, Any]", inherited: bool = True) -> float:
    """For a sum, mean, matmul, add, sub or normalisation: the scale its rounding lives at, that of the terms it adds up.
    A mean of a normalised tensor cancels to ~0; measured at the scale of the result, one rounding
    reads as millions of ulps (eager's own error too), and a reordered reduction looks wrong. The
    floor is RMS(x) for a mean, max(RMS(x)*sqrt(n), RMS(sum))*n**(1/4) for a sum of n terms (its
    rounding grows with its partial sums, whichever order it takes; and for a duplicate-
    index sum, ``index_add`` / ``scatter_add`` / ``index_put(accumulate=True)``, whose order changes
    run to run: :func:`order_factor`), RMS(a)*RMS(b)*sqrt(k) for a matmul; a wrong reduction (a term
    lost) is still off by ~1/eps units of it. 0: no floor."""
    name = op_base_name(node.target)
    args = [values.get(a.name) if isinstance(a, torch.fx.Node) else a for a in node.args]
    out = values.get(node.name)
    if name in _ADDS and len(args) >= 2 and inherited:  # a - b with a ~ b: the rounding is at the operands' scale
        return max(_magnitude(args[0]), _magnitude(args[1]))
    if name in _MEANS and args:
        return _rms(args[0])
    if name in _SUMS and args and isinstance(args[0], torch.Tensor) and isinstance(out, torch.Tensor):
        terms = args[0].numel() / max(out.numel(), 1)
        return max(_rms(args[0]) * math.sqrt(max(terms, 1.0)), _rms(out)) * order_factor(terms)
    if name in _ACCUMULATES and isinstance(out, torch.Tensor) and _accumulating(name, node, args):
        source = args[_ACCUMULATES[name]] if len(args) > _ACCUMULATES[name] else None
        if isinstance(source, torch.Tensor) and source.is_floating_point():
            terms = source.numel() / max(out.numel(), 1) + 1.0  # rows summed into each output, and its own
            return max(max(_rms(source), _rms(args[0])) * math.sqrt(terms), _rms(out)) * order_factor(terms)
    if name in _NORMS and args and isinstance(args[0], torch.Tensor):
        return _normalised_scale(node, args, out, values)
    if name in MATMUL_OPERANDS:
        first, second = MATMUL_OPERANDS[name]
        left = args[first] if len(args) > second else None
        right = args[second] if len(args) > second else None
        if isinstance(left, torch.Tensor) and isinstance(right, torch.Tensor) and left.dim() >= 1:
            return _rms(left) * _rms(right) * math.sqrt(left.shape[-1])
    return 0.0
