""""Compiled differs from eager but is closer to fp64": not a bug by the fp64 rule, never silent.

Inductor often computes more exactly than eager (a fused bf16 chain kept in fp32 where eager
rounds after every op). Such a value is no culprit, but the user sees different numbers. This
strategy lists them where compiled is clearly closer (:func:`clearly_departs`; two equally
accurate roundings are noise, not listed): per node when the
per-node check ran, else per output of the whole graph. One fp64 replay (no compile) gives the
reference; then one candidate, the whole graph under ``EAGER_ROUNDING`` (one compile), says
whether that setting makes compiled follow eager's rounding.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch

from ..search import stop_if_out_of_memory
from ..verdict.candidate import NO_SWITCH, GraphCandidate, Switch
from ..verdict.compare import BITWISE, Departure, Difference, Outcome, closer_to_fp64, elementwise_change
from ..verdict.judgement import judge_against_eager
from ..verdict.precision import op_base_name
from ..verdict.fx_eval import detached, mutates, stream_graph, values_of, watch_graph
from ..verdict.graphs import value_nodes
from ..verdict.offload import spill_graph_values
from .amplify import Amplifier, amplifiers, amplifiers_of, path_between, random_values
from ..verdict.oracle import GraphContext
from ..verdict.replay import replay

# Inductor's setting that rounds intermediate low-precision values as eager does.
from .protocol import GraphSearch
log = logging.getLogger(__name__)
EAGER_ROUNDING = Switch.config("config", "emulate_precision_casts", {"emulate_precision_casts": True})
MAX_LISTED = 16


@dataclass(frozen=True)
class DepartedValue:
    value: str  # the value (node or output) that departs
    node: str  # its compute node
    scope: str  # "node": judged on eager inputs; "graph": an output of the whole graph
    departure: Departure
    elements: int


def find_departures(context: GraphContext, compiled_values: dict[str, Any], scope: str) -> list[DepartedValue]:
    """Values whose compiled departs from eager beyond the floors while clearly closer to fp64
    (:func:`clearly_departs`): the first ``MAX_LISTED`` in graph order."""
    # The whole graph's judgement decided each departing output's departure as its fp64 run gave
    # the output (no second fp64 run, no fp64 value held to here)
    kept = context.take_departing(compiled_values) if scope == "graph" else None
    random = random_values(context)  # compiled draws other numbers: data, not a difference
    departures = (((name, departure) for name, departure in kept.items() if name not in random)
                  if kept is not None else _departures(context, compiled_values, random))
    found = []
    for name, departure in departures:
        if departure is not None and clearly_departs(departure, context.tolerance.ratio):
            eager, compiled = context.eager_values.get(name), compiled_values[name]
            elements = int((eager != compiled).sum())
            found.append(DepartedValue(name, _computed_by(context, name), scope, departure, elements))
            if len(found) == MAX_LISTED:
                break
    return found


def _departures(context: GraphContext, compiled_values: dict[str, Any],
                random: set[str]) -> Iterator[tuple[str, Departure | None]]:
    """Each value of ``compiled_values`` that departs from eager (eager as the reference), in their
    order, with its departure against fp64 (None: compiled is not the closer), decided as asked:
    one fp64 run of the captured graph that keeps the departing values' references only (not
    every node's)."""
    departing = [name for name, value in compiled_values.items()
                 if name not in random
                 and judge_against_eager(context.oracle, context.eager_values.get(name), value).outcome is Outcome.MISMATCH]
    if not departing:
        return
    context.captured.check_inputs()
    spill_graph_values(context, compiled_values)  # the fp64 run reads the captured inputs alone: the values wait on disk
    fp64 = values_of(context.captured.graph_module, context.captured.inputs, departing, upcast=True)
    for name in departing:
        yield name, closer_to_fp64(context.eager_values.get(name), fp64.get(name), compiled_values[name],
                                   context.tolerance)


