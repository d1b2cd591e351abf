"""Eager evaluation of FX graphs, in the model's dtype or in fp64, recording every node's value.

Depends on torch and the standard library only: the repro renderer embeds this file verbatim in
every emitted ``repro.py``, so a repro computes its references with exactly the tool's code.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import operator
from typing import Any, Callable, Iterator, Sequence

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

if __package__:  # the tool: an allocation that fails is the run's memory cut, never eager standing in for fp64
    from ..search import out_of_memory, stop_if_out_of_memory
else:  # embedded in a repro (``output/repro.py``), which has no run to cut: the fp64 fallback as it is
    def stop_if_out_of_memory(error: BaseException | str, doing: str = "") -> None:
        return None

    def out_of_memory(error: BaseException | str | None) -> bool:
        return False

log = logging.getLogger(__name__)

_FLOATING = (torch.float16, torch.bfloat16, torch.float32)

# Asked before each op a run here evaluates, with the node, about how many bytes the op will add
# (its value, and the fp64 copies of what it reads where the run widens) and the device it adds them
# on where that is not the host (an fp64 run's op on a CUDA device; None: the host): the tool's
# memory watch, which stops its run before an op that cannot fit, and answers True where the device
# cannot take the op and the host can (the fp64 run goes on on the host; ``verdict/offload.using``
# sets it). Asked again with the error where an op the watch let run on the device failed to
# allocate there all the same (a workspace, fragmentation): True where the host takes the op (the
# run goes on there, the op run again), else it stops the run. A repro sets none.
Watch = Callable[[fx.Node, int, "torch.device | None", "BaseException | None"], "bool | None"]
_WATCH: contextvars.ContextVar[Watch | None] = contextvars.ContextVar("bisect_node_watch", default=None)
HOST = torch.device("cpu")


@contextlib.contextmanager
def watching(watch: Watch | None) -> Iterator[None]:
    """``watch`` is asked before every op evaluated inside the block (None: nothing asked)."""
    token = _WATCH.set(watch)
    try:
        yield
    finally:
        _WATCH.reset(token)


def watch_op(node: fx.Node, need: int, device: torch.device | None = None,
             failed: BaseException | None = None) -> bool:
    """Ask the watch set by :func:`watching` (if any) whether ``node``, adding ``need`` bytes on
    ``device`` (None: the host), may run: it stops the run where it cannot; True where ``device``
    cannot take it and the host can (the caller moves its run there). ``failed``: the allocation
    error the op met on ``device`` (the host is asked alone)."""
    watch = _WATCH.get()
    return bool(watch(node, need, device, failed)) if watch is not None else False


def host_after_failure(node: fx.Node, need: Callable[[], int], device: torch.device | None,
                       error: BaseException, *envs: dict[Any, Any]) -> bool:
    """An op of an fp64 run on ``device`` (a CUDA one; None or the host: nothing to do) that the
    watch let through, whose allocation failed there all the same (``error``; a workspace,
    fragmentation): where the watch takes it on the host (asked for ``need()`` bytes), the run's
    values (``envs``) move there and True (the caller runs the op again, there); else False: the
    failure stands (the run's memory cut; an error that is no allocation's is the op's own).
    Nothing is asked outside a run's watch."""
    if not (off_host(device) and out_of_memory(error)):
        return False
    needed = need()
    if not watch_op(node, needed, device, error):
        return False
    move_to_host(node, needed, *envs)
    return True


def off_host(device: torch.device | None) -> bool:
    """Whether ``device`` is one other than the host (a CUDA device; ``meta`` holds nothing)."""
    return device is not None and device.type not in ("cpu", "meta")


def recorded_device(node: fx.Node) -> torch.device | None:
    """The device ``node``'s value was recorded on where that is not the host (a CUDA device), else None."""
    for value in pytree.tree_leaves(node.meta.get("val", node.meta.get("example_value"))):
        if isinstance(value, torch.Tensor) and off_host(value.device):
            return value.device
    return None


def on_host(value: Any) -> Any:
    """``value`` with every tensor and device in it on the host (an fp64 run moved there: its
    values, and the device a factory op is told to make its result on)."""
    if isinstance(value, torch.Tensor):
        return value.to(HOST) if off_host(value.device) else value
    if isinstance(value, torch.device):
        return HOST if off_host(value) else value
    if isinstance(value, (tuple, list)):
        return type(value)(on_host(v) for v in value)
    if isinstance(value, dict):
        return {k: on_host(v) for k, v in value.items()}
    return value


def device_bytes(values: Any) -> int:
    """The bytes of the distinct storages under ``values`` that lie on a device other than the host."""
    seen: dict[tuple[torch.device, int], int] = {}
    for value in pytree.tree_leaves(values):
        if isinstance(value, torch.Tensor) and value.layout == torch.strided and off_host(value.device):
            storage = value.untyped_storage()
            seen[(value.device, storage.data_ptr())] = storage.nbytes()
    return sum(seen.values())


def move_to_host(node: fx.Node, need: int, *envs: dict[Any, Any]) -> None:
    """An fp64 run goes on on the host from ``node`` on (its device cannot take it, :func:`watch_op`
    said): the host is asked for the op's ``need`` and the values the run holds on the device (the
    watch stops the run where it cannot take them), then every value of ``envs`` moves there."""
    watch_op(node, need + device_bytes([list(env.values()) for env in envs]))
    for env in envs:
        for key, value in list(env.items()):
            env[key] = on_host(value)


def value_bytes(node: fx.Node, wide: bool) -> int:
    """The bytes of ``node``'s value as the graph recorded it (floating values in fp64 where
    ``wide``); a size only known at run time (symbolic) counts 0."""
    total = 0
    for value in pytree.tree_leaves(node.meta.get("val", node.meta.get("example_value"))):
        numel = value.numel() if isinstance(value, torch.Tensor) else None
        if isinstance(numel, int):  # not a symbolic size (reading one would add a guard)
            total += numel * (8 if wide and value.dtype in _FLOATING else value.element_size())
    return total


def widened_bytes(read: Sequence[Any]) -> int:
    """The bytes of the fp64 copies an op makes of what it reads (the floating tensors not fp64 already)."""
    return sum(value.numel() * 8 for value in pytree.tree_leaves(list(read))
               if isinstance(value, torch.Tensor) and value.dtype in _FLOATING)


def clone_value(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return faithful_copy(value.detach())
    if isinstance(value, (tuple, list)):
        return type(value)(clone_value(v) for v in value)
    return value


# A strided view is copied with its layout while the storage span it covers is at most this many
# times its elements; a wider span (one column of a large matrix) is copied dense instead.
SPAN_LIMIT = 4


def faithful_copy(tensor: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """A copy of ``tensor`` (cast to ``dtype``) with its sizes and strides.

    ``clone()`` and ``to()`` keep the strides of a dense tensor but lay out an expanded or padded
    view afresh, and some kernels check their inputs' strides: memory-efficient attention refuses
    a bias whose row stride is not a multiple of 4 (an expanded, padded mask on CUDA). A value
    recorded from an eager run and fed again must be laid out as the op first saw it, so such a
    view is copied as the storage span it covers and viewed with its own strides."""
    dtype = dtype or tensor.dtype
    if _dense_as_is(tensor) or _laid_out_afresh(tensor):
        return tensor.clone() if dtype == tensor.dtype else tensor.to(dtype)
    span = _span(tensor)
    if span == tensor.numel():  # no gaps: a dense (permuted) tensor, whose strides clone() keeps
        dense = tensor.clone() if dtype == tensor.dtype else tensor.to(dtype)
        if dense.stride() == tensor.stride():
            return dense
    covered = torch.as_strided(tensor, (span,), (1,), tensor.storage_offset()).to(dtype, copy=True)
    return torch.as_strided(covered, tensor.shape, tensor.stride(), 0)


def copy_keeps_layout(tensor: torch.Tensor) -> bool:
    """Whether :func:`faithful_copy` gives ``tensor``'s own sizes and strides (a dense tensor,
    permuted or not; an expanded or strided view within :data:`SPAN_LIMIT`), without copying: a
    compile made on such a copy accepts the tensor itself. False where it lays the copy out afresh
    (:func:`_laid_out_afresh`: one column of a large matrix, a slice of a sequence)."""
    return _dense_as_is(tensor) or not _laid_out_afresh(tensor)


def _dense_as_is(tensor: torch.Tensor) -> bool:
    """A tensor ``clone()`` copies as it is laid out: not strided, contiguous or empty."""
    return tensor.layout != torch.strided or tensor.is_contiguous() or tensor.numel() == 0


def _laid_out_afresh(tensor: torch.Tensor) -> bool:
    """A strided view :func:`faithful_copy` copies densely rather than with its own strides: one with
    negative strides, or spanning more than :data:`SPAN_LIMIT` times its elements."""
    return any(s < 0 for s in tensor.stride()) or _span(tensor) > SPAN_LIMIT * tensor.numel()


def _span(tensor: torch.Tensor) -> int:
    """The storage entries a strided tensor's elements lie across, first to last."""
    return 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))


def fresh_inputs(values: Any) -> Any:
    """A private copy of a model's arguments (any nesting): every tensor cloned, keeping whether it
    requires grad, so a model that writes to its inputs changes nobody else's."""
    def copy(tensor: torch.Tensor) -> torch.Tensor:
        cloned = tensor.detach().clone()
        cloned = cloned.requires_grad_() if tensor.requires_grad and cloned.is_floating_point() else cloned
        # Dynamo's marks (torch._dynamo.mark_dynamic, mark_static, ...) are attributes of the
        # tensor object: the copy keeps them, so it compiles with the dynamism the user asked for.
        for name, mark in getattr(tensor, "__dict__", {}).items():
            if name.startswith("_dynamo_"):
                setattr(cloned, name, mark.copy() if isinstance(mark, (set, dict, list)) else mark)
        return cloned

    return pytree.tree_map_only(torch.Tensor, copy, values)


def mutates(graph_module: fx.GraphModule) -> bool:
    """Whether running the graph may write a tensor in place: an op whose schema is mutable, or one
    we cannot read a schema from (a higher-order op, a method or module call). A graph that does
    not has every value computed once and never changed after, so its values are kept by
    reference; one that does has every value copied as it is produced (a later write must not
    change what was recorded)."""
    for node in graph_module.graph.nodes:
        if node.op in ("call_method", "call_module"):
            return True
        if node.op != "call_function" or node.target is operator.getitem:
            continue
        schema = getattr(node.target, "_schema", None)
        if not isinstance(node.target, torch._ops.OpOverload) or schema is None or schema.is_mutable:
            return True
    return False


class _EagerInterpreter(fx.Interpreter):
    """Runs a graph node by node (``upcast``: every floating op in fp64; ``overrides``: named
    nodes' values replaced as they are produced)."""

    def __init__(self, graph_module: fx.GraphModule, upcast: bool, overrides: dict[str, Any],
                 garbage_collect_values: bool):
        super().__init__(graph_module, garbage_collect_values=garbage_collect_values)
        self.upcast = upcast
        self.overrides = overrides
        # an fp64 run whose device could not take an op goes on on the host from that op on (the
        # tool's watch decides, :func:`watch_op`): its values move there, and every value it reads
        # after, and a factory op's device is the host's. An eager run never moves.
        self.host = False

    def widen(self, node: fx.Node) -> bool:
        """Whether an input is made fp64 as it is read (else each op widens its arguments itself)."""
        return True

    def run_node(self, node: fx.Node) -> Any:
        if node.op == "placeholder":  # always consume the positional input, even when overridden
            result = super().run_node(node)
            wide = to_fp64(result) if self.upcast and self.widen(node) else result
            return self._placed(self.overrides.get(node.name, wide))
        if node.name in self.overrides:
            return self._placed(self.overrides[node.name])
        if node.op == "call_function" and _WATCH.get() is not None:
            need = self._need(node)
            device = recorded_device(node) if self.upcast and not self.host else None
            if watch_op(node, need, device):
                move_to_host(node, need, self.env)
                self.host = True
        if self.upcast and node.op == "call_function":
            return self._run_fp64(node)
        return self._placed(super().run_node(node))

    def _need(self, node: fx.Node) -> int:
        """About the bytes ``node``'s op adds: its value, and where the run widens, the fp64 copies of what it reads."""
        read = [self.env.get(source) for source in node.all_input_nodes] if self.upcast else []
        return value_bytes(node, self.upcast) + widened_bytes(read)

    def _placed(self, value: Any) -> Any:
        """``value`` where the run is: on the host once it moved there."""
        return on_host(value) if self.host else value

    @staticmethod
    def _target(node: fx.Node) -> Callable[..., Any]:
        assert callable(node.target), node.format_node()  # call_function nodes only
        return node.target

    def _run_fp64(self, node: fx.Node) -> Any:
        args, kwargs = self.fetch_args_kwargs_from_env(node)
        promoted = self._reduced(node)
        if _fills(node.target) or (promoted is not None and unsettled_scalars(node.target, args, kwargs, promoted)):
            # as eager sees it (a factory's fill value: as its dtype stores it)
            model_args = fx.node.map_arg(node.args, self._in_model_dtype)
            model_kwargs = fx.node.map_arg(node.kwargs, self._in_model_dtype)
            args, kwargs = scalars_as_eager(node.target, model_args, model_kwargs, args, kwargs)
        args, kwargs = self._placed(args), self._placed(kwargs)
        try:  # a factory on the default dtype (``aten.ones`` without ``dtype``) widened too
            return to_fp64(self._target(node)(*to_fp64(args), **_fp64_kwargs(to_fp64(kwargs))))
        except Exception as error:  # an op without an fp64 kernel: its eager result stands in
            if host_after_failure(node, lambda: self._need(node), None if self.host else recorded_device(node),
                                  error, self.env):
                del args, kwargs, error  # the device's copies go
                self.host = True
                return self._run_fp64(node)  # the op again, on the host
            stop_if_out_of_memory(error, "in an op of the fp64 reference run")
            log.debug("fp64 failed for %s: %s", node.name, error)
            args = self._placed(fx.node.map_arg(node.args, self._in_model_dtype))
            kwargs = self._placed(fx.node.map_arg(node.kwargs, self._in_model_dtype))
            return to_fp64(self._target(node)(*args, **kwargs))

    @staticmethod
    def _reduced(node: fx.Node) -> torch.dtype | None:
        """The dtype ``node``'s recorded float inputs promote to, when fp16/bf16 (where eager may
        round a Python scalar)."""
        return _reduced_promotion([source.meta.get("val", source.meta.get("example_value"))
                                   for source in node.all_input_nodes])

    def _in_model_dtype(self, source: fx.Node) -> Any:
        """An input's fp64 value cast back to the dtype the graph recorded for it."""
        value = self.env[source]
        recorded = source.meta.get("val", source.meta.get("example_value"))
        if not isinstance(value, torch.Tensor) or value.dtype != torch.float64:
            return value
        # No record (a hand-built graph): float32, the dtype every floating kernel has.
        return faithful_copy(value, recorded.dtype if isinstance(recorded, torch.Tensor) else torch.float32)


class _RecordingInterpreter(_EagerInterpreter):
    """Keeps every node's value (detached): copied where the graph writes in place, else by reference."""

    def __init__(self, graph_module: fx.GraphModule, upcast: bool, overrides: dict[str, Any]):
        super().__init__(graph_module, upcast, overrides, garbage_collect_values=False)
        self.copy = mutates(graph_module)
        self.values: dict[str, Any] = {}

    def run_node(self, node: fx.Node) -> Any:
        result = super().run_node(node)
        self.values[node.name] = clone_value(result) if self.copy else detached(result)
        return result


class _StreamingInterpreter(_EagerInterpreter):
    """Hands each output value to ``sink`` as it is produced and frees every value after its last
    use (an output after its last use by another node): the live set, never every value at once.
    ``sink`` gets a value once the inputs its node read last are freed (before the next node
    runs): what judges it holds the value beside the live set after that node, not before it (an
    embedding's fp64 gradient judged without the two halves it was summed from)."""

    def __init__(self, graph_module: fx.GraphModule, upcast: bool, overrides: dict[str, Any],
                 sink: Callable[[fx.Node, Any], None]):
        super().__init__(graph_module, upcast, overrides, garbage_collect_values=True)
        self.sink = sink
        self.pending: tuple[fx.Node, Any] | None = None
        output = next(n for n in reversed(self.graph.nodes) if n.op == "output")
        self.outputs = set(output._input_nodes)
        self.user_to_last_uses.pop(output, None)
        order = {node: index for index, node in enumerate(self.graph.nodes)}
        for value in self.outputs:  # freed after its last use other than the output, or at once
            users = [user for user in value.users if user is not output]
            last = max(users, key=order.__getitem__) if users else value
            self.user_to_last_uses.setdefault(last, []).append(value)

    def widen(self, node: fx.Node) -> bool:
        # Only an input returned as an output: every op widens its own arguments as it runs, so no
        # fp64 copy of every input is held from the start of the run (inputs come first).
        return node in self.outputs

    def run_node(self, node: fx.Node) -> Any:
        # fx's loop frees the values ``node``'s predecessor read last after it ran: its value is
        # handed on now, in graph order as before
        if self.pending is not None:
            produced, self.pending = self.pending, None
            self.sink(*produced)
        if node.op == "output":
            return None
        result = super().run_node(node)
        if node in self.outputs:
            self.pending = (node, result)
        return result


class _KeepingInterpreter(_EagerInterpreter):
    """Hands the named nodes' values (detached) to ``sink`` as they are produced (by default keeps
    them in ``values``) and frees every value after its last use."""

    def __init__(self, graph_module: fx.GraphModule, upcast: bool, overrides: dict[str, Any], names: set[str],
                 sink: Callable[[str, Any], None] | None = None):
        super().__init__(graph_module, upcast, overrides, garbage_collect_values=True)
        self.names = names
        self.values: dict[str, Any] = {}
        self.sink = sink if sink is not None else self.values.__setitem__

    def run_node(self, node: fx.Node) -> Any:
        result = super().run_node(node)
        if node.name in self.names:
            self.sink(node.name, detached(result))
        return result


def detached(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, (tuple, list)):
        return type(value)(detached(v) for v in value)
    return value


def to_fp64(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.dtype in _FLOATING:
        return faithful_copy(value.detach(), torch.float64)
    if isinstance(value, (tuple, list)):
        return type(value)(to_fp64(v) for v in value)
    if isinstance(value, dict):
        return {k: to_fp64(v) for k, v in value.items()}
    return value


_REDUCED = (torch.float16, torch.bfloat16)
_IN_PLACE = {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv, operator.imod,
             operator.ipow, operator.imatmul, operator.iand, operator.ior, operator.ixor}


_KEEPS_WIDE: set[tuple[str, int | str, float, torch.dtype]] = set()


def scalar_arguments(target: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> list[tuple[int | str, float]]:
    """The Python numbers an op reads as a ``Scalar`` (an aten op's ``number`` arguments: a
    remainder's divisor, an add's ``alpha``, a clamp's bound, or a wrapped-number ``Tensor``:
    ``mul.Tensor(x, 0.1)``), by position or keyword; for a torch-level function (a Dynamo graph's
    ``torch.remainder``, ``operator.mul``: no schema), every Python float it is given."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        keyed: list[tuple[int | str, Any]] = [*enumerate(args), *kwargs.items()]
        return [(key, value) for key, value in keyed if type(value) is float]
    found: list[tuple[int | str, float]] = []
    for index, argument in enumerate(schema.arguments):
        kind = argument.type
        if isinstance(kind, torch.OptionalType):
            kind = kind.getElementType()
        if not isinstance(kind, (torch.NumberType, torch.TensorType)):  # a number as a Tensor: wrapped
            continue
        key: int | str = argument.name if argument.kwarg_only or index >= len(args) else index
        value = kwargs.get(key) if isinstance(key, str) else args[key]
        if isinstance(value, (float, int)) and not isinstance(value, bool):
            found.append((key, value))
    return found


# Ops whose result jumps with their scalar (a remainder's or a floor division's by O(1)), where a
# scalar rounded as eager rounds it is the program's meaning. In a continuous op (``1.7 - x`` in bf16)
# eager's rounding of the scalar moves the result by rounding noise of the op's own dtype, and a
# compiled kernel keeping it wide is judged against the scalar as written (the corpus's bf16 hinge
# cases: compiled closer to fp64, listed with the gradient it flips, as pytorch#185517 reads).
_JUMPS_WITH_SCALAR = frozenset({"remainder", "fmod", "floor_divide", "mod", "floordiv"})


def _reduced_promotion(values: Sequence[Any]) -> torch.dtype | None:
    """The dtype the floating tensors among ``values`` promote to, when fp16/bf16 (where eager may
    round a Python scalar), else None."""
    dtypes = [v.dtype for v in values if isinstance(v, torch.Tensor) and v.is_floating_point()]
    if not dtypes:
        return None
    promoted = dtypes[0]
    for dtype in dtypes[1:]:
        promoted = torch.promote_types(promoted, dtype)
    return promoted if promoted in _REDUCED else None


def _jumps_with_scalar(target: Any) -> bool:
    return _base_name(target) in _JUMPS_WITH_SCALAR


def _base_name(target: Any) -> str:
    return str(getattr(target, "__name__", target)).split(".")[0]


# Factories and fills: the value they store is the Python scalar rounded to their dtype, whatever
# op reads it next (eager's ``torch.full(..., 3.14, dtype=fp16)`` holds 3.140625); the fp64 run fills
# with that stored value, as it reads an fp16 input's values.
_FILLS = frozenset({"full", "full_like", "new_full", "scalar_tensor", "fill", "fill_"})
_FILLS_LIKE = frozenset({"full_like", "new_full", "fill", "fill_"})  # stored in their tensor argument's dtype


def _fills(target: Any) -> bool:
    return _base_name(target) in _FILLS


def _stored_dtype(target: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> torch.dtype | None:
    """The dtype a factory or fill stores its value in: its ``dtype`` argument, else (``full_like``,
    ``new_full``, ``fill``) its tensor argument's."""
    dtype = kwargs.get("dtype")
    if dtype is None and _base_name(target) in _FILLS_LIKE:
        dtype = next((v.dtype for v in args if isinstance(v, torch.Tensor)), None)
    return dtype if isinstance(dtype, torch.dtype) else None


def unsettled_scalars(target: Any, args: Sequence[Any], kwargs: dict[str, Any], promoted: torch.dtype) -> bool:
    """Whether a scalar of the op changes rounded to ``promoted`` and the op has not been seen to
    keep it wide (cheap: what saves an fp64 run the op's inputs in the model's dtype)."""
    return _jumps_with_scalar(target) and any(torch.tensor(value, dtype=torch.float64).to(promoted).item() != value
               and (str(target), key, value, promoted) not in _KEEPS_WIDE
               for key, value in scalar_arguments(target, args, kwargs))


def jumps_with_a_rounded_scalar(node: fx.Node) -> bool:
    """Whether ``node`` is an op whose result jumps with a Python scalar (:func:`_jumps_with_scalar`)
    that its fp16/bf16 inputs' dtype rounds (:func:`unsettled_scalars`, from the recorded values,
    torch-level ``torch.remainder`` too): a value with one right answer, eager's (pytorch#183083)."""
    if node.op == "call_method":
        target: Any = getattr(torch.Tensor, str(node.target), None)
    else:
        target = node.target
    if target is None or not _jumps_with_scalar(target) or _writes_or_draws(target):
        return False
    promoted = _EagerInterpreter._reduced(node)
    return promoted is not None and unsettled_scalars(target, node.args, dict(node.kwargs), promoted)


def _writes_or_draws(target: Any) -> bool:
    """Asking the op again would write its input (in place) or draw from a generator."""
    schema = getattr(target, "_schema", None)
    if schema is not None:
        return schema.is_mutable or torch.Tag.nondeterministic_seeded in getattr(target, "tags", ())
    return target in _IN_PLACE or getattr(target, "__name__", "").endswith("_")


def scalars_as_eager(target: Any, model_args: Sequence[Any], model_kwargs: dict[str, Any],
                     args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args``/``kwargs`` (an fp64 run's) with each Python scalar as eager's op sees it. Type
    promotion makes ``remainder(fp16, 3.14)`` an fp16 op: TensorIterator rounds the wrapped scalar
    to fp16 (3.140625) where an fp64 run would keep 3.14 and side with a compiled kernel that kept
    it too (pytorch#183083). Some kernels keep a scalar in their compute type instead (CPU ``mul``
    on fp16), so it is asked of the op itself, run on ``model_args`` (the inputs in the model's
    dtypes): where rounding the scalar to the promoted dtype changes none of its results (NaN as
    NaN; a random op's draws differ, so it never does), eager rounds it (or cannot tell), and the
    fp64 run gets the rounded scalar. Only fp16/bf16 ops: an fp32 op's scalar is rounded at 2**-24.
    A factory or fill (``full``, ``full_like``, ``fill_``) stores its value in its dtype: an fp16/bf16
    one's scalar is always rounded, no probe asked."""
    args, kwargs = tuple(args), dict(kwargs)
    if _fills(target):
        stored = _stored_dtype(target, model_args, model_kwargs)
        if stored not in _REDUCED:
            return args, kwargs
        for key, value in scalar_arguments(target, args, kwargs):
            rounded = torch.tensor(value, dtype=torch.float64).to(stored).item()
            if isinstance(key, str):
                kwargs[key] = rounded
            else:
                args = (*args[:key], rounded, *args[key + 1:])
        return args, kwargs
    if not _jumps_with_scalar(target):
        return args, kwargs
    promoted = _reduced_promotion([*model_args, *model_kwargs.values()])
    if promoted is None or _writes_or_draws(target):
        return args, kwargs
    for key, value in scalar_arguments(target, model_args, model_kwargs):
        rounded = torch.tensor(value, dtype=torch.float64).to(promoted).item()
        if rounded == value:
            continue
        # An op seen to keep this scalar wide (a difference is no coincidence) is not asked again.
        seen = (str(target), key, value, promoted)
        if seen in _KEEPS_WIDE:
            continue
        if not _insensitive(target, model_args, model_kwargs, key, rounded):
            _KEEPS_WIDE.add(seen)
            continue
        if isinstance(key, str):
            kwargs[key] = rounded
        else:
            args = (*args[:key], rounded, *args[key + 1:])
    return args, kwargs


def _insensitive(target: Any, args: Sequence[Any], kwargs: dict[str, Any], key: int | str, rounded: float) -> bool:
    """Whether the op's eager results stay bit for bit the same with the scalar at ``key`` rounded."""
    changed_args = tuple(rounded if i == key else v for i, v in enumerate(args))
    changed_kwargs = {k: rounded if k == key else v for k, v in kwargs.items()}
    devices = sorted({v.device.index or 0 for v in args if isinstance(v, torch.Tensor) and v.device.type == "cuda"})
    try:
        with torch.random.fork_rng(devices=devices):  # a random function's draws: the program's state kept
            as_given = target(*args, **kwargs)
            as_rounded = target(*changed_args, **changed_kwargs)
    except Exception as error:  # noqa: BLE001 - cannot ask the op: the scalar stays as written
        stop_if_out_of_memory(error, "probing an op's scalar")
        log.debug("scalar probe failed for %s: %s", target, error)
        return False
    if not isinstance(as_given, torch.Tensor) or not isinstance(as_rounded, torch.Tensor):
        return False
    if as_given.shape != as_rounded.shape or as_given.dtype != as_rounded.dtype:
        return False
    same = as_given == as_rounded
    if as_given.is_floating_point():
        same |= as_given.isnan() & as_rounded.isnan()
    return bool(same.all())


def _fp64_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    if kwargs.get("dtype") in _FLOATING:
        return {**kwargs, "dtype": torch.float64}
    return kwargs


def interpret(
    graph_module: fx.GraphModule,
    inputs: Sequence[Any],
    *,
    upcast: bool = False,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every node's value, running eagerly (``upcast``: every floating op in fp64).

    ``overrides`` replaces named nodes' values as they are produced (a replay that injects one
    node's compiled output).
    """
    interpreter = _RecordingInterpreter(graph_module, upcast, overrides or {})
    with torch.no_grad():
        interpreter.run(*inputs)
    return interpreter.values


def values_of(graph_module: fx.GraphModule, inputs: Sequence[Any], names: Sequence[str], *,
              upcast: bool = False) -> dict[str, Any]:
    """The named nodes' values, running eagerly (``upcast``: every floating op in fp64): the same
    values :func:`interpret` records, but only those and the run's live set are held (a graph that
    writes in place: every value, copied as produced, then the named ones kept)."""
    if mutates(graph_module):
        values = interpret(graph_module, inputs, upcast=upcast)
        return {name: values[name] for name in names if name in values}
    interpreter = _KeepingInterpreter(graph_module, upcast, {}, set(names))
    with torch.no_grad():
        interpreter.run(*inputs)
    return interpreter.values


def watch_graph(graph_module: fx.GraphModule, inputs: Sequence[Any], names: Sequence[str], *,
                sink: Callable[[str, Any], None], overrides: dict[str, Any] | None = None) -> None:
    """Run the graph eagerly, handing each named node's value (by name, detached) to ``sink`` as it
    is produced; every value is freed after its last use, so the caller holds what ``sink`` keeps
    and the run's live set. For a graph that does not write in place (:func:`mutates`) only."""
    interpreter = _KeepingInterpreter(graph_module, False, overrides or {}, set(names), sink)
    with torch.no_grad():
        interpreter.run(*inputs)


def run_graph(graph_module: fx.GraphModule, inputs: Sequence[Any], *, upcast: bool = False,
              overrides: dict[str, Any] | None = None) -> list[Any]:
    """A graph's outputs, eagerly; ``upcast`` runs every floating op in fp64. Only the live set is
    held while it runs (a graph that writes in place: every value, copied as produced)."""
    output_node = next(n for n in reversed(graph_module.graph.nodes) if n.op == "output")
    if mutates(graph_module):
        values = interpret(graph_module, inputs, upcast=upcast, overrides=overrides)
        outputs = fx.node.map_arg(output_node.args[0], lambda n: values[n.name])
    else:
        produced: dict[str, Any] = {}
        stream_graph(graph_module, inputs, upcast=upcast, overrides=overrides,
                     sink=lambda node, value: produced.__setitem__(node.name, detached(value)))
        outputs = fx.node.map_arg(output_node.args[0], lambda n: produced[n.name])
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def stream_graph(graph_module: fx.GraphModule, inputs: Sequence[Any], *, sink: Callable[[fx.Node, Any], None],
                 upcast: bool = False, overrides: dict[str, Any] | None = None) -> None:
    """Run the graph eagerly, handing each output node's value to ``sink`` as it is produced; every
    value is freed after its last use, so the caller holds what it keeps and nothing else. For a
    graph that does not write in place (:func:`mutates`) only."""
    interpreter = _StreamingInterpreter(graph_module, upcast, overrides or {}, sink)
    with torch.no_grad():
        interpreter.run(*inputs)


def heap_checked(environ: "dict[str, str]") -> "dict[str, str]":
    """``environ`` for a child process whose native crash is the question (the tool's isolated
    candidates, a crash repro's compile): under glibc's heap checker where the C library has one
    (``libc_malloc_debug``, ``MALLOC_CHECK_=3``). A kernel's out-of-bounds store aborts the process
    only where the heap's layout puts a chunk header in its way, which varies run to run
    (pytorch#196681's tail store: 1 plain run of 2 aborted, the other returned wrong values); the
    checker marks every chunk's end and aborts at its free, so the same store aborts every time
    (3 runs of 3). Elsewhere (no glibc, no checker) ``environ`` as it is."""
    import ctypes.util

    library = ctypes.util.find_library("c_malloc_debug")
    if not library:
        return dict(environ)
    preload = " ".join(part for part in (environ.get("LD_PRELOAD", ""), library) if part)
    return {**environ, "LD_PRELOAD": preload, "MALLOC_CHECK_": "3"}
