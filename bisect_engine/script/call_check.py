"""One call of a compiled Dynamo graph, checked: the graph run eagerly and in fp64 on the same
real inputs, and the compiled result judged with :func:`bisect_engine.verdict.judgement.judge_outputs`.

Inputs the graph mutates in place (running statistics, an optimizer step) are judged too, after
the call, as extra outputs. In a training step, gradients are judged as well: the compiled graph's
own backward against eager's and fp64's, for fixed cotangents (:func:`weighted_sum`).

A graph that draws random numbers is detected by the global random state moving during the eager
run: its draws differ between eager and Inductor, so a mismatch there is inconclusive, not a
divergence (script mode then asks the engine, which feeds eager's draws to both sides). A call
whose outputs fail the rule is judged again with the noise model's floors (:func:`call_floors`:
an output the program's own rounding moves as far as compiled's difference is noise, not a
divergence). Nothing here writes files; the caller owns the random state.
"""
from __future__ import annotations

import contextlib
import copy
import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from ..verdict.compare import Outcome, TensorVerdict, clearly_above_eager, material_difference, worst
from ..verdict.judgement import MODEL, PROGRAM, UPSTREAM_SAME, Oracle, OutputFacts, judge_outputs, scalar_exact
from ..verdict.fx_eval import clone_value, run_graph, to_fp64
from ..verdict.noise import model_floors

log = logging.getLogger(__name__)


@dataclass
class References:
    """The graph's outputs (and mutated inputs) eagerly in the model's dtype and in fp64."""

    eager: list[Any]
    fp64: list[Any] | None  # None: no fp64 run was possible; eager is the reference
    eager_inputs: list[Any]
    fp64_inputs: list[Any]
    mutated: list[int]  # positions of the inputs the graph writes to
    random: bool
    fp64_error: str = ""


@dataclass(frozen=True)
class CallVerdict:
    outcome: Outcome
    outputs: dict[str, TensorVerdict]
    # outputs judged a match (compiled at least as close to fp64 as eager) that still differ from
    # eager's materially: a departure the program sees (pytorch#185517: a bf16 hinge's saved mask
    # flipped, every gradient element off), listed by the engine's departure look, never a divergence
    departing: tuple[str, ...] = ()
    # outputs judged a match (within the end-to-end tolerance, at their noise floors) whose error
    # against fp64 is clearly above eager's (``compare.clearly_above_eager``, the trigger of a model
    # file's below-tolerance look): asked for by ``judge_call(below=True)``; the session's
    # below-tolerance look names the ops of the graph wrong alone, listed, never a divergence; None:
    # not looked at (not asked, or no output clearly above eager's before its floor was measured)
    below_tolerance: tuple[str, ...] | None = None

    @property
    def failing(self) -> str | None:
        return next((name for name, v in self.outputs.items() if v.outcome is not Outcome.MATCH), None)

    def within_upstream(self) -> dict[str, TensorVerdict]:
        """Outputs the tool's rule alone fails and upstream's ``same`` passes (issue 36): listed,
        never a divergence (``verdict.judgement.upstream_gate``)."""
        return {name: v for name, v in self.outputs.items() if v.reason == UPSTREAM_SAME}

    def to_json(self) -> dict[str, Any]:
        name = self.failing
        verdict = self.outputs[name] if name else worst(list(self.outputs.values()))
        return {"outcome": self.outcome.value, "output": name, **verdict.to_json()}


def _rng_states() -> list[torch.Tensor]:
    states = [torch.get_rng_state()]
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states += torch.cuda.get_rng_state_all()
    return states


def _set_rng_states(states: list[torch.Tensor]) -> None:
    torch.set_rng_state(states[0])
    if len(states) > 1:
        torch.cuda.set_rng_state_all(states[1:])


def input_label(graph_module: fx.GraphModule, position: int, labels: dict[str, str] | None = None) -> str:
    """``input 3 (L_self_modules_up_parameters_weight_)``: Dynamo names inputs by their source;
    ``labels`` names some by what the program calls them (a lifted optimizer state tensor)."""
    names = [str(node.target) for node in graph_module.graph.nodes if node.op == "placeholder"]
    if position >= len(names):
        return f"input {position}"
    return f"input {position} ({(labels or {}).get(names[position], names[position])})"


def flat_values(value: Any) -> list[Any]:
    return list(pytree.tree_leaves(value))


def _registers_hook(node: fx.Node) -> bool:
    return ((node.op == "call_function" and node.target is getattr(torch.ops.higher_order, "register_hook", None))
            or (node.op == "call_method" and node.target == "register_hook"))