def clearly_departs(departure: Departure, ratio: float) -> bool:
    """A departure worth a line: counted in elements (an integer or boolean value compiled sets
    otherwise, agreeing with fp64), or compiled *clearly* closer to fp64 than eager, its error at
    most ``1 / ratio`` of eager's: a rounding eager made and compiled skipped (a bf16
    ``(x + 32) - 32`` fused in fp32). Within that ratio the two are two samples of one rounding
    noise, the very ratio by which the fp64 rule calls compiled no worse than eager: equally
    accurate, differently rounded, as any two orders of a long sum are. Their difference is at most
    the sum of their errors against fp64 (the RMS is a norm), so it says nothing beyond them; a
    GPT-2 step listed 29 such values, compiled 9.488 ulps from fp64 against eager's 9.489. Decided
    by the two errors alone: no noise model runs for a listing."""
    return departure.exact or departure.compiled_rms_ulps * ratio <= departure.eager_rms_ulps


def _computed_by(context: GraphContext, name: str) -> str:
    """The op that computed the value, not a copy of it (a value saved for the backward is often
    ``clone(add)``): views and copies are looked through while they keep the dtype."""
    node = context.computed_by(name)
    if node is None:
        return _producer_name(context, name)
    eager, source = context.eager_values.get(name), context.eager_values.get(node.name)
    same_dtype = isinstance(eager, torch.Tensor) and isinstance(source, torch.Tensor) and eager.dtype == source.dtype
    return node.name if same_dtype else _producer_name(context, name)


def _producer_name(context: GraphContext, name: str) -> str:
    producers = {v.name: node.name for node in context.view.compute_nodes for v in value_nodes(node)}
    return producers.get(name, name)


@dataclass(frozen=True)
class Consequence:
    """A forward departure carried into the backward graph: eager's backward, run on the values the
    compiled forward saved for it, gives materially different gradients (a hinge, a mask or a
    comparison in the backward flips). No compile: one eager replay of the backward graph."""

    graph: str  # the backward graph
    saved: tuple[str, ...]  # the forward's saved values substituted (their backward input names)
    output: str  # the first gradient that differs materially
    difference: Difference
    amplifiers: tuple[Amplifier, ...]


def backward_consequence(forward: GraphContext, departed: list[DepartedValue], compiled_values: dict[str, Any],
                         backward: GraphContext) -> Consequence | None:
    """Replay ``backward`` eagerly with the departing values the forward saved for it (matched by
    name: AOT Autograd's backward inputs keep the forward's names) taken from the compiled forward;
    the first gradient that then differs materially from eager's, and the ops that amplify it."""
    model_outputs = forward.captured.model_outputs
    if model_outputs is None:
        return None
    saved = set(forward.view.output_names()[model_outputs:])
    inputs = {node.name: node for node in backward.view.graph_module.graph.nodes if node.op == "placeholder"}
    overrides = {d.value: compiled_values[d.value] for d in departed
                 if d.value in saved and d.value in inputs and d.value in compiled_values
                 and _same_kind(backward.eager_values.get(d.value), compiled_values[d.value])}
    return _flipped(backward, overrides) if overrides else None


def _flipped(backward: GraphContext, overrides: dict[str, Any]) -> Consequence | None:
    """``backward`` replayed eagerly with ``overrides`` (saved values by name): the first gradient
    that then differs materially from eager's, and the ops on its path that amplify it.

    A backward that writes nothing in place is replayed streamed (issue 34): each gradient judged
    as it is produced and every value freed after its last use, so the replay holds its live set,
    never every backward value; only where a gradient flips, one more streamed replay with the same
    overrides measures each value's change on its path for the amplifiers, holding none of them."""
    gm = backward.captured.graph_module
    if mutates(gm):
        values = replay(backward, overrides)
        return _consequence(backward, overrides,
                            lambda output: backward.material_output_difference(output, values.get(output)),
                            lambda path: amplifiers(backward, path, values, roots=len(overrides)))
    differences: dict[str, Difference | None] = {}
    backward.captured.check_inputs()
    stream_graph(gm, backward.captured.inputs, overrides=overrides,
                 sink=lambda node, value: differences.__setitem__(
                     node.name, backward.material_output_difference(node.name, detached(value))))

    def changed_on(path: tuple[str, ...]) -> tuple[Amplifier, ...]:
        eager, changes = backward.eager_values, dict[str, float]()
        watched = [v.name for name in path for v in value_nodes(backward.view.nodes[name])]
        backward.captured.check_inputs()
        watch_graph(gm, backward.captured.inputs, watched, overrides=overrides,
                    sink=lambda name, value: changes.__setitem__(name, elementwise_change(eager.get(name), value)))
        return amplifiers_of(backward, path, lambda v: changes.get(v, elementwise_change(eager.get(v), None)),
                             roots=len(overrides))

    return _consequence(backward, overrides, differences.get, changed_on)


