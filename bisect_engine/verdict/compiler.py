"""The one Inductor entry point of the engine: every compile it makes goes through here.
 Compiles go through
``torch._inductor.compile_fx.compile_fx`` (the entry point ``torch.compile(backend="inductor")``
uses, so decompositions, joint-graph and post-grad passes all run) with a counting
``inner_compile`` argument: no monkey-patching.
"""
from __future__ import annotations

import copy
import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence, cast

import torch
import torch.fx as fx
import torch._functorch.config as functorch_config
import torch.utils._pytree as pytree

from ..search import Budget, stop_if_out_of_memory
from .inductor_adapter import aoti_load_package, forced_fallbacks, output_code_of, provenance_patch
from .compare import integer_bits
from .fx_eval import clone_value, copy_keeps_layout
from .graphs import ReadOnlyInputWritten
from .frozen import frozen_copy, graph_constants_kept, kept_inputs
from .kernels import OutputCode
from .shapes import (ShapeMismatch, data_dependent, fake_inputs, forget_unbacked_bindings, shape_signature,
                     static_signature)

log = logging.getLogger(__name__)

# Every compile here is a fresh one: the FX-graph and AOT-autograd caches key on graphs and
# config, not on the decomposition table or forced fallbacks a candidate changes, so a cached
# artifact could answer for a different candidate. (The C++ code cache stays: it keys on source.)
NO_GRAPH_CACHES = {"fx_graph_cache": False, "fx_graph_remote_cache": False}


REUSED_KEPT = 8  # compiled graphs kept for reuse (:attr:`Compiler.reused`), the most recently used


class _Input:
    """A node's place among the graph's nodes, as a key writes it (its name left out)."""

    def __init__(self, position: int) -> None:
        self.position = position

    def __repr__(self) -> str:
        return f"%{self.position}"


def _holds_tensor(value: Any) -> bool:
    return any(isinstance(leaf, torch.Tensor) for leaf in pytree.tree_leaves(value))


def reuse_key(graph_module: fx.GraphModule, inputs: Sequence[Any], shapes: str, config_patches: Any,
              decompositions: Any, fallbacks: Sequence[Any], aten_graph: bool) -> str | None:
    """What a compile of ``graph_module`` on ``inputs`` depends on, without the names of its nodes:
    each node's op, target and arguments by position; each input's type, sizes, strides, dtype,
    device, ``requires_grad`` and which inputs share a storage; the symbolic sizes it is compiled
    with (``shapes``); the candidate's switch (config patches, decompositions, forced fallbacks);
    Inductor's and AOT Autograd's config, the grad mode, and torch's matmul precision, TF32, default
    dtype and deterministic switches, as they are now. Two graphs with one key
    compile to the same code (a stack's identical blocks, segment after segment). None (never
    reused): a graph that reads attributes (constants, submodules) or holds a tensor in its
    arguments, whose values the key cannot see."""
    lines = _graph_lines(graph_module.graph.nodes, {})
    if lines is None:
        return None
    storages: dict[int, int] = {}
    for index, value in enumerate(inputs):
        if isinstance(value, torch.Tensor):
            try:
                shared = storages.setdefault(value.untyped_storage().data_ptr(), index)
            except (RuntimeError, NotImplementedError):  # no plain storage (fake, nested): nothing to reuse
                return None
            lines.append(f"input {type(value).__name__} {tuple(value.shape)} {value.stride()} "
                         f"{value.storage_offset()} {value.dtype} {value.device} {value.requires_grad} {shared}")
        else:
            lines.append(f"input {type(value).__name__} {value!r}")
    signature = shape_signature(graph_module) if shapes == "as_captured" else None
    lines += [f"shapes {shapes} {signature!r}", f"aten {aten_graph} grad {torch.is_grad_enabled()}",
              f"patches {sorted((config_patches or {}).items())!r}", *_context_lines(decompositions, fallbacks)]
    return "\n".join(lines)