def without_hook_registrations(graph_module: fx.GraphModule) -> fx.GraphModule:
    """The graph with its tensor-hook registrations (``h.register_hook(fn)`` in the program's
    forward: Dynamo's ``register_hook`` node) taken out: a hook acts only in the backward, and
    registering one raises on a tensor that needs no gradient (the references run under no_grad).
    The graph itself when it registers none; else a copy whose hook nodes pass their tensor on."""
    if not any(_registers_hook(node) for node in graph_module.graph.nodes):
        return graph_module
    copied = copy.deepcopy(graph_module)
    for node in list(copied.graph.nodes):
        if _registers_hook(node):
            if node.op == "call_function":  # the HOP returns the tensor it hooked
                node.replace_all_uses_with(node.args[0])  # type: ignore[arg-type]
            hooks = [arg for arg in node.args if isinstance(arg, fx.Node) and arg.op == "get_attr"]
            copied.graph.erase_node(node)
            for hook in hooks:  # the hook's body, held as an attribute, now unused
                if not hook.users:
                    copied.graph.erase_node(hook)
    copied.recompile()
    return copied


def reference_outputs(graph_module: fx.GraphModule, inputs: Sequence[Any],
                      fp64_source: Sequence[Any] | None = None) -> References:
    """Run the graph on copies of ``inputs``, eagerly then in fp64, from the same random state
    (without its hook registrations, :func:`without_hook_registrations`). ``fp64_source``: the
    fp64 run's own inputs (an earlier graph's fp64 values, ``script/reach.py``), default ``inputs``.

    The caller restores the random state afterwards (the program must draw what it would have).
    """
    graph_module = without_hook_registrations(graph_module)
    eager_inputs = clone_value(list(inputs))
    versions = [v._version if isinstance(v, torch.Tensor) else None for v in eager_inputs]
    states = _rng_states()
    with torch.no_grad():
        eager = clone_value(flat_values(graph_module(*eager_inputs)))
    random = any(not torch.equal(a, b) for a, b in zip(states, _rng_states()))
    mutated = [i for i, (v, version) in enumerate(zip(eager_inputs, versions))
               if isinstance(v, torch.Tensor) and v._version != version]
    _set_rng_states(states)
    fp64, fp64_inputs, error = _fp64_outputs(graph_module, inputs if fp64_source is None else fp64_source)
    if fp64 is not None and len(fp64) != len(eager):
        fp64, error = None, "the fp64 run returned another number of outputs; eager is the reference"
    return References(eager, fp64, eager_inputs, fp64_inputs, mutated, random, error)


def _fp64_outputs(graph_module: fx.GraphModule, inputs: Sequence[Any]) -> tuple[list[Any] | None, list[Any], str]:
    """Every floating op in fp64: per node (the engine's interpreter), else the whole graph module
    cast to fp64 (graphs with ``call_module`` nodes), else no fp64 reference at all."""
    fp64_inputs = to_fp64(clone_value(list(inputs)))
    try:
        return run_graph(graph_module, fp64_inputs, upcast=True), fp64_inputs, ""
    except Exception as error:  # noqa: BLE001 - reported as the reason eager is the reference
        log.debug("per-node fp64 run failed: %s", error)
    fp64_inputs = to_fp64(clone_value(list(inputs)))
    try:
        with torch.no_grad():
            module64 = copy.deepcopy(graph_module).to(torch.float64)
            return flat_values(module64(*fp64_inputs)), fp64_inputs, ""
    except Exception as error:  # noqa: BLE001
        log.debug("fp64 module run failed: %s", error)
        return None, fp64_inputs, f"no fp64 reference ({type(error).__name__}: {error}); eager is the reference"