def _consequence(backward: GraphContext, overrides: dict[str, Any], difference_of: Callable[[str], Difference | None],
                 amplified: Callable[[tuple[str, ...]], tuple[Amplifier, ...]]) -> Consequence | None:
    """The first of ``backward``'s outputs (in its order) that differs materially (``difference_of``:
    its material difference from eager's, or None); the amplifiers on the path from the overridden
    values to it (``amplified``, given that path with its roots first)."""
    for output in backward.view.output_names():
        difference = difference_of(output)
        if difference is not None:
            roots = tuple(overrides)
            path = tuple(dict.fromkeys(n for root in roots for n in path_between(backward, root, output)))
            return Consequence(backward.name, roots, output, difference, amplified(roots + path))
    return None


def _saved_values(forward: GraphContext, compiled_values: dict[str, Any],
                  backward: GraphContext) -> Iterator[tuple[str, Any, Any]]:
    """Each value the forward saves that the backward takes as an input: (name, eager's value as
    the backward reads it, compiled's); nothing where the forward's model outputs are unknown."""
    model_outputs = forward.captured.model_outputs
    if model_outputs is None:
        return
    inputs = {node.name for node in backward.view.graph_module.graph.nodes if node.op == "placeholder"}
    for name in forward.view.output_names()[model_outputs:]:
        if name in inputs:
            yield name, backward.eager_values.get(name), compiled_values.get(name)


def saved_value_consequence(forward: GraphContext, compiled_values: dict[str, Any],
                            backward: GraphContext) -> tuple[DepartedValue, Consequence] | None:
    """By mechanism, whatever forward op made it: each value the forward saves for the backward
    (a bool mask, an integer index, a float the backward compares: ``clamp_min``'s, ``relu``'s,
    a hinge's) that compiled computes otherwise than eager in any element, substituted alone
    into one eager replay of the backward; the first that flips a gradient materially, listed
    as a departure with that gradient. No compile; rounding-sized differences flip nothing."""
    for name, eager, compiled in _saved_values(forward, compiled_values, backward):
        if not _same_kind(eager, compiled) or not _read_as_mask(backward, name, eager) or torch.equal(eager, compiled):
            continue
        consequence = _flipped(backward, {name: compiled})
        if consequence is None:
            continue
        forward.captured.check_inputs()
        fp64 = values_of(forward.captured.graph_module, forward.captured.inputs, [name], upcast=True).get(name)
        departure = closer_to_fp64(eager, fp64, compiled, forward.tolerance) or _plain_departure(eager, fp64, compiled)
        elements = int((eager != compiled).sum())
        return DepartedValue(name, _computed_by(forward, name), "graph", departure, elements), consequence
    return None


# Backward ops that turn a saved float into a mask: a comparison, a sign, relu's threshold.
_MASKING = {"ge", "gt", "le", "lt", "eq", "ne", "sign", "threshold_backward", "where", "heaviside"}
# Comparisons any one-ulp difference flips (a threshold is flipped only by a value at it: zero's side is checked)
_EQUALITY = frozenset({"eq", "ne"})
_VIEWS = {"view", "_unsafe_view", "reshape", "expand", "permute", "transpose", "t", "clone", "alias", "squeeze",
          "unsqueeze", "_to_copy", "convert_element_type"}


def _read_as_mask(backward: GraphContext, name: str, eager: Any) -> bool:
    """A saved value the backward reads as a mask: not a float (a bool mask, an integer index), a
    float of 0s and 1s, or a float an op of the backward compares (through views and copies)."""
    if not eager.is_floating_point() or (bool(((eager == 0) | (eager == 1)).all()) and bool((eager == 1).any())):
        return True
    return name in backward.view.nodes and _compared(backward.view.nodes[name])