def _graph_lines(nodes: Iterable[fx.Node], position: dict[fx.Node, _Input]) -> list[str] | None:
    """Each node's op, target and arguments, the nodes it reads by their place (``position``: the
    inputs already placed, skipped; every other node takes the next place). None: a node reads an
    attribute or holds a tensor in its arguments, values a key cannot see."""
    lines = []
    for node in nodes:
        if node in position:
            continue
        if node.op in ("get_attr", "call_module") or _holds_tensor((node.args, node.kwargs)):
            return None
        position[node] = _Input(len(position))
        arguments = fx.node.map_arg((node.args, node.kwargs), lambda n: position[n])
        lines.append(f"{node.op} {'' if node.op == 'placeholder' else node.target} {arguments!r}")
    return lines


def _context_lines(decompositions: Any, fallbacks: Sequence[Any], skipped: tuple[str, ...] = ()) -> list[str]:
    """What a compile reads beside its graph, as it is now: torch's own switches (a program may flip
    them between two compiles), the candidate's decompositions and forced fallbacks, Inductor's config
    (less the keys starting with ``skipped``) and AOT Autograd's."""
    import torch._inductor.config as inductor_config  # loaded by the compile about to happen anyway

    inductor = [(k, v) for k, v in inductor_config.get_config_copy().items() if not (skipped and k.startswith(skipped))]
    return [f"torch {torch.get_float32_matmul_precision()} {torch.backends.cuda.matmul.allow_tf32} "
            f"{torch.backends.cudnn.allow_tf32} {torch.get_default_dtype()} {torch.are_deterministic_algorithms_enabled()}",
            f"decompositions {sorted((str(op), id(f)) for op, f in (decompositions or {}).items())!r}",
            f"fallbacks {sorted(map(str, fallbacks))!r}",
            f"inductor {sorted(inductor, key=lambda kv: kv[0])!r}",
            f"functorch {sorted(functorch_config.get_config_copy().items(), key=lambda kv: kv[0])!r}"]


# Inductor config read only before AOT Autograd traces (the torch-level graph's passes): an inner compile's
# graph already holds what they did, so they are not part of what its code depends on.
PRE_AOT_CONFIG = ("use_pre_grad_passes", "pre_grad_")


def inner_reuse_key(graph_module: fx.GraphModule, inputs: Sequence[Any], options: dict[str, Any],
                    decompositions: Any, fallbacks: Sequence[Any]) -> tuple[str, tuple[int, ...]] | None:
    """What an inner compile (``compile_fx_inner``: the graph AOT Autograd traced, decomposed) depends
    on, without node names and without the order of its inputs: the graph with each input named by
    where it is first read, the inputs' layouts and shared storages in that order, the compile's
    options (``is_inference``, ``is_backward``, static inputs, cudagraphs), the candidate's
    decompositions and forced fallbacks, Inductor's config less what runs before AOT Autograd, AOT
    Autograd's config and torch's switches; with that order (``order[j]``: the position of the j-th
    input so read). The model-level check's compile of an inference graph is, after AOT Autograd, the
    graph our whole-graph compile compiled with its inputs in another order (parameters before or
    after the data): its code answers, called with the inputs in its order. None (never reused): symbolic
    sizes, attributes or tensors in arguments, an input that is not a tensor, or CUDA graphs."""
    nodes = list(graph_module.graph.nodes)
    placeholders = [node for node in nodes if node.op == "placeholder"]
    if len(placeholders) != len(inputs) or not all(isinstance(v, torch.Tensor) for v in inputs):
        return None
    if any(isinstance(d, torch.SymInt) for v in inputs for d in (*v.shape, *v.stride())):
        return None
    # each input by the first node that reads it and where among that node's arguments (unread: last, as given)
    first_read = {node: (len(nodes) + index, 0) for index, node in enumerate(placeholders)}
    for index, node in enumerate(nodes):
        for place, used in enumerate(node.all_input_nodes):
            if used.op == "placeholder" and first_read[used][0] >= len(nodes):
                first_read[used] = (index, place)
    order = tuple(sorted(range(len(placeholders)), key=lambda i: first_read[placeholders[i]]))
    lines = _graph_lines(nodes, {placeholders[i]: _Input(j) for j, i in enumerate(order)})
    if lines is None:
        return None
    from torch.multiprocessing.reductions import StorageWeakRef

    storages: dict[Any, int] = {}
    for j, i in enumerate(order):
        value = inputs[i]
        shared = storages.setdefault(StorageWeakRef(value.untyped_storage()), j)
        lines.append(f"input {type(value).__name__} {tuple(value.shape)} {value.stride()} {value.storage_offset()} "
                     f"{value.dtype} {value.device} {value.requires_grad} {shared}")
    canonical = {i: j for j, i in enumerate(order)}
    static = sorted(canonical[i] for i in options.get("static_input_idxs") or ())
    boxed = {name: getattr(options.get(name), "value", options.get(name))
             for name in ("cudagraphs", "boxed_forward_device_index")}
    if boxed["cudagraphs"]:  # a CUDA graph holds its static inputs' addresses: its code is one caller's alone
        return None
    # (no grad mode: Inductor reads it only before AOT Autograd, in pre-grad passes and the choice to
    # freeze, torch 2.13; a frozen graph's constants are attributes, never reused)
    lines += [f"options inference {options.get('is_inference')} backward {options.get('is_backward')} static {static} "
              f"{boxed!r} region {options.get('compile_region_name')!r} "
              f"decomposition table {getattr(options.get('get_decomp_fn'), '__qualname__', None)}",
              *_context_lines(decompositions, fallbacks, skipped=PRE_AOT_CONFIG)]
    return "\n".join(lines), order