def judge_call(graph_module: fx.GraphModule, references: References, compiled_outputs: Any,
               compiled_inputs: Sequence[Any], oracle: Oracle = Oracle(),
               labels: dict[str, str] | None = None, below: bool = False) -> CallVerdict:
    """The compiled call's outputs, and the inputs it wrote to, against eager and fp64 (no
    verdict at all, ``outputs`` empty, when the call returns nothing and writes nothing).
    ``below``: a matching call's outputs clearly above eager's error are named
    (``CallVerdict.below_tolerance``), judged at their noise floors first, as a model file's
    whole graph and model are (a value that cancels is measured where its rounding lives)."""
    compiled = flat_values(compiled_outputs)
    fp64 = references.fp64 if references.fp64 is not None else references.eager
    names = [f"output {i}" for i in range(len(references.eager))]
    eager_values, fp64_values, compiled_values = list(references.eager), list(fp64), compiled
    if len(compiled) == len(references.eager):
        for i in references.mutated:
            names.append(f"{input_label(graph_module, i, labels)}, written in place")
            eager_values.append(references.eager_inputs[i])
            reference = references.fp64_inputs[i] if references.fp64 is not None else references.eager_inputs[i]
            fp64_values.append(reference)
            compiled_values = compiled_values + [compiled_inputs[i]]
    # What a call returns goes on through the program (an ``.item()``, the next graph's input) or is
    # its result: judged at the end-to-end tolerance, as the whole model is (issue 36: a vectorised
    # erf a few dozen ulps off, feeding ``.item()``, is no divergence of the program).
    exact = exact_outputs(graph_module, len(references.eager)) + [False] * (len(names) - len(references.eager))
    verdicts = judge_outputs(oracle, MODEL, eager_values, fp64_values, compiled_values,
                             [OutputFacts(scalar_exact=flag) for flag in exact])
    looked = below and any(clearly_above_eager(v) for v in verdicts)
    if len(verdicts) == len(names) and (worst(verdicts).outcome is Outcome.MISMATCH or looked):
        # The noise run only where it can change the verdict (its floors only loosen the rule), or
        # where a below-tolerance look was asked for (outputs clearly above eager's, at their floors).
        floors = call_floors(graph_module, references) + [0.0] * (len(names) - len(references.eager))
        verdicts = judge_outputs(oracle, MODEL, eager_values, fp64_values, compiled_values,
                                 [OutputFacts(scale_floor=floor, scalar_exact=flag) for floor, flag in zip(floors, exact)])
    if len(verdicts) != len(names):
        return CallVerdict(Outcome.MISMATCH, {"outputs": verdicts[0]})
    outputs = dict(zip(names, verdicts))
    outcome = worst(verdicts).outcome if verdicts else Outcome.MATCH
    above = (tuple(name for name, v in outputs.items() if clearly_above_eager(v) and v.reason != UPSTREAM_SAME)
             if outcome is Outcome.MATCH else ()) if looked else None
    return CallVerdict(outcome, outputs, below_tolerance=above)


def exact_outputs(graph_module: fx.GraphModule, count: int) -> list[bool]:
    """For each of the call's ``count`` outputs: computed by an op whose result jumps with a scalar
    its fp16/bf16 dtype rounds (``judgement.scalar_exact``, as a model file's graph outputs are
    judged: ``torch.remainder(x16, 3.14)``, pytorch#183083)? All False where the outputs cannot be
    told apart by node."""
    output = next((node for node in reversed(graph_module.graph.nodes) if node.op == "output"), None)
    leaves = pytree.tree_leaves(output.args[0]) if output is not None else []
    if len(leaves) != count:
        return [False] * count
    return [isinstance(leaf, fx.Node) and scalar_exact(leaf) for leaf in leaves]


def call_floors(graph_module: fx.GraphModule, references: References) -> list[float]:
    """The noise model's floor of each output of the call (:func:`~bisect_engine.verdict.noise.model_floors`):
    the graph's fp64 run once more with every op's result rounded at random, as a model file's
    outputs get theirs. None (0.0 each) without an fp64 reference, for a call that writes its inputs
    (the fp64 run's inputs are written already) or draws random numbers (the global random state is
    the program's); the random state is put back after the run."""
    if references.fp64 is None or references.mutated or references.random:
        return [0.0] * len(references.eager)
    graph_module = without_hook_registrations(graph_module)
    states = _rng_states()
    try:
        return model_floors(lambda: run_graph(graph_module, clone_value(references.fp64_inputs), upcast=True),
                            references.fp64, references.eager)
    finally:
        _set_rng_states(states)


# -- a cast the program wrote, skipped within the end-to-end tolerance -----------------------------

_NARROW = (torch.float16, torch.bfloat16)
_CAST_METHODS = {"to", "half", "bfloat16", "type"}


def _example(node: Any) -> Any:
    return node.meta.get("example_value", node.meta.get("val")) if isinstance(node, fx.Node) else None


def _narrowing_cast(node: fx.Node) -> bool:
    """A ``.to(fp16/bf16)`` (``.half()``, ``.bfloat16()``, ``.type(...)``) the program wrote, of a
    wider float: read from the Dynamo graph's recorded example values (an autocast region's
    implicit casts are not among them)."""
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if node.op not in ("call_method", "call_function") or name not in _CAST_METHODS:
        return False
    narrow, wide = _example(node), _example(node.args[0] if node.args else None)
    return (isinstance(narrow, torch.Tensor) and isinstance(wide, torch.Tensor) and narrow.dtype in _NARROW
            and wide.is_floating_point() and wide.element_size() > narrow.element_size())


def may_elide_cast(graph_module: fx.GraphModule, references: References, compiled_outputs: Any) -> bool:
    """Whether a matching call may hide a cast the compiled code skipped (pytorch#182131: one fp16
    ulp, within the end-to-end tolerance): the graph narrows a float with a cast the program wrote,
    and a floating output differs from eager's in some element. Cheap (no run): what sends the
    call to the engine's cast-elision look (``departures.elided_cast(exact=True)``)."""
    if references.random or references.mutated:
        return False
    compiled = flat_values(compiled_outputs)
    differs = len(compiled) == len(references.eager) and any(
        isinstance(e, torch.Tensor) and isinstance(c, torch.Tensor) and e.is_floating_point()
        and e.shape == c.shape and e.dtype == c.dtype and not bool(((e == c) | (e.isnan() & c.isnan())).all())
        for e, c in zip(references.eager, compiled))
    return differs and any(_narrowing_cast(node) for node in graph_module.graph.nodes)