def _compared(node: Any, masking: frozenset[str] | set[str] = _MASKING) -> bool:
    """Whether an op of ``node``'s graph compares its value (one of ``masking``: a mask, a sign),
    through views and copies."""
    frontier = [node]
    seen: set[Any] = set()
    while frontier:
        for user in frontier.pop().users:
            if user in seen or user.op != "call_function":
                continue
            seen.add(user)
            base = op_base_name(user.target)
            if base in masking:
                return True
            if base in _VIEWS:
                frontier.append(user)
    return False


def saved_masks_differ(forward: GraphContext, compiled_values: dict[str, Any],
                       backward: Any = None) -> bool:
    """Whether a value the forward saves for the backward may flip a mask there: compiled sets a
    bool or integer value otherwise than eager, or puts a float on the other side of zero (where
    ``relu``, ``clamp_min(0)`` and a hinge's mask cut), or sets in any element a float that the
    ``backward`` graph (its GraphModule, when captured) tests for equality (``eq(atan2, amin)`` in
    amin's backward, pytorch#186799: one ulp flips it). Cheap (no replay): what keeps a clean
    forward graph's values for :func:`saved_value_consequence`."""
    model_outputs = forward.captured.model_outputs
    if model_outputs is None:
        return False
    readers = {node.name: node for node in backward.graph.nodes if node.op == "placeholder"} if backward else {}
    for name in forward.view.output_names()[model_outputs:]:
        eager: Any = forward.eager_values.get(name)
        compiled: Any = compiled_values.get(name)
        if not _same_kind(eager, compiled):
            continue
        if not eager.is_floating_point():
            if not torch.equal(eager, compiled):
                return True
        elif not torch.equal(eager >= 0, compiled >= 0) or not torch.equal(eager > 0, compiled > 0):
            return True
        elif name in readers and not _equal(eager, compiled) and _compared(readers[name], _EQUALITY):
            return True
    return False


def _plain_departure(eager: Any, fp64: Any, compiled: Any) -> Departure:
    """A saved value compiled sets otherwise, not closer to fp64 by the ulp rule: its elements
    against fp64's (rounded to its dtype), counted as for a mask."""
    if not isinstance(fp64, torch.Tensor) or fp64.shape != eager.shape:
        return Departure(0.0, 0.0, 0.0, 0.0, exact=True)
    reference = fp64.detach().cpu().to(eager.dtype)
    return Departure(0.0, 0.0, 0.0, 0.0, exact=True, compiled_wrong=int((compiled.cpu() != reference).sum()),
                     eager_wrong=int((eager.cpu() != reference).sum()))


def _same_kind(eager: Any, compiled: Any) -> bool:
    return (isinstance(eager, torch.Tensor) and isinstance(compiled, torch.Tensor)
            and eager.shape == compiled.shape and eager.dtype == compiled.dtype)


def follows_eager_with(context: GraphContext, search: GraphSearch, switch: Switch = EAGER_ROUNDING,
                       away_from: dict[str, Any] | None = None) -> bool:
    """One compile of the whole graph under ``switch``: do its outputs then match eager's
    (eager taken as the reference, within the floors)? Where the switch cannot change the code
    (:func:`rounding_switch_inert`) the whole graph's own compile answers (cached: no compile).
    ``away_from``: outputs (by name) compiled without the switch, which differ from eager by less
    than the floors (an elided fp16 rounding: one ulp); under the switch each must then equal
    eager's or be clearly closer to it (:func:`clearly_closer`), since within the floors a match
    alone says nothing."""
    names = context.view.compilable_names(keep_random=context.rng_strict)
    inert = switch == EAGER_ROUNDING and rounding_switch_inert(context)
    verdict = search.judge(GraphCandidate(context.name, frozenset(names), switch=NO_SWITCH if inert else switch,
                                          purpose="eager rounding"))
    if verdict.outcome is Outcome.CRASH or not verdict.compiled_values:
        return False
    switched = verdict.compiled_values
    if not all(judge_against_eager(context.oracle, context.eager_values.get(n), v).outcome is Outcome.MATCH
               for n, v in switched.items()):
        return False
    return all(clearly_closer(before, context.eager_values.get(name), switched.get(name), context.tolerance.ratio)
               for name, before in (away_from or {}).items())