def _inner_key_or_none(graph: fx.GraphModule, inputs: Sequence[Any], options: dict[str, Any], decompositions: Any,
                       fallbacks: Sequence[Any]) -> tuple[str, tuple[int, ...]] | None:
    """:func:`inner_reuse_key`, or None where it cannot be made (an input whose storage cannot be named,
    say): the graph is then compiled, never failed for a key."""
    try:
        return inner_reuse_key(graph, inputs, options, decompositions, fallbacks)
    except Exception as error:  # noqa: BLE001 - no reuse, nothing else
        stop_if_out_of_memory(error, "keying an inner compile")
        log.debug("no reuse key for an inner compile: %s: %s", type(error).__name__, error)
        return None


def _keep(kept: OrderedDict[str, Any], key: str, value: Any) -> None:
    """``value`` kept under ``key``, the least recently used let go past :data:`REUSED_KEPT`."""
    kept[key] = value
    while len(kept) > REUSED_KEPT:
        kept.popitem(last=False)


class _InOtherOrder:
    """An inner compile's code called with the inputs of an identical graph whose inputs come in
    another order (boxed, as AOT Autograd calls it; every other attribute is the code's own)."""

    _boxed_call = True

    def __init__(self, compiled: Any, take: tuple[int, ...]) -> None:
        self._compiled, self._take = compiled, take

    def __call__(self, args: list[Any]) -> Any:
        moved = [args[i] for i in self._take]
        args.clear()  # boxed: the callee owns the inputs now
        return self._compiled(moved)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._compiled, name)


def hand_output_strides(inputs: Sequence[Any], compiled: Any) -> None:
    """What an inner compile hands its caller beside its code (``CompiledFxGraph.post_compile``): the
    strides of its outputs, through Dynamo's tracing context, where one asks (the model-level check's
    compile); the same outputs in the same order for a graph reused."""
    from torch._inductor.utils import set_tracing_context_output_strides

    context = torch._guards.TracingContext.try_get()
    if context is not None and context.output_strides is not None and not context.output_strides \
            and getattr(compiled, "output_strides", None) is not None:
        set_tracing_context_output_strides(inputs, compiled)


def in_order(compiled: Any, stored: tuple[int, ...], order: tuple[int, ...]) -> Any:
    """``compiled`` (whose j-th first-read input was its ``stored[j]``-th) called with inputs whose
    j-th first-read input is the ``order[j]``-th."""
    take = [0] * len(order)
    for s, o in zip(stored, order):
        take[s] = o
    return compiled if take == list(range(len(order))) else _InOtherOrder(compiled, tuple(take))


