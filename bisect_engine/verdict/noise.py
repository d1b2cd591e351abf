"""The noise model: where each value of a graph has its rounding, carried through the graph.

A value that cancels (a row sum of a normalised tensor, the gradient into a LayerNorm whose loss
does not depend on its input's scale) is ~0, yet every rounding that produced it lives at the
scale of the terms it combined. Measured at its own scale, eager's and compiled's rounding both
read as millions of ulps and any reordering looks like a bug. This module measures, for every
value, the scale its rounding noise lives at, by running the graph once more in fp64 with every
floating value perturbed by its dtype's rounding (a relative ``u`` times a uniform draw in
[-1, 1], as a rounding does; a reduction's result also by the rounding of its partial sums, at
the scale :func:`~bisect_engine.verdict.judgement.combined_scale` gives it, whatever order a kernel
sums in): stochastic arithmetic in the manner of CESTAC / CADNA, one draw.

Two floors per value (a scale, in the value's own units; 0 where the value did not cancel):

- ``own``: the op alone, its inputs taken as given and rounded once (what a per-node check of
  that op on eager's inputs can fairly ask: a wrong op is still off by ~1/u units of it);
- ``carried``: the noise the value inherits from everything upstream (what a window's, a whole
  graph's or an eager replay's output is judged at: its inputs differ between the two sides).

A floor counts only where the noise, in units of the value's rounding (its RMS over ``u``),
exceeds ``CANCELLED`` times the value's own RMS: noise above 16 ulps of the value, a value that
lost at least four bits to cancellation. Ordinary values keep their own scale, so nothing
changes for them. Integer and boolean values carry no noise (they are judged exactly; a float
turned integer is an amplification the material rule names), nor do random draws (data).
Pure over the values handed in: nothing here compiles, writes or touches global state (the
draws come from a private generator).
"""
from __future__ import annotations

import logging
import math
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch
import torch.fx as fx
import torch.utils._pytree
from torch.utils._python_dispatch import TorchDispatchMode

from ..search import stop_if_out_of_memory
from .compare import rounding_unit
from .fx_eval import (_fp64_kwargs, faithful_copy, host_after_failure, move_to_host, mutates, on_host,
                      recorded_device, to_fp64, value_bytes, watch_op, widened_bytes)
from .judgement import combined_scale
from .precision import op_base_name

log = logging.getLogger(__name__)

CANCELLED = 16.0  # noise above 16 ulps of the value (RMS(noise) / u > 16 RMS(value)): four bits or more lost to cancellation
SEED = 0x5EED


@dataclass(frozen=True)
class NoiseFloors:
    """Per value name, the scale its rounding lives at where it cancelled (absent: no floor)."""

    own: Mapping[str, float] = field(default_factory=dict)
    carried: Mapping[str, float] = field(default_factory=dict)

    def floor(self, name: str, carried: bool) -> float:
        return (self.carried if carried else self.own).get(name, 0.0)


def _rms(value: torch.Tensor) -> float:
    """RMS of the finite entries (the common all-finite case without a mask)."""
    if value.numel() == 0:
        return 0.0
    whole = float(torch.linalg.vector_norm(value)) / math.sqrt(value.numel())
    if math.isfinite(whole):
        return whole
    finite = value[torch.isfinite(value)]
    return float(finite.square().mean().sqrt()) if finite.numel() else 0.0