# -- gradients ------------------------------------------------------------------------------------


def grad_positions(inputs: Sequence[Any]) -> list[int]:
    """The inputs a training step differentiates: floating tensors that require grad."""
    return [i for i, v in enumerate(inputs)
            if isinstance(v, torch.Tensor) and v.requires_grad and v.is_floating_point()]


def weighted_sum(outputs: Sequence[Any]) -> torch.Tensor | None:
    """``sum_i (output_i * c_i).sum()`` with fixed pseudo-random cotangents ``c_i`` (drawn in fp32
    from a private generator, so eager, fp64 and compiled runs share them): its gradient is the
    vector-Jacobian product every output contributes to. None when no output needs a gradient."""
    generator = torch.Generator().manual_seed(0)
    total: torch.Tensor | None = None
    for output in outputs:
        if isinstance(output, torch.Tensor) and output.requires_grad and output.is_floating_point():
            cotangent = torch.randn(output.shape, generator=generator, dtype=torch.float32).to(device=output.device, dtype=output.dtype)
            term = (output * cotangent).sum()
            total = term if total is None else total + term
    return total


def _gradients(function: Callable[..., Any], inputs: Sequence[Any], positions: list[int]) -> list[Any] | None:
    args = clone_value(list(inputs))
    for i in positions:
        args[i].requires_grad_(True)
    with torch.enable_grad():
        total = weighted_sum(flat_values(function(*args)))
        if total is None:
            return None
        grads = torch.autograd.grad(total, [args[i] for i in positions], allow_unused=True)
    return [None if g is None else g.detach() for g in grads]


def check_gradients(graph_module: fx.GraphModule, compiled: Callable[..., Any], inputs: Sequence[Any],
                    positions: list[int], oracle: Oracle = Oracle()) -> CallVerdict | None:
    """The compiled graph's gradients (through its own backward) against eager's and fp64's, for
    the inputs at ``positions`` (see :func:`grad_positions`); None when no output needs a
    gradient. The caller owns the random state; ``compiled`` runs on copies of the inputs."""
    if not positions:
        return None
    compiled_grads = _gradients(compiled, inputs, positions)
    eager_grads = _gradients(graph_module, inputs, positions)
    if compiled_grads is None or eager_grads is None:
        return None
    try:
        module64 = copy.deepcopy(graph_module).to(torch.float64)
        with _default_dtype(torch.float64):  # a factory in the graph (``torch.ones``) makes fp64 too
            fp64_grads = _gradients(module64, to_fp64(clone_value(list(inputs))), positions)
    except Exception as error:  # noqa: BLE001 - eager is then the reference
        log.debug("fp64 gradients failed: %s", error)
        fp64_grads = None
    verdicts = judge_outputs(oracle, PROGRAM, eager_grads, fp64_grads or eager_grads, compiled_grads)
    if fp64_grads and worst(verdicts).outcome is Outcome.MISMATCH:
        # The noise model's floors (as for the call's outputs, :func:`call_floors`): the fp64
        # gradients once more with every op's result rounded at random.
        floors = _gradient_floors(module64, inputs, positions, fp64_grads, eager_grads)
        verdicts = judge_outputs(oracle, PROGRAM, eager_grads, fp64_grads, compiled_grads,
                                 [OutputFacts(scale_floor=floor) for floor in floors])
    outputs = {f"gradient of {input_label(graph_module, i)}": v for i, v in zip(positions, verdicts)}
    departing = tuple(name for (name, v), e, c in zip(outputs.items(), eager_grads, compiled_grads)
                      if v.outcome is Outcome.MATCH and isinstance(e, torch.Tensor) and isinstance(c, torch.Tensor)
                      and material_difference(e, c).material)
    return CallVerdict(worst(verdicts).outcome if verdicts else Outcome.MATCH, outputs, departing)


def _gradient_floors(module64: fx.GraphModule, inputs: Sequence[Any], positions: list[int],
                     fp64_grads: list[Any], eager_grads: list[Any]) -> list[float]:
    """Each gradient's noise floor (``verdict/noise.model_floors``); the random state put back."""
    states = _rng_states()
    try:
        with _default_dtype(torch.float64):
            return model_floors(lambda: _gradients(module64, to_fp64(clone_value(list(inputs))), positions) or [],
                                fp64_grads, eager_grads)
    finally:
        _set_rng_states(states)


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)