def clearly_closer(away: Any, toward: Any, value: Any, ratio: float) -> bool:
    """``value`` equals ``toward`` (NaN as NaN), or departs from ``away`` while its error against
    ``toward`` is at most ``1 / ratio`` of ``away``'s (the departures' "clearly closer", with
    ``toward`` as the reference and no floor: for differences below the floors, one fp16 ulp)."""
    if not _same_kind(toward, value):
        return False
    if _equal(toward, value):
        return True
    if not _same_kind(away, value):
        return False
    departure = closer_to_fp64(away, toward, value, BITWISE)
    return departure is not None and clearly_departs(departure, ratio)


def _equal(a: Any, b: Any) -> bool:
    return bool(torch.equal(a, b)) or (a.is_floating_point() and bool(((a == b) | (a.isnan() & b.isnan())).all()))


def rounding_switch_inert(context: GraphContext) -> bool:
    """Whether ``emulate_precision_casts`` leaves this graph's compiled code as it is: every value
    (inputs too) on the CPU and none in fp16/bf16. Read in Inductor (torch 2.13): on the CPU every
    use of the setting is conditioned on an fp16/bf16 operand or result (the pointwise lowering's
    and ``to_dtype``'s down-up casts, the C++ kernels' dtype-conversion cache, the joint-graph pass
    that folds a cast pair, which otherwise only folds ``fp64 -> fp32 -> fp32``, the same bits);
    on a GPU it also turns off Triton's FMA fusion, so a CUDA graph always compiles it."""
    def plain(value: Any) -> bool:
        if isinstance(value, (tuple, list)):
            return all(plain(v) for v in value)
        return not isinstance(value, torch.Tensor) or (value.device.type == "cpu" and value.dtype not in NARROW_FLOATS)

    recorded = [node.meta.get("val") for node in context.view.graph_module.graph.nodes]
    return (plain(list(context.captured.inputs)) and plain(list(context.eager_values.values()))
            and plain([value for value in recorded if value is not None]))


# ---- cast elision: a narrowing cast whose rounding compiled code skips -------------------------
NARROW_FLOATS = (torch.float16, torch.bfloat16)
_CASTS = {"_to_copy", "convert_element_type", "to"}


@dataclass(frozen=True)
class ElidedCast:
    """A ``.to(bf16)`` / ``.to(fp16)`` the user wrote whose rounding compiled code skips (Inductor
    keeps the value wide in the kernel that reads it unless ``emulate_precision_casts``): eager
    replayed with the cast's value kept wide gives compiled's outputs (no compile)."""

    node: str  # the narrowing cast the compiled code skipped
    back: str  # where the value is read wide again: the cast back, or an op that promotes it (bf16 + fp32)
    dtype: str  # the narrow dtype ("torch.bfloat16")
    outputs: tuple[str, ...]  # the graph outputs the skipped rounding explains
    together: tuple[str, ...] = ()  # other narrowing casts skipped with it (none explains alone)


def _is_cast(node: Any) -> bool:
    packet = getattr(getattr(node, "target", None), "overloadpacket", None)
    return getattr(packet, "__name__", "") in _CASTS