def _floating(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.dtype == torch.float64


def perturb(value: Any, units: Any, generator: torch.Generator, fresh: bool = False) -> Any:
    """``value`` with each floating entry moved by a relative rounding: x (1 + u r), r in [-1, 1].
    ``fresh``: ``value`` is an op's new result that nothing else holds yet (:class:`Perturbed`), which
    a large fp64 one is moved in its own memory (:func:`_perturbed_in_place`: the same bits)."""
    if isinstance(value, (tuple, list)):
        unit_list = units if isinstance(units, (tuple, list)) else [units] * len(value)
        return type(value)(perturb(v, u, generator, fresh) for v, u in zip(value, unit_list))
    if not _floating(value) or not isinstance(units, float) or value.numel() == 0:
        return value
    if fresh and value.numel() > CHUNK and value.dtype == torch.float64 and value.device.type == "cpu" \
            and value.stride() == _dense_strides(value.shape) and _sole_owner(value):
        return _perturbed_in_place(value, units, generator)
    factor = torch.rand(value.shape, generator=generator, dtype=torch.float64)
    factor = factor.mul_(2 * units).add_(1 - units).to(value.device)  # x (1 + u r), r in [-1, 1]
    # The product into the factor's own memory where it is laid out as ``value * factor`` would be
    # (a contiguous value): the same bits, one value-sized temporary fewer.
    return factor.mul_(value) if value.is_contiguous() else value * factor


CHUNK = 1 << 22  # entries of the factor drawn at a time for a large fresh fp64 result (32 MB)


def _storage_uses(tensor: torch.Tensor) -> int | None:
    """How many hold ``tensor``'s storage (torch's own count; None where this torch has none)."""
    count = getattr(torch._C, "_storage_Use_Count", None)
    return count(tensor.untyped_storage()._cdata) if count is not None else None


_ONE_HOLDER = _storage_uses(torch.empty(1))  # the count of a tensor that alone holds its storage


def _sole_owner(value: torch.Tensor) -> bool:
    """``value`` alone holds its storage (no view, no alias an op returned without saying so:
    ``aten._unsafe_view`` of a result its caller still holds)."""
    return value._base is None and _ONE_HOLDER is not None and _storage_uses(value) == _ONE_HOLDER


def _dense_strides(shape: torch.Size) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _perturbed_in_place(value: torch.Tensor, unit: float, generator: torch.Generator) -> torch.Tensor:
    """:func:`perturb` of a large fresh fp64 result with the standard contiguous strides, into its
    own memory, the factor drawn :data:`CHUNK` entries at a time: the generator yields the same
    draws in the same order (one per entry, serially) and each entry takes the same IEEE operations
    (``(r * 2u + (1 - u)) * x``; the product commutes), so the same bits and layout as the
    value-sized factor's path, without its value-sized temporary (a vocabulary-sized gradient's)."""
    flat = value.view(-1)
    for start in range(0, flat.numel(), CHUNK):
        part = flat[start:start + CHUNK]
        factor = torch.rand(part.shape, generator=generator, dtype=torch.float64)
        part.mul_(factor.mul_(2 * unit).add_(1 - unit))
    return value


def floor_of(clean: Any, noisy: Any, unit: Any) -> Any:
    """The scale the difference ``noisy - clean`` stands for (RMS / u) where it exceeds
    ``CANCELLED`` x RMS(clean); 0.0 otherwise (per element of a tuple)."""
    if isinstance(clean, (tuple, list)) and isinstance(noisy, (tuple, list)) and len(clean) == len(noisy):
        unit_list = unit if isinstance(unit, (tuple, list)) else [unit] * len(clean)
        return tuple(floor_of(c, n, u) for c, n, u in zip(clean, noisy, unit_list))
    if not (_floating(clean) and _floating(noisy) and isinstance(unit, float)) or clean.shape != noisy.shape:
        return 0.0
    if clean.device != noisy.device:  # one fp64 run went on on the host, its device full (``fx_eval.watch_op``)
        clean, noisy = on_host(clean), on_host(noisy)
    difference = noisy - clean
    if not math.isfinite(float(difference.sum())):  # judge the entries finite on both runs
        both = torch.isfinite(clean) & torch.isfinite(noisy)
        if not bool(both.any()):
            return 0.0
        clean, difference = clean[both], difference[both]
    scale = _rms(difference) / unit
    return scale if scale > CANCELLED * _rms(clean) else 0.0


def _unit_of(node: fx.Node, dtypes: Mapping[str, Any]) -> Any:
    """The rounding unit of the dtype the model computes ``node`` in (a tuple for a tuple)."""
    recorded = dtypes.get(node.name, node.meta.get("val", node.meta.get("example_value")))
    return _units(recorded)


def _units(recorded: Any) -> Any:
    if isinstance(recorded, (tuple, list)):
        return tuple(_units(r) for r in recorded)
    dtype = recorded.dtype if isinstance(recorded, torch.Tensor) else recorded
    if isinstance(dtype, torch.dtype) and dtype.is_floating_point and dtype != torch.float64:
        return rounding_unit(dtype)
    return None


def _call(target: Callable[..., Any], args: Any, kwargs: dict[str, Any]) -> Any:
    """The op in fp64; a floating result it still makes below fp64 (a factory on the default dtype:
    ``aten.ones`` without ``dtype``) widened, so the ops after it run in fp64 too (a normalisation
    refuses an fp32 input with fp64 weights: the whole run after it would claim no floor)."""
    return to_fp64(target(*args, **_fp64_kwargs(kwargs)))


_NARROW = {rounding_unit(dtype): dtype for dtype in (torch.float16, torch.bfloat16, torch.float32)}


def rounded(value: Any, unit: Any, generator: torch.Generator, fresh: bool = False) -> Any:
    """An op's fp64 result rounded as the model's dtype rounds it (:func:`perturb`), except where
    it is exact in that dtype: there no rounding happened, so none is drawn. A mask's
    ``score + finfo.min`` is ``finfo.min`` exactly (the score absorbed) in every run; drawn as a
    relative rounding it moved by ~1e31, so a row masked whole (a padded query of an HF attention)
    read as a softmax of noise, and every value after it got a floor of millions of units: a
    planted softmax decomposition was then noise (``models/hf_gpt2_softmax_decomp``)."""
    if isinstance(value, (tuple, list)):
        unit_list = unit if isinstance(unit, (tuple, list)) else [unit] * len(value)
        return type(value)(rounded(v, u, generator, fresh) for v, u in zip(value, unit_list))
    narrow = _NARROW.get(unit) if isinstance(unit, float) else None
    exact = _exact_entries(value, narrow) if narrow is not None and _floating(value) else None
    if exact is None:
        return perturb(value, unit, generator, fresh)
    kept = value[exact]
    result = perturb(value, unit, generator, fresh)  # a new tensor, or ``value`` itself where fresh
    result[exact] = kept
    return result


# Float8 with two bits of mantissa: a tensor whose every entry it holds exactly (0/1 masks, one-hot
# rows, small counts, autograd's seed of ones, a dropout mask's 0 and 1/(1 - p) for p = 0.2 or 0.5) is
# data, not the rounding of a computed value; real-valued data (``randn``, activations, pixels / 255) has
# an entry it does not hold in its first few (a random fp32 entry is held with probability 2**-21).
_DATA_FORMAT = torch.float8_e5m2


def program_data(value: Any) -> bool:
    """``value`` is a floating tensor whose every entry is exact in :data:`_DATA_FORMAT`: an input
    the program made as data (a float attention mask of 0 and 1), which no rounding produced, so
    its noisy twin draws none. Drawn as rounded once, an HF-style ``(1 - keep) * finfo.min`` made
    from a float ``keep`` passed in moved every kept score by ~1e31 (``keep`` of 1 moved by ``u``,
    times ``finfo.min``): a softmax of noise, and a floor of millions of units on everything after
    it, a silent clean. Read :data:`CHUNK` entries at a time, the first chunk that holds an inexact
    entry ends it."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or value.numel() == 0:
        return False
    flat = value.detach().reshape(-1)
    for start in range(0, flat.numel(), CHUNK):
        part = flat[start:start + CHUNK]
        if not bool((part.to(_DATA_FORMAT).to(part.dtype) == part).all()):
            return False
    return True


def _exact_entries(value: torch.Tensor, narrow: torch.dtype, zeros: bool = False) -> torch.Tensor | None:
    """Where ``value`` (fp64) is exact in ``narrow``, zeros only with ``zeros`` (a relative rounding
    moves a zero by nothing anyway; an additive one does); None where no entry is. Read
    :data:`CHUNK` entries at a time: one bool per entry is all it holds."""
    flat = value.reshape(-1)
    if flat.numel() == 0:
        return None
    exact = torch.empty(flat.shape, dtype=torch.bool, device=value.device)
    for start in range(0, flat.numel(), CHUNK):
        part = flat[start:start + CHUNK]
        if zeros:
            torch.eq(part.to(narrow), part, out=exact[start:start + CHUNK])
        else:
            torch.logical_and(part.to(narrow) == part, part != 0, out=exact[start:start + CHUNK])
    return exact.view(value.shape) if bool(exact.any()) else None


def _saturated(value: torch.Tensor, narrow: torch.dtype) -> bool:
    """``value`` holds an entry at half its narrow dtype's largest magnitude or beyond (a
    ``finfo.min`` fill): only then is an add it enters scaled entry by entry (:func:`_added`; a
    reduction, no value-sized temporary, for every other add)."""
    if value.numel() == 0:
        return False
    low, high = torch.aminmax(value)
    return max(abs(float(low)), abs(float(high))) >= torch.finfo(narrow).max / 2


def _clean_exact(clean: Any, noisy: Any) -> Any:
    """Integer and boolean results are taken from the clean run: noise is not carried through them."""
    if isinstance(clean, (tuple, list)) and isinstance(noisy, (tuple, list)) and len(clean) == len(noisy):
        return type(clean)(_clean_exact(c, n) for c, n in zip(clean, noisy))
    if isinstance(clean, torch.Tensor) and not clean.is_floating_point():
        return clean
    return noisy


def noise_floors(graph_module: fx.GraphModule, inputs: Sequence[Any], dtypes: Mapping[str, Any],
                 fixed: Mapping[str, Any] = {}) -> NoiseFloors:
    """The own and carried floors of every floating value of ``graph_module`` run on ``inputs``.

    ``dtypes``: the dtype (or a value of it) each node computes in, by name (eager's values);
    ``fixed``: values taken as given on both runs (random draws, by name).

    Streamed as the plain fp64 reference is (:func:`~bisect_engine.verdict.fx_eval.stream_graph`):
    the clean and noisy values live by liveness, and an input (a placeholder, an attribute, a
    fixed value) is held as given, not widened: each op widens the inputs it reads, and the noisy
    twin of an input is drawn again from the generator state saved where the run first drew it
    (the same draws, in the same order, as widening every input up front). A graph that writes in
    place (:func:`~bisect_engine.verdict.fx_eval.mutates`) widens each input once, up front: its
    writes must reach every later reader."""
    runs = _Runs(torch.Generator().manual_seed(SEED), streamed=not mutates(graph_module))
    own: dict[str, Any] = {}
    carried: dict[str, Any] = {}
    remaining = list(inputs)
    last_use = _last_uses(graph_module)
    with torch.no_grad():
        for node in graph_module.graph.nodes:
            if node.op == "output":
                break
            unit = _unit_of(node, dtypes)
            if node.name in fixed:
                if node.op == "placeholder" and remaining:
                    remaining.pop(0)
                carried[node.name] = runs.hold(node, fixed[node.name], unit, draw=False)
            elif node.op in ("placeholder", "get_attr"):
                given = ((remaining.pop(0) if remaining else None) if node.op == "placeholder"
                         else _attribute(graph_module, str(node.target)))
                carried[node.name] = runs.hold(node, given, unit, draw=True)
            else:
                need = _need(node, runs)
                if watch_op(node, need, None if runs.host else recorded_device(node)):
                    # the device cannot take the op and the host can: both runs go on on the host
                    move_to_host(node, need, runs.clean_env, runs.noisy_env)
                    runs.host = True
                clean, noisy = _computed(node, runs, unit, dtypes, own)
                runs.clean_env[node], runs.noisy_env[node] = clean, noisy
                carried[node.name] = floor_of(clean, noisy, unit) if noisy is not clean else 0.0
            for done in last_use.get(node, ()):  # values no later node reads: freed (two fp64 copies)
                runs.free(done)
    return NoiseFloors(_scalars(own), _scalars(carried))


@dataclass(frozen=True)
class _Held:
    """An input as given (not widened), its rounding unit, and the generator state its noisy twin
    is drawn from (None: the same value on both runs)."""

    value: Any
    unit: Any
    state: torch.Tensor | None


@dataclass
class _Runs:
    """The clean and noisy runs' live values by node, and the inputs held as given."""

    generator: torch.Generator
    streamed: bool  # inputs held as given (a graph that writes in place: widened up front)
    clean_env: dict[fx.Node, Any] = field(default_factory=dict)
    noisy_env: dict[fx.Node, Any] = field(default_factory=dict)
    held: dict[fx.Node, _Held] = field(default_factory=dict)
    # both runs moved to the host (their device could not take an op, ``fx_eval.watch_op``): their
    # values are there, an input held as given is widened there, a factory op makes its value there
    host: bool = False

    def hold(self, node: fx.Node, value: Any, unit: Any, draw: bool) -> Any:
        """Keep an input as given and advance the generator past its draw; its carried floor
        (an input rounded once: never one; computed as the run does where it is not one tensor)."""
        if (not self.streamed or not isinstance(value, torch.Tensor)
                or (draw and not _drawn(value, unit))):
            clean = to_fp64(value)
            noisy = perturb(clean, unit, self.generator) if draw else clean
            self.clean_env[node], self.noisy_env[node] = clean, noisy
            return floor_of(clean, noisy, unit)
        state = self.generator.get_state() if draw else None
        if draw:
            _advance(self.generator, value.numel())
        self.held[node] = _Held(value, unit, state)
        return 0.0  # |x u r| <= |x| u: a value rounded once never reads as cancelled

    def clean(self, node: fx.Node) -> Any:
        held = self.held.get(node)
        if held is None:
            return self.clean_env[node]
        return to_fp64(on_host(held.value) if self.host else held.value)

    def noisy(self, node: fx.Node, clean: Any) -> Any:
        """``node``'s noisy value (``clean``: its clean one, already widened)."""
        held = self.held.get(node)
        if held is None:
            return self.noisy_env[node]
        if held.state is None:
            return clean
        return perturb(clean, held.unit, torch.Generator().set_state(held.state))

    def given(self, node: fx.Node) -> Any:
        """The clean value as held: an input as given (its scale is the same in fp64)."""
        held = self.held.get(node)
        return held.value if held is not None else self.clean_env.get(node)

    def free(self, node: fx.Node) -> None:
        self.clean_env.pop(node, None)
        self.noisy_env.pop(node, None)
        self.held.pop(node, None)


_WIDENED = (torch.float16, torch.bfloat16, torch.float32, torch.float64)  # fp64 once widened (to_fp64)
_CHUNK = 1 << 20


def _drawn(value: torch.Tensor, unit: Any) -> bool:
    """Whether :func:`perturb` draws for ``value`` widened, at ``unit``."""
    return value.dtype in _WIDENED and isinstance(unit, float)


def _advance(generator: torch.Generator, count: int) -> None:
    """Move ``generator`` past ``count`` fp64 draws, a chunk at a time (the same state as one
    ``torch.rand`` of that many: the CPU generator fills serially)."""
    while count > 0:
        torch.rand(min(count, _CHUNK), generator=generator, dtype=torch.float64)
        count -= _CHUNK


def _computed(node: fx.Node, runs: _Runs, unit: Any, dtypes: Mapping[str, Any],
              own: dict[str, Any]) -> tuple[Any, Any]:
    """A computed node's clean and noisy values (its own floor into ``own``)."""
    if node.op == "call_function" and node.target is operator.getitem:
        source = node.args[0]
        if not isinstance(source, fx.Node):
            return None, None
        clean = runs.clean(source)
        noisy = runs.noisy(source, clean)
        producer_own = own.get(source.name)
        if isinstance(producer_own, tuple) and isinstance(node.args[1], int) and node.args[1] < len(producer_own):
            own[node.name] = producer_own[node.args[1]]
        return _getitem(node.args[1], clean), _getitem(node.args[1], noisy)
    if node.op == "call_function":
        clean, noisy, own[node.name] = _run_op(node, runs, unit, dtypes)
        return clean, noisy
    return None, None  # call_module / call_method do not occur in aten graphs; no noise claimed


def _last_uses(graph_module: fx.GraphModule) -> dict[fx.Node, list[fx.Node]]:
    """For each node, the values whose last reader it is (the output node reads none here)."""
    last: dict[fx.Node, fx.Node] = {}
    for node in graph_module.graph.nodes:
        if node.op != "output":
            for source in node.all_input_nodes:
                last[source] = node
    for node in graph_module.graph.nodes:  # a value nothing reads is freed at once
        if node not in last:
            last[node] = node
    uses: dict[fx.Node, list[fx.Node]] = {}
    for value, reader in last.items():
        uses.setdefault(reader, []).append(value)
    return uses


def _need(node: fx.Node, runs: _Runs) -> int:
    """About the bytes ``node``'s op adds to the two runs: the clean and noisy values, and of each
    input it widens: its fp64 copy, its noisy twin and its copy rounded once (a 1 GB weight's ~6 GB)."""
    return 2 * value_bytes(node, True) + 3 * widened_bytes([runs.given(s) for s in node.all_input_nodes])


def _run_op(node: fx.Node, runs: _Runs, unit: Any, dtypes: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """The op on fp64 inputs: clean, on the noisy run's inputs (then rounded), and on the clean
    inputs rounded once (its own floor). An op without an fp64 kernel runs in the model's dtype
    on inputs narrowed to it, as the fp64 reference falls back
    (:class:`~bisect_engine.verdict.fx_eval._EagerInterpreter`), its results widened again: the
    values after it still get floors (one that refuses that too claims no floor, nor do the values
    computed from it). Inputs held as given are widened here, for this op only."""
    target = node.target
    assert callable(target)
    clean_in = {n: runs.clean(n) for n in node.all_input_nodes}
    narrowed = False
    try:
        clean = _apply(node, clean_in, runs.host)
    except Exception as error:  # noqa: BLE001 - no fp64 kernel: the op in the model's dtype
        if host_after_failure(node, lambda: _need(node, runs), None if runs.host else recorded_device(node), error,
                              runs.clean_env, runs.noisy_env):
            # its allocation failed on the device though the watch let it through: both runs go on
            # on the host, and the op runs again there (no draw was made for it yet)
            del clean_in, error
            runs.host = True
            return _run_op(node, runs, unit, dtypes)
        stop_if_out_of_memory(error, "in an op's noise run")
        log.debug("noise: %s has no fp64 run, judged in the model's dtype: %s", node.name, error)
        narrowed = True
        try:
            clean = _apply(node, _narrowed(clean_in, dtypes), runs.host)
        except Exception as narrow_error:  # noqa: BLE001 - not even in the model's dtype: no floor
            stop_if_out_of_memory(narrow_error, "in an op's noise run")
            log.debug("noise: %s has no run: %s", node.name, narrow_error)
            return None, None, 0.0

    def apply(values: dict[fx.Node, Any]) -> Any:
        return _apply(node, _narrowed(values, dtypes) if narrowed else values, runs.host)

    try:
        generator = runs.generator
        noisy_in = {n: runs.noisy(n, value) for n, value in clean_in.items()}
        noisy = apply(noisy_in)
        del noisy_in
        noisy = _clean_exact(clean, rounded(noisy, unit, generator))
        noisy = _with_order_noise(node, runs, clean, noisy, unit, generator)
        once_in = {n: perturb(value, _unit_of(n, dtypes), generator) for n, value in clean_in.items()}
        del clean_in
        once = rounded(apply(once_in), unit, generator)
    except Exception as error:  # noqa: BLE001 - perturbed inputs the op refuses: no floor
        stop_if_out_of_memory(error, "in an op's perturbed run")
        log.debug("noise: %s refused perturbed inputs: %s", node.name, error)
        return clean, clean, 0.0
    return clean, noisy, floor_of(clean, once, unit)


def _apply(node: fx.Node, values: Mapping[fx.Node, Any], host: bool = False) -> Any:
    """``node``'s op on ``values`` (its inputs by node), in fp64 (:func:`_call`); ``host``: a
    device it is told to make its value on is the host's (the runs moved there)."""
    assert callable(node.target)
    args, kwargs = fx.node.map_arg(node.args, values.__getitem__), dict(fx.node.map_arg(node.kwargs, values.__getitem__))
    return _call(node.target, *((on_host(args), on_host(kwargs)) if host else (args, kwargs)))


def _narrowed(values: Mapping[fx.Node, Any], dtypes: Mapping[str, Any]) -> dict[fx.Node, Any]:
    """Each fp64 input cast back to the floating dtype the model computed it in (by ``dtypes``, or
    the graph's record; float32 without either, the dtype every floating kernel has)."""
    def narrow(source: fx.Node, value: Any) -> Any:
        if not isinstance(value, torch.Tensor) or value.dtype != torch.float64:
            return value
        recorded = dtypes.get(source.name, source.meta.get("val", source.meta.get("example_value")))
        dtype = recorded.dtype if isinstance(recorded, torch.Tensor) else recorded
        if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
            dtype = torch.float32
        return value if dtype == torch.float64 else faithful_copy(value, dtype)

    return {source: narrow(source, value) for source, value in values.items()}


def _with_order_noise(node: fx.Node, runs: _Runs, clean: Any, noisy: Any, unit: Any,
                      generator: torch.Generator) -> Any:
    """A reduction's result with the rounding of its partial sums added (``u`` times the scale
    :func:`~bisect_engine.verdict.judgement.combined_scale` gives it, at random): the order any
    valid kernel sums in (a tree, a loop, atomics that change run to run) is noise its users carry."""
    if not (_floating(noisy) and isinstance(unit, float)):
        return noisy
    values = {source.name: runs.given(source) for source in node.all_input_nodes}
    values[node.name] = clean
    scale = combined_scale(node, values)
    if not scale > 0.0 or not math.isfinite(scale):
        return noisy
    draw = torch.rand(noisy.shape, generator=generator, dtype=torch.float32).to(noisy.device, torch.float64)
    added = op_base_name(node.target) in _ELEMENTWISE_ADDS
    narrow = _narrow_of(node) if added else None
    operands = _added(node, values, noisy, narrow) if added else None
    if operands is not None:  # a fill among its operands: each entry at its own operands' scale
        result = draw.mul_(2).sub_(1).mul_(unit).mul_(operands).add_(noisy)
    elif not noisy.is_contiguous():
        result = noisy + (draw * 2 - 1) * (unit * scale)
    else:
        # In the draw's own memory (a large reduction's value: one temporary, not four): the same
        # elementwise IEEE operations in the same order, and the sum commutes, so the same bits and the
        # same contiguous layout as ``noisy + (draw * 2 - 1) * (unit * scale)``.
        result = draw.mul_(2).sub_(1).mul_(unit * scale).add_(noisy)
    exact = _exact_entries(noisy, narrow, zeros=True) if narrow is not None else None
    if exact is not None:  # an add's exact entries (a zero, a fill) had no rounding to draw
        result[exact] = noisy[exact]
    return result


_ELEMENTWISE_ADDS = ("add", "sub", "rsub")


def _narrow_of(node: fx.Node) -> torch.dtype | None:
    """The float dtype below fp64 the model computes ``node`` in (None: unknown or fp64)."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor) and val.dtype.is_floating_point and val.dtype != torch.float64:
        return _NARROW.get(rounding_unit(val.dtype))
    return None


def _added(node: fx.Node, values: Mapping[str, Any], noisy: torch.Tensor,
           narrow: torch.dtype | None) -> torch.Tensor | None:
    """For an elementwise add or sub with a fill among its operands (``_saturated`` in ``narrow``,
    the node's dtype; fp32 where unknown), ``combined_scale``'s operands' scale entry by entry,
    max(|a|, |b|); None otherwise (the tensor-wide scale stands, no value-sized temporaries). Read
    tensor-wide (the RMS of a mask full of ``finfo.min``), a padded attention's every score moved
    by ~1e31 and its softmax became noise."""
    if len(node.args) < 2:
        return None
    operands = [values.get(arg.name) if isinstance(arg, fx.Node) else arg for arg in node.args[:2]]
    if not all(isinstance(v, (torch.Tensor, int, float)) and not isinstance(v, bool) for v in operands):
        return None
    if not any(isinstance(v, torch.Tensor) and v.is_floating_point() and _saturated(v, narrow or torch.float32)
               for v in operands):
        return None
    try:
        scale = torch.maximum(*(torch.as_tensor(v, dtype=torch.float64, device=noisy.device).abs() for v in operands))
        return torch.nan_to_num(scale.expand(noisy.shape), nan=0.0, posinf=0.0)
    except RuntimeError:  # shapes that do not broadcast to the result: the tensor-wide scale stands
        return None


def _getitem(index: Any, value: Any) -> Any:
    try:
        return value[index] if value is not None else None
    except (IndexError, TypeError, KeyError):
        return None


def _attribute(graph_module: fx.GraphModule, target: str) -> Any:
    value: Any = graph_module
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _scalars(floors: Mapping[str, Any]) -> dict[str, float]:
    """Only the positive, finite floors of single values (a tuple's are read through its getitems)."""
    return {name: float(value) for name, value in floors.items()
            if isinstance(value, float) and value > 0.0 and math.isfinite(value)}


# ---- the whole model: the same noise, where no graph is at hand ---------------------------------
class Perturbed(TorchDispatchMode):
    """Every floating op's fresh result moved by a relative rounding ``unit`` (see :func:`perturb`):
    the model's fp64 run under it is the noisy run of the model as a whole (forward and backward).
    Views, in-place writes and random draws are left as they are (aliases must stay aliases)."""

    def __init__(self, unit: float, seed: int = SEED) -> None:
        super().__init__()
        self.unit = unit
        self.generator = torch.Generator().manual_seed(seed)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        result = func(*args, **(kwargs or {}))
        schema = getattr(func, "_schema", None)
        aliases = schema is None or schema.is_mutable or any(r.alias_info is not None for r in schema.returns)
        if aliases or torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()):
            return result
        return rounded(result, self.unit, self.generator, fresh=_apart(result, (args, kwargs)))


def _apart(result: Any, inputs: Any) -> bool:
    """No tensor of ``result`` shares a storage with a tensor of ``inputs`` (an op that returns an
    input, or a view of one, without its schema saying so); False where a storage cannot be read."""
    try:
        held = {t.untyped_storage().data_ptr() for t in torch.utils._pytree.tree_leaves(inputs)
                if isinstance(t, torch.Tensor) and t.layout == torch.strided}
        return not any(t.untyped_storage().data_ptr() in held for t in torch.utils._pytree.tree_leaves(result)
                       if isinstance(t, torch.Tensor) and t.layout == torch.strided)
    except (RuntimeError, NotImplementedError):  # a tensor without a plain storage: the value-sized path
        return False


def model_floors(noisy_run: Callable[[], Sequence[Any]], fp64: Sequence[Any], eager: Sequence[Any]) -> list[float]:
    """Per model output (and gradient), the scale its rounding noise lives at where it cancelled:
    ``noisy_run`` (the model's fp64 run) repeated under :class:`Perturbed`, against ``fp64``. A model
    whose fp64 run refuses the mode claims no floor (0.0 each)."""
    units = [rounding_unit(e.dtype) if isinstance(e, torch.Tensor) and e.is_floating_point() else None for e in eager]
    unit = max((u for u in units if u is not None), default=None)
    if unit is None or len(fp64) != len(eager):
        return [0.0] * len(eager)
    try:
        with Perturbed(unit):
            noisy = list(noisy_run())
    except Exception as error:  # noqa: BLE001 - no noisy run: no floor, the judgement as before
        stop_if_out_of_memory(error, "in the perturbed fp64 run")
        log.debug("noise: the model's perturbed fp64 run failed: %s", error)
        return [0.0] * len(eager)
    if len(noisy) != len(fp64):
        return [0.0] * len(eager)
    floors = []
    for index, (clean, unit_of) in enumerate(zip(fp64, units)):  # each noisy value let go once its floor is taken
        value, noisy[index] = noisy[index], None
        floors.append(floor_of(to_fp64(clean), to_fp64(value), unit_of))
        del value
    return [f if isinstance(f, float) else 0.0 for f in floors]