FUNCTORCH = "functorch."  # a switch's key for AOT Autograd's config (torch._functorch.config), not Inductor's


def split_patches(patches: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """A switch's config patch as (Inductor's keys, AOT Autograd's keys without their prefix)."""
    patches = patches or {}
    return ({k: v for k, v in patches.items() if not k.startswith(FUNCTORCH)},
            {k[len(FUNCTORCH):]: v for k, v in patches.items() if k.startswith(FUNCTORCH)})


@dataclass
class Compiler:
    """Compiles graphs with Inductor and counts every inner compile it triggers.

    ``config_patches`` and ``decompositions`` are passed to ``compile_fx`` as they are, so a
    candidate can be compiled with a subsystem disabled without touching global state. ``budget``
    is the run's, owned by the run's :class:`~bisect_engine.search.Search` (which also keeps the
    stage on it): the compiler only counts compiles and asks it before every one
    (:meth:`check_budget`), so no stage can spend past ``--max-compiles`` or ``--timeout``.
    """

    compiles: int = 0
    seconds: float = 0.0
    by_stage: dict[str, int] = field(default_factory=dict)
    budget: Budget = field(default_factory=Budget)
    symbolic_compiles: int = 0  # compiles of graphs with symbolic sizes, compiled symbolically
    static_fallbacks: list[str] = field(default_factory=list)  # why a symbolic graph compiled static
    # A graph compiled before under another graph's names (a segment of a stack of identical blocks
    # after the one before it): its compiled code answers again (:func:`reuse_key`), the last
    # :data:`REUSED_KEPT` only; ``reused``: the compiles so saved
    reused: int = 0
    _compiled: OrderedDict[str, Callable[..., Any]] = field(default_factory=OrderedDict, repr=False, compare=False)
    # the same for inner compiles (:func:`inner_reuse_key`), with the order their inputs were read in
    _inner: OrderedDict[str, tuple[Any, tuple[int, ...]]] = field(default_factory=OrderedDict, repr=False, compare=False)

    @property
    def stage(self) -> str:
        """The stage compiles are counted under: the run's search sets it (``Search.stage``)."""
        return self.budget.stage

    def _reuse(self, kept: OrderedDict[str, Any], key: str) -> Any:
        """What ``kept`` holds under ``key``, now its most recently used; one compile saved."""
        kept.move_to_end(key)
        self.reused += 1
        return kept[key]

    def check_budget(self) -> None:
        """Raise :class:`~bisect_engine.search.BudgetExhausted` when the run's budget has no room
        for one more compile."""
        self.budget.check(self.compiles)

    def count(self, compiles: int, label: str = "") -> None:
        """``compiles`` more, under the current stage (ours, a package's, or a worker's)."""
        self.compiles += compiles
        self.by_stage[self.stage] = self.by_stage.get(self.stage, 0) + compiles
        log.debug("compile %d (%s): %s", self.compiles, self.stage, label)

    def compile(
        self,
        graph_module: fx.GraphModule,
        example_inputs: Sequence[Any],
        *,
        label: str = "",
        config_patches: dict[str, Any] | None = None,
        decompositions: dict[Any, Callable[..., Any]] | None = None,
        fallbacks: Sequence[Any] = (),
        aten_graph: bool = True,
        output_code: list[OutputCode] | None = None,
        shapes: str = "as_captured",
        constants: Sequence[int] = (),
        constants_frozen: bool = True,
    ) -> Callable[..., Any]:
        """Compile with Inductor; ``fallbacks`` are ops forced to their aten kernels.

        ``aten_graph``: the graph is already past Dynamo and AOT tracing, so pre-grad passes
        (written for torch-level graphs) are off, as they are for the graph a real run lowers.
        ``output_code``: each inner compile's generated code is appended to it, with Inductor's
        provenance tracking on for this compile only (kept for the compiles that show a culprit).
        ``shapes``: "as_captured" compiles a graph whose placeholders carry symbolic sizes
        symbolically (the same dims symbolic, from a fresh ShapeEnv; the result runs at any size),
        "static" at the sizes of ``example_inputs``.
        ``constants``: the inputs the user's compile froze (see :mod:`~bisect_engine.verdict.frozen`):
        compiled as parameters holding the values in ``example_inputs``, under no_grad, so Inductor
        freezes them as it froze the user's; the callable returned still takes every input.
        ``constants_frozen=False``: they are the graph's own constants (tensors the compiled function
        made), compiled as plain attributes, which Inductor holds as constants without ``freezing``.
        """
        if constants and torch._guards.detect_fake_mode(list(example_inputs)) is None:  # real values to freeze
            return self._compile_frozen(graph_module, list(example_inputs), constants, constants_frozen, label=label,
                                        config_patches=config_patches, decompositions=decompositions,
                                        fallbacks=fallbacks, aten_graph=aten_graph, output_code=output_code,
                                        shapes=shapes)
        key = None if output_code is not None else reuse_key(graph_module, example_inputs, shapes, config_patches,
                                                                 decompositions, fallbacks, aten_graph)
        if key is not None and key in self._compiled:
            log.debug("compile of %s: the code of an identical graph compiled before answers", label)
            return self._reuse(self._compiled, key)
        self.check_budget()
        example_inputs_list = list(example_inputs)
        example = self._example(graph_module, example_inputs_list, shapes)
        inductor_patches, functorch_patches = split_patches(config_patches)
        # Imported here, not with the module: a run that compiles nothing (a script that never calls
        # torch.compile, a report written after one) never loads Inductor's lowerings (~4 CPU-seconds).
        from torch._inductor.compile_fx import compile_fx, compile_fx_inner

        patches = {**NO_GRAPH_CACHES, **({"use_pre_grad_passes": False} if aten_graph else {}),
                   **(provenance_patch() if output_code is not None else {}), **inductor_patches}

        def counting_inner_compile(graph: fx.GraphModule, inputs: Sequence[Any], **kwargs: Any) -> Any:
            inner = None if output_code is not None else _inner_key_or_none(graph, inputs, kwargs, decompositions, fallbacks)
            if inner is not None and inner[0] in self._inner:  # compiled before (the model-level check's graph)
                log.debug("inner compile of %s: the code of an identical graph compiled before answers", label)
                done, stored = self._reuse(self._inner, inner[0])
                hand_output_strides(inputs, done)
                return in_order(done, stored, inner[1])
            self.count(1, label)
            compiled = compile_fx_inner(graph, inputs, **kwargs)
            if output_code is not None:
                output_code.append(output_code_of(compiled))
            if inner is not None:
                _keep(self._inner, inner[0], (compiled, inner[1]))
            return compiled

        start = time.perf_counter()
        try:
            with forced_fallbacks(fallbacks), functorch_config.patch({**functorch_patches, "enable_autograd_cache": False}):
                copied = graph_constants_kept(copy.deepcopy(graph_module))
                compiled = compile_fx(
                    copied if example is example_inputs_list else forget_unbacked_bindings(copied),
                    example,
                    inner_compile=counting_inner_compile,
                    config_patches=patches or None,
                    decompositions=decompositions,
                )
        finally:
            self.seconds += time.perf_counter() - start
        if key is not None:
            _keep(self._compiled, key, compiled)
        return cast(Callable[..., Any], compiled)  # compile_fx returns the compiled callable here

    def package(self, exported: Any, folder: str, *, label: str = "",
                config_patches: dict[str, Any] | None = None) -> Callable[..., Any]:
        """An ``ExportedProgram`` as the user ships it: ``aoti_compile_and_package`` into ``folder``
        under ``config_patches``, then loaded (the package must be run before ``folder`` goes).
        Counted as one compile, within the budget."""
        from torch._inductor import aoti_compile_and_package

        self.check_budget()
        self.count(1, f"{label} (AOTInductor package)")
        inductor_patches, functorch_patches = split_patches(config_patches)
        start = time.perf_counter()
        try:
            with functorch_config.patch(functorch_patches):
                path = aoti_compile_and_package(exported, package_path=os.path.join(folder, "model.pt2"),
                                                inductor_configs={**NO_GRAPH_CACHES, **inductor_patches})
            return cast(Callable[..., Any], aoti_load_package(path))
        finally:
            self.seconds += time.perf_counter() - start

    def _compile_frozen(self, graph_module: fx.GraphModule, inputs: list[Any], constants: Sequence[int],
                        frozen: bool, **options: Any) -> Callable[..., Any]:
        kept = kept_inputs(len(inputs), constants)
        with torch.no_grad():  # Inductor freezes only a compile without grad, as Dynamo does
            compiled = self.compile(frozen_copy(graph_module, constants, inputs, parameters=frozen),
                                    [inputs[i] for i in kept], **options)

        def called(*args: Any) -> Any:
            return compiled(*[args[i] for i in kept])

        return called

    def _example(self, graph_module: fx.GraphModule, inputs: list[Any], shapes: str) -> list[Any]:
        signature = shape_signature(graph_module) if shapes == "as_captured" else None
        if any(isinstance(v, torch.SymInt) for v in inputs) or torch._guards.detect_fake_mode(inputs) is not None:
            return inputs  # already symbolic (a compile inside Dynamo: its own fake inputs)
        if signature is None:
            # Static sizes; a data-dependent op (nonzero, masked_select, .item()) still needs the
            # ShapeEnv Dynamo's fake inputs carry: without one, tracing it raises.
            return fake_inputs(static_signature(inputs), inputs) if data_dependent(graph_module) else inputs
        try:
            fakes = fake_inputs(signature, inputs)
        except ShapeMismatch as mismatch:  # said in the report: this compile judged static code
            self.static_fallbacks.append(str(mismatch))
            log.warning("compiling statically: the inputs do not fit the graph's symbolic shapes (%s)", mismatch)
            return inputs
        self.symbolic_compiles += 1
        return fakes


def run_compiled(compiled: Callable[..., Any], inputs: Sequence[Any], writes: bool = True,
                 views_held: bool = False) -> list[Any]:
    """One run of ``compiled`` on ``inputs``, copies of them where it may write them (``writes``:
    ``fx_eval.mutates`` of its graph, where the caller knows it; a per-node check's inputs are most
    of a graph's values; inputs handed uncopied are checked unchanged after it, else
    :class:`~bisect_engine.verdict.graphs.ReadOnlyInputWritten`), its outputs as values of their own: each is copied (``clone_value``)
    unless it is already one (:func:`_own_value`), one at a time, the compiled run's own let go as
    its copy is made (a graph that returns every node's value is held once at a time, not twice).
    ``views_held``: an output on the storage of an input handed uncopied (a view a whole graph that
    writes nothing returns of a parameter or a recorded value: a Linear's transposed weight the
    forward saves for its backward) is held as it is, as eager's value of it is, not copied."""
    # an input whose copy is laid out otherwise is copied even so: the per-node check compiles on
    # ``clone_value`` copies, whose layout a compiled node asserts (a BERT pooler's slice, a gapped view
    # the copy makes dense, handed as it was: a harness crash); a transposed weight keeps its strides
    # in a copy, so it goes uncopied (the per-node check of a 1 GB Linear held two more copies of it)
    arguments = [v if not writes and (not isinstance(v, torch.Tensor) or copy_keeps_layout(v)) else clone_value(v)
                 for v in inputs]
    before = None if writes else _fingerprints(arguments)
    with torch.no_grad():
        returned = compiled(*arguments)
    if before is not None:
        written = [i for i, (was, now) in enumerate(zip(before, _fingerprints(arguments))) if was != now]
        if written:
            raise ReadOnlyInputWritten(f"the compiled code wrote into input(s) {written} of a graph that only reads "
                                       "them (a recorded value or a parameter, handed to it uncopied): the values "
                                       "judged after it would not be the recorded ones")
    outputs = list(returned) if isinstance(returned, (tuple, list)) else [returned]
    del returned
    callers = _storages([value for value, argument in zip(inputs, arguments) if value is argument]) \
        if views_held else set()  # an output on a copy made for this run is copied: the copy is the run's
    taken = _storages(arguments)  # an output on an input's storage is copied (the input is ours, not its)
    del arguments
    shared = _storages(outputs, repeated=True)
    for index, value in enumerate(outputs):
        if not _own_value(value, taken, shared) and not _on_storage_of(value, callers):
            outputs[index] = clone_value(value)
    return outputs


def _fingerprints(values: Sequence[Any]) -> list[int | None]:
    """Per value, a sum of its bits as integers (``compare.integer_bits``; one pass, no copy; None: no
    plain tensor): an input handed to a compiled run uncopied is checked to be the same after it
    (:func:`run_compiled`). Not ``digest.bit_hash``: position-sensitive, but a dozen passes and a
    dense copy of a strided view, on every compiled run's inputs (a transposed weight among them)."""
    prints: list[int | None] = []
    for value in values:
        bits = None
        if isinstance(value, torch.Tensor) and value.numel():
            bits = integer_bits(value.view(torch.uint8) if value.dtype == torch.bool else value)
        prints.append(None if bits is None else _bit_sum(bits))
    return prints


SUM_PIECE = 1 << 22  # entries summed at once: a sum to int64 widens what it reads (32 MiB at most here)


def _bit_sum(bits: torch.Tensor) -> int:
    """The sum of an integer tensor's entries (wrapping), in pieces of at most :data:`SUM_PIECE`
    entries: ``sum(dtype=torch.int64)`` widens its input to a copy first (a parameter's 4 GB
    would take 8 more)."""
    count = bits.numel()
    if count <= SUM_PIECE or bits.dim() == 0:
        return int(bits.sum(dtype=torch.int64))
    if bits.shape[0] == 1:
        return _bit_sum(bits[0])
    rows = max(1, SUM_PIECE * bits.shape[0] // count)
    return sum(_bit_sum(bits[start:start + rows]) for start in range(0, bits.shape[0], rows))


def _storages(values: Sequence[Any], repeated: bool = False) -> set[int]:
    """The storages (data pointers) of the plain tensors among ``values``; with ``repeated``, only
    those two or more of them share."""
    seen: set[int] = set()
    twice: set[int] = set()
    for value in values:
        if isinstance(value, torch.Tensor) and value.layout == torch.strided and value.numel():
            pointer = value.untyped_storage().data_ptr()
            (twice if pointer in seen else seen).add(pointer)
    return twice if repeated else seen


def _own_value(value: Any, taken: set[int], shared: set[int]) -> bool:
    """A compiled output already a value of its own, held as it is: a CPU tensor (a CUDA graph's
    outputs are overwritten by its next replay) that is no view, needs no grad, spans its whole
    storage from its start, and shares that storage with no input and no other output."""
    if not isinstance(value, torch.Tensor) or value.device.type != "cpu" or value.layout != torch.strided:
        return False
    if (type(value) is not torch.Tensor or value._is_view() or value.requires_grad or value.storage_offset()
            or not value.numel()):
        return False
    storage = value.untyped_storage()
    return (storage.nbytes() == value.numel() * value.element_size() and value.is_contiguous()
            and storage.data_ptr() not in taken and storage.data_ptr() not in shared)


def _on_storage_of(value: Any, storages: set[int]) -> bool:
    """A compiled output that lies on one of ``storages`` (inputs the caller holds and handed to the
    run uncopied), held as it is: a plain strided tensor that needs no grad."""
    return (isinstance(value, torch.Tensor) and type(value) is torch.Tensor and value.layout == torch.strided
            and not value.requires_grad and value.numel() > 0 and value.untyped_storage().data_ptr() in storages)


def cause_of(error: BaseException | None, types: type[BaseException] | tuple[type[BaseException], ...]) -> BaseException | None:
    """The first exception of ``types`` in ``error``'s chain: a backend raising inside
    ``torch.compile`` reaches the caller wrapped (``BackendCompilerFailed``), not as itself."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, types):
            return error
        seen.add(id(error))
        error = getattr(error, "inner_exception", None) or error.__cause__ or error.__context__
    return None