def _float(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _narrowing(context: GraphContext, node: Any) -> bool:
    """A cast the program wrote from a float to a narrower fp16/bf16."""
    values: dict[str, Any] = context.eager_values
    narrow: Any = values.get(node.name)
    source = node.args[0] if node.args else None
    wide: Any = values.get(getattr(source, "name", ""))
    return (_is_cast(node) and _float(narrow) and _float(wide) and narrow.dtype in NARROW_FLOATS
            and wide.element_size() > narrow.element_size())


def cast_round_trips(context: GraphContext) -> list[tuple[str, str]]:
    """(narrowing cast, cast back) pairs: a float value cast to fp16/bf16 and straight back to a
    wider float, judged on the eager values' dtypes."""
    values: dict[str, Any] = context.eager_values
    found: list[tuple[str, str]] = []
    for node in context.view.compute_nodes:
        if _narrowing(context, node):
            narrow = values[node.name]
            found += [(node.name, user.name) for user in node.users
                      if _is_cast(user) and _float(values.get(user.name))
                      and values[user.name].element_size() > narrow.element_size()]
    return found


def narrowing_casts(context: GraphContext) -> list[tuple[str, str]]:
    """(narrowing cast, its first float reader) for every cast to fp16/bf16 the program wrote: a
    round trip's cast back, or an op that computes with the value (promoted by ``+ fp32``, or in
    a fused kernel's fp32), where Inductor may keep it unrounded (pytorch#181568, #182131)."""
    values: dict[str, Any] = context.eager_values
    found: list[tuple[str, str]] = []
    for node in context.view.compute_nodes:
        readers = [user.name for user in node.users if _float(values.get(user.name))]
        if readers and _narrowing(context, node):
            found.append((node.name, readers[0]))
    return found


def elided_cast(context: GraphContext, compiled_outputs: dict[str, Any], exact: bool = False) -> ElidedCast | None:
    """The narrowing cast(s) whose skipped rounding explains every output where compiled differs
    from eager: eager replayed with every cast's value kept wide first (one replay: none can
    explain it when all together do not), then each alone (no compile). The replay explains an
    output when it matches compiled's and compiled is clearly closer to it than to eager's.
    ``exact``: every output compiled returns otherwise than eager in any element counts, not only
    those beyond the floors (script mode: a call that matched end to end, where a skipped fp16
    rounding is one ulp, pytorch#182131)."""
    differing = tuple(name for name, value in compiled_outputs.items() if _differs(context, name, value, exact))
    casts = narrowing_casts(context)
    if not differing or not casts:
        return None

    def explains(names: list[str]) -> bool:
        kept_wide = {name: context.eager_values[_source(context, name)] for name in names}
        try:
            values = replay(context, kept_wide)
        except Exception as error:  # noqa: BLE001 - an op that refuses the wider dtype explains nothing
            stop_if_out_of_memory(error, "replaying a graph in a wider dtype")
            log.debug("cast elision replay failed: %s", error)
            return False
        for name in differing:
            compiled, wide = compiled_outputs[name], _as_dtype_of(values.get(name), compiled_outputs[name])
            if judge_against_eager(context.oracle, compiled, wide).outcome is not Outcome.MATCH \
                    or not clearly_closer(context.eager_values.get(name), wide, compiled, context.tolerance.ratio):
                return False
        return True

    if not explains([cast for cast, _ in casts]):
        return None
    dtype = lambda cast: str(context.eager_values[cast].dtype)  # noqa: E731
    for cast, reader in casts:
        if len(casts) == 1 or explains([cast]):
            return ElidedCast(cast, reader, dtype(cast), differing)
    (cast, reader), others = casts[0], tuple(name for name, _ in casts[1:])
    return ElidedCast(cast, reader, dtype(cast), differing, together=others)


def _differs(context: GraphContext, name: str, value: Any, exact: bool) -> bool:
    """Compiled's output ``name`` differs from eager's: beyond the floors, or (``exact``) in any element."""
    eager: Any = context.eager_values.get(name)
    if exact and _same_kind(eager, value) and eager.is_floating_point():
        return not _equal(eager, value)
    return judge_against_eager(context.oracle, eager, value).outcome is not Outcome.MATCH


def _source(context: GraphContext, cast: str) -> str:
    """The value a narrowing cast reads (a Node: ``_narrowing`` read its value)."""
    source: Any = context.view.nodes[cast].args[0]
    return str(source.name)


def _as_dtype_of(value: Any, like: Any) -> Any:
    """A replayed value kept wide (an fp32 add where eager's was bf16) in the dtype compiled stored."""
    if _float(value) and _float(like) and value.dtype != like.dtype:
        return value.to(like.dtype)
    return value


def compiled_outputs(context: GraphContext, search: GraphSearch) -> dict[str, Any]:
    """The whole graph's compiled outputs (the search's cached verdict where the graph was compiled
    whole already, else one compile)."""
    names = context.view.compilable_names(keep_random=context.rng_strict)
    verdict = search.judge(GraphCandidate(context.name, frozenset(names), purpose="cast elision"))
    if verdict.outcome is Outcome.CRASH or not verdict.compiled_values:
        return {}
    return {n: verdict.compiled_values[n] for n in context.view.output_names() if n in verdict.compiled_values}


@dataclass(frozen=True)
class LayoutMisread:
    """A value the forward saves for the backward that the compiled forward lays out otherwise:
    the same values, other strides (pytorch#197888: ``adaptive_max_pool3d``'s indices channels_last
    where eager's are contiguous). Eager's backward replayed on it alone gives materially other
    gradients, so an op of the backward reads the layout, not the values: ``reader``, the first
    backward node whose output changes while every input it reads holds eager's values. No compile."""

    value: str  # the saved value (the backward input of that name)
    node: str  # the forward op that computed it
    eager_strides: tuple[int, ...]
    compiled_strides: tuple[int, ...]
    reader: str  # the backward node that misreads it
    consequence: Consequence
    # the reader's inputs that the replay lays out otherwise (name, strides compiled gave them):
    # the saved value itself, or a view of it; what the repro lays out so (``expect="saved_layout"``)
    reader_layouts: tuple[tuple[str, tuple[int, ...]], ...] = ()


def _laid_out_otherwise(eager: Any, compiled: Any) -> bool:
    return _same_kind(eager, compiled) and eager.dim() > 1 and eager.stride() != compiled.stride()


def saved_layouts_differ(forward: GraphContext, compiled_values: dict[str, Any]) -> bool:
    """Whether the compiled forward lays a value it saves for the backward out otherwise than eager
    (cheap, no replay): what keeps a clean forward graph's values for :func:`saved_layout_consequence`."""
    model_outputs = forward.captured.model_outputs
    return model_outputs is not None and any(
        _laid_out_otherwise(forward.eager_values.get(name), compiled_values.get(name))
        for name in forward.view.output_names()[model_outputs:])


def saved_layout_consequence(forward: GraphContext, compiled_values: dict[str, Any],
                             backward: GraphContext) -> LayoutMisread | None:
    """Each value the forward saves that compiled lays out otherwise with equal values, substituted
    alone (its strides kept) into one eager replay of the backward; the first that changes a
    gradient materially, with the backward op whose output its layout alone changes."""
    for name, eager, compiled in _saved_values(forward, compiled_values, backward):
        if not _laid_out_otherwise(eager, compiled) or not torch.equal(eager, compiled):
            continue
        consequence = _flipped(backward, {name: compiled})
        values = replay(backward, {name: compiled}) if consequence is not None else {}
        reader = _layout_reader(backward, values) if consequence is not None else None
        if consequence is None or reader is None:
            continue
        return LayoutMisread(name, _computed_by(forward, name), tuple(eager.stride()), tuple(compiled.stride()),
                             reader, consequence, _reader_layouts(backward, reader, values))
    return None


def _reader_layouts(backward: GraphContext, reader: str, values: dict[str, Any]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The reader's inputs whose strides the replay (compiled's saved layout) changed, with those strides."""
    found = []
    for value in backward.view.nodes[reader].all_input_nodes:
        eager, replayed = backward.eager_values.get(value.name), values.get(value.name)
        if _laid_out_otherwise(eager, replayed) and isinstance(replayed, torch.Tensor):
            found.append((value.name, tuple(replayed.stride())))
    return tuple(found)


def _layout_reader(backward: GraphContext, values: dict[str, Any]) -> str | None:
    """The first backward node (graph order) whose output differs from eager's in ``values``: its
    inputs still hold eager's values (only a layout was substituted), so it reads the layout."""
    for node in backward.view.compute_nodes:
        for value in value_nodes(node):
            eager, replayed = backward.eager_values.get(value.name), values.get(value.name)
            if isinstance(eager, torch.Tensor) and isinstance(replayed, torch.Tensor) \
                    and not (eager.shape == replayed.shape and torch.equal(eager, replayed)):
                return node.name
    return None
