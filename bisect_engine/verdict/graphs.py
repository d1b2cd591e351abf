"""Read-only views of a captured aten graph, and the one function that cuts subgraphs out of it.

A *compute node* is a ``call_function`` node other than ``getitem``; multi-output ops carry their
tensors on ``getitem`` users (their *value nodes*). Every search candidate, whether a single node, a
window or the whole graph, becomes a :class:`Subgraph` through :func:`build_subgraph`: nodes outside
the candidate are replaced by placeholders fed with their reference values. The caller's
``GraphModule`` is never mutated.
"""
from __future__ import annotations

import dataclasses
import functools
import operator
import re
from dataclasses import dataclass
from dataclasses import field
from typing import TYPE_CHECKING, Any, Iterable, Literal, Sequence, cast

import torch
import torch.fx as fx

if TYPE_CHECKING:
    import networkx as nx

from .shapes import shape_signature

_UNINITIALISED = {
    "aten.empty.memory_format",
    "aten.empty_like.default",
    "aten.empty_strided.default",
    "aten.new_empty.default",
    "aten.new_empty_strided.default",
}


@dataclass(frozen=True)
class Segment:
    """Where a segment of a captured graph too large to judge at once sits in it
    (:mod:`~bisect_engine.verdict.segments`): the ``index``-th of ``count`` (from 1), the modules it
    runs from ``first`` to ``last`` (module paths, ``blocks.0``), its compute nodes."""

    of: str  # the captured graph's name (forward_0)
    index: int
    count: int
    first: str
    last: str
    nodes: int

    def to_json(self) -> dict[str, Any]:
        return {"of": self.of, "index": self.index, "count": self.count, "modules": [self.first, self.last],
                "nodes": self.nodes}


@dataclass
class CapturedGraph:
    """One aten graph as Inductor would receive it, with the real inputs of its first call."""

    name: str  # forward_0, backward_0, ...
    kind: Literal["forward", "backward"]
    index: int  # which Dynamo graph (call order)
    graph_module: fx.GraphModule
    inputs: list[Any] = field(default_factory=list)
    called: bool = False
    # A training forward graph: how many outputs are the model's own (the rest are saved for the
    # backward). None: every output is (inference graphs, backward graphs).
    model_outputs: int | None = None
    # Forward graphs: the Dynamo (torch-level) graph it was traced from and that graph's real
    # inputs, as Inductor's pre-grad passes see them.
    torch_level: tuple[fx.GraphModule, list[Any]] | None = None
    # Inputs of later calls of the same graph (None: the first call's value, a parameter).
    later_inputs: list[list[Any]] = field(default_factory=list)

    def later_call(self, k: int) -> "CapturedGraph":
        """The graph as called the ``k``-th time (2, 3, ...), judged as a graph of its own."""
        inputs = [first if later is None else later for first, later in zip(self.inputs, self.later_inputs[k - 2])]
        return dataclasses.replace(self, name=f"{self.name}_call{k}", inputs=inputs, later_inputs=[])
    # The Dynamo compile it belongs to, as torch writes it ("0/0"; tlparse lists it as [0/0]).
    compile_id: str | None = None
    # A graph with symbolic sizes: the guards its compile recorded on them (expression text,
    # e.g. "s0 <= 128"); the sizes the job's compiled graph accepts.
    guards: tuple[str, ...] = ()
    # Placeholders the user's compile froze into constants (``torch._inductor.config.freezing``
    # under no_grad: the parameters and buffers AOT Autograd lifted first, none written in place).
    frozen: tuple[str, ...] = ()
    # Inputs held by reference, not copied (the model's parameters), each with its version counter
    # at capture: a later in-place write (an optimizer step) would change what was recorded.
    shared: tuple[tuple[torch.Tensor, int], ...] = field(default=(), repr=False, compare=False)
    # A segment of a graph judged in pieces (its inputs: the graph's, and eager's values of what
    # the segments before it computed); None: a graph as captured.
    segment: Segment | None = None

    def check_inputs(self) -> None:
        """Raise :class:`CapturedInputChanged` when an input held by reference was written in place
        since capture: the graph would be judged on other values than its call had (never silently)."""
        changed = [index for index, (tensor, version) in enumerate(self.shared) if tensor._version != version]
        if changed:
            raise CapturedInputChanged(f"{self.name}: {len(changed)} parameter(s) captured by reference were "
                                       "written in place since capture (an optimizer step?); its recorded "
                                       "inputs are no longer the values of its call")

    @property
    def shape_signature(self) -> tuple[Any, ...] | None:
        """Each input's symbolic sizes (see :mod:`~bisect_engine.verdict.shapes`); None: static."""
        return shape_signature(self.graph_module)


class CapturedInputChanged(RuntimeError):
    """An input captured by reference changed after capture: our harness cannot judge that call."""


class ReadOnlyInputWritten(CapturedInputChanged):
    """A compiled run wrote into an input its graph only reads (handed to it uncopied: a recorded
    eager value, a parameter): the values the run's later judgements read are no longer the ones
    recorded, so the run stops there, as for any input changed since capture, never a verdict."""


def is_compute(node: fx.Node) -> bool:
    return node.op == "call_function" and node.target is not operator.getitem


# Random ops that draw nothing with these arguments: a dropout probability of 0, or not training.
# SDPA carries the ``nondeterministic_seeded`` tag for its ``dropout_p``, but at 0 (every model in
# eval, most in training) it is as deterministic as a matmul.
_DROPOUT_OPS = ("aten.native_dropout", "aten.dropout", "aten.alpha_dropout", "aten.feature_dropout",
                "aten.feature_alpha_dropout")


def _bound_arguments(node: fx.Node) -> dict[str, Any]:
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return {}
    bound = {argument.name: value for argument, value in zip(schema.arguments, node.args)}
    bound.update(node.kwargs)
    for argument in schema.arguments:
        if argument.name not in bound and argument.has_default_value():
            bound[argument.name] = argument.default_value
    return bound


def is_random(node: fx.Node) -> bool:
    """Whether the node draws random numbers when it runs (not merely an op that could)."""
    if torch.Tag.nondeterministic_seeded not in getattr(node.target, "tags", ()):
        return False
    arguments = _bound_arguments(node)
    if arguments.get("train") is False:
        return False
    if arguments.get("dropout_p", None) == 0 or arguments.get("dropout", None) == 0:
        return False
    is_dropout = str(node.target).split(".")[0] + "." + str(node.target).split(".")[1] in _DROPOUT_OPS
    return not (is_dropout and arguments.get("p") == 0)


def is_submodule_attr(node: fx.Node) -> bool:
    """A ``get_attr`` node that holds a module: a higher-order op's subgraph (``true_graph_0``,
    a flex attention score_mod, ``subgraph_0``). Every cut keeps it an attribute, never an input:
    AOT Autograd takes tensors and symbols as inputs, not GraphModules."""
    if node.op != "get_attr":
        return False
    root = node.graph.owning_module
    return isinstance(attribute_at(root, str(node.target)), torch.nn.Module)


def attribute_at(root: Any, target: str) -> Any:
    """What a ``get_attr`` target (``"sub.weight"``) names on ``root``; None where any part is missing."""
    value = root
    for part in target.split("."):
        value = getattr(value, part, None)
    return value


def fed_inputs(node: fx.Node) -> list[fx.Node]:
    """The nodes a cut feeds ``node`` through placeholders: its inputs less the subgraph attributes."""
    return [source for source in node.all_input_nodes if not is_submodule_attr(source)]


def is_mutating(node: fx.Node) -> bool:
    schema = getattr(node.target, "_schema", None)
    return bool(schema is not None and schema.is_mutable)


# Outputs of attention kernels that are bookkeeping, not results: the dropout RNG state they return
# for the backward (an uninitialised scalar when dropout is off) and unused placeholders.
_BOOKKEEPING_RETURNS = {"philox_seed", "philox_offset", "rng_state", "unused", "debug_attn_mask"}


def is_bookkeeping(value: fx.Node) -> bool:
    """A ``getitem`` of an op's return that its schema names as RNG state or an unused slot
    (``philox_seed`` of ``_scaled_dot_product_efficient_attention``): never judged as a result."""
    if value.target is not operator.getitem or not value.args or not isinstance(value.args[0], fx.Node):
        return False
    schema = getattr(value.args[0].target, "_schema", None)
    index = value.args[1]
    returns = schema.returns if schema is not None else ()
    return isinstance(index, int) and 0 <= index < len(returns) and returns[index].name in _BOOKKEEPING_RETURNS


def is_uninitialised(node: fx.Node) -> bool:
    return str(node.target) in _UNINITIALISED


def op_name(node: fx.Node) -> str:
    return str(node.target)


def value_nodes(node: fx.Node) -> list[fx.Node]:
    """The nodes that carry a compute node's tensors: itself, or its getitem users."""
    getitems = [user for user in node.users if user.target is operator.getitem]
    return getitems if getitems else [node]


def is_tensor_value(node: fx.Node) -> bool:
    value = node.meta.get("val", node.meta.get("example_value"))
    return isinstance(value, torch.Tensor)


def source_location(node: fx.Node) -> tuple[str | None, str | None]:
    """(``file.py:LINE``, full path) of the innermost user frame that made this node."""
    frames = re.findall(r'File "([^"]+)", line (\d+)', node.meta.get("stack_trace") or "")
    if not frames:
        return None, None
    path, line = frames[-1]
    return f"{path.rsplit('/', 1)[-1]}:{line}", f"{path}:{line}"


def module_path(node: fx.Node, backward: bool = False) -> str | None:
    """``blocks.1.act`` from Dynamo's ``L['self'].blocks[1].act``; None at top level.
    ``backward``: a backward node's, from the forward node it differentiates (AOT Autograd's
    ``fwd_nn_module_stack``)."""
    stack = node.meta.get("nn_module_stack") or (node.meta.get("fwd_nn_module_stack") if backward else None) or {}
    if not stack:
        return None
    raw = str(list(stack.values())[-1][0])
    path = re.sub(r"^L\['[^']*'\]", "", raw)
    path = re.sub(r"\[(\d+)\]", r".\1", path)
    path = re.sub(r"\['([^']+)'\]", r".\1", path)
    path = re.sub(r"^_modules\.|\._modules\.", ".", path)
    return path.strip(".") or None


class GraphView:
    """An aten graph with its order, its dependency DiGraph and per-node lookups."""

    def __init__(self, graph_module: fx.GraphModule):
        self.graph_module = graph_module
        self.nodes: dict[str, fx.Node] = {node.name: node for node in graph_module.graph.nodes}
        self.compute_nodes: list[fx.Node] = [n for n in graph_module.graph.nodes if is_compute(n)]
        self.position = {node.name: index for index, node in enumerate(self.compute_nodes)}

    @functools.cached_property
    def dependencies(self) -> "nx.DiGraph[str]":
        """The compute nodes' producer → consumer DiGraph, built when first asked (networkx loads
        then: a third of a second of every process's start otherwise)."""
        import networkx as nx

        dependencies: nx.DiGraph[str] = nx.DiGraph()
        for node in self.compute_nodes:
            dependencies.add_node(node.name)
            for source in _producers(node):
                if is_compute(source):
                    dependencies.add_edge(source.name, node.name)
        return dependencies

    def checkable(self, node: fx.Node) -> bool:
        """Whether a node's own output can be judged: deterministic, pure, tensor-valued."""
        return not (is_random(node) or is_mutating(node) or is_uninitialised(node)) and any(
            is_tensor_value(value) for value in value_nodes(node)
        )

    def is_random_tensor_op(self, node: fx.Node) -> bool:
        return is_random(node) and not is_mutating(node) and any(is_tensor_value(v) for v in value_nodes(node))

    def compilable_names(self, keep_random: bool = False) -> list[str]:
        """Compute nodes that may go into a compiled subgraph (random ones are fed as data)."""
        return [n.name for n in self.compute_nodes if keep_random or not is_random(n)]

    def random_names(self) -> list[str]:
        return [n.name for n in self.compute_nodes if is_random(n)]

    def placeholder_names(self) -> list[str]:
        return [node.name for node in self.graph_module.graph.nodes if node.op == "placeholder"]

    def output_names(self, limit: int | None = None) -> list[str]:
        """The value names the graph returns (its first ``limit`` outputs: a training forward
        graph's own outputs, before the tensors it saves for the backward)."""
        output = next(node for node in reversed(self.graph_module.graph.nodes) if node.op == "output")
        top = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
        returned: list[fx.Node] = []
        fx.node.map_arg(tuple(top[:limit] if limit is not None else top), returned.append)  # in order
        return [value.name for value in returned]

    def ancestors(self, names: Iterable[str]) -> set[str]:
        """Every node (compute, getitem, placeholder) upstream of the named ones, themselves included."""
        seen: set[str] = set()
        stack = [self.nodes[name] for name in names if name in self.nodes]
        while stack:
            node = stack.pop()
            if node.name in seen:
                continue
            seen.add(node.name)
            stack.extend(node.all_input_nodes)
        return seen


def _producers(node: fx.Node) -> list[fx.Node]:
    """The compute (or placeholder) nodes a node reads, seeing through getitem."""
    producers: list[fx.Node] = []
    for source in node.all_input_nodes:
        producers.append(cast(fx.Node, source.args[0]) if source.target is operator.getitem else source)
    return producers


@dataclass(frozen=True)
class Subgraph:
    """A compilable piece of a graph: its inputs and outputs name value nodes of the original."""

    graph_module: fx.GraphModule
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    node_names: tuple[str, ...]


def tensor_constant_names(view: GraphView) -> frozenset[str]:
    """The graph's own tensor constants: its ``get_attr`` tensors (what AOT Autograd traced a
    tensor made inside the compiled function to, ``_tensor_constant0``), which Inductor lowers as
    constants; subgraph modules excepted."""
    return frozenset(node.name for node in view.graph_module.graph.nodes
                     if node.op == "get_attr" and isinstance(attribute_at(view.graph_module, str(node.target)), torch.Tensor))


def constant_names(view: GraphView, frozen: Iterable[str]) -> frozenset[str]:
    """The values the user's compile holds as constants: the ``frozen`` placeholders, the graph's
    own tensor constants (:func:`tensor_constant_names`) and every value computed from them alone
    (a weight's transpose; freezing folds it), random ops excepted. Every cut or per-node copy
    takes these as constants (:mod:`~bisect_engine.verdict.frozen`)."""
    constants = set(frozen) | tensor_constant_names(view)
    if not constants:
        return frozenset()
    for node in view.compute_nodes:
        sources = fed_inputs(node)
        if sources and not is_random(node) and not is_mutating(node) and all(source.name in constants for source in sources):
            constants.update(value.name for value in value_nodes(node))
    return frozenset(constants)


def build_subgraph(
    view: GraphView,
    names: Iterable[str],
    *,
    isolate: bool = False,
    outputs: Literal["escaping", "all"] = "escaping",
) -> Subgraph:
    """Cut the named compute nodes out of ``view``; every other value becomes a placeholder.

    ``isolate=True`` cuts the edges between chosen nodes too, so each node reads the reference
    values of its inputs (the stitched per-node check: N nodes, one compile).
    """
    chosen = set(names)
    ordered = [node for node in view.compute_nodes if node.name in chosen]
    inside_values = {value for node in ordered for value in value_nodes(node)} | set(ordered)
    graph = fx.Graph()
    # Placeholders first, so each keeps its producer's name and no copied node can shadow it.
    placeholders: dict[fx.Node, fx.Node] = {}
    for node in ordered:
        for source in fed_inputs(node):
            if (isolate or source not in inside_values) and source not in placeholders:
                # An isolated node's input that is also computed here gets a name of its own.
                name = f"{source.name}_in" if source in inside_values else source.name
                placeholders[source] = graph.placeholder(name)
                placeholders[source].meta.update(source.meta)
    inside: dict[fx.Node, fx.Node] = {}
    attributes = _copy_attributes(graph, ordered)

    def lookup(source: fx.Node) -> fx.Node:
        if source in attributes:
            return attributes[source]
        return placeholders[source] if (isolate or source not in inside) else inside[source]

    for node in ordered:
        inside[node] = graph.node_copy(node, lookup)
        for value in value_nodes(node):
            if value is not node:
                inside[value] = graph.node_copy(value, lambda source: inside[source])
    output_nodes = [
        value
        for node in ordered
        for value in value_nodes(node)
        if is_tensor_value(value) and (outputs == "all" or _escapes(value, chosen))
    ]
    graph.output(tuple(inside[value] for value in output_nodes))
    graph.lint()
    return Subgraph(
        graph_module=fx.GraphModule(view.graph_module, graph),
        input_names=tuple(source.name for source in placeholders),
        output_names=tuple(value.name for value in output_nodes),
        node_names=tuple(node.name for node in ordered),
    )


def _copy_attributes(graph: fx.Graph, nodes: Iterable[fx.Node]) -> dict[fx.Node, fx.Node]:
    """The subgraph attributes the nodes read, as ``get_attr`` nodes of ``graph`` (after its
    placeholders); ``fx.GraphModule(root, graph)`` then copies each module from the root."""
    attributes: dict[fx.Node, fx.Node] = {}
    for node in nodes:
        for source in node.all_input_nodes:
            if is_submodule_attr(source) and source not in attributes:
                attributes[source] = graph.node_copy(source)
    return attributes


def _escapes(value: fx.Node, chosen: set[str]) -> bool:
    for user in value.users:
        if user.op == "output" or user.name not in chosen:
            return True
    return False


def reference_inputs(subgraph: Subgraph, values: dict[str, Any]) -> list[Any]:
    return [values[name] for name in subgraph.input_names]


# ---------------------------------------------------------------------------------------------
# Per-node check by signature: one compiled copy per distinct node, run once per member
# ---------------------------------------------------------------------------------------------

def node_signature(node: fx.Node, values: dict[str, Any], constants: frozenset[str] = frozenset()) -> tuple[Any, ...] | None:
    """Everything Inductor sees when it compiles ``node`` alone on placeholder inputs.

    The op, its arguments' structure, every constant argument, and per tensor input its dtype,
    shape, stride, storage offset and device (the metadata Inductor specialises on), plus which
    arguments are the same value. Two nodes with one signature compile to the same kernel, so
    one compiled copy judges both. None when an input's value is unknown (never grouped).
    An input in ``constants`` (frozen into the compiled copy) is described by its name: nodes that
    read different constants compile different code.
    """
    order: dict[fx.Node, int] = {}

    def describe(arg: Any) -> Any:
        if isinstance(arg, fx.Node) and is_submodule_attr(arg):
            return ("attribute", str(arg.target))  # one subgraph: the same module, every node
        if isinstance(arg, fx.Node):
            if arg.name not in values:
                raise KeyError(arg.name)
            order.setdefault(arg, len(order))
            if arg.name in constants:
                return ("constant", arg.name)
            return ("input", order[arg], _value_meta(values[arg.name]))
        if isinstance(arg, (list, tuple)):
            return (type(arg).__name__, tuple(describe(a) for a in arg))
        if isinstance(arg, dict):
            return ("dict", tuple((k, describe(v)) for k, v in sorted(arg.items())))
        return ("const", type(arg).__name__, repr(arg))

    try:
        args = describe(node.args)
        kwargs = describe(dict(node.kwargs))
    except KeyError:
        return None
    used = tuple(sorted(cast(int, v.args[1]) for v in value_nodes(node) if v is not node))
    return (node.target, args, kwargs, used)


def _value_meta(value: Any) -> tuple[Any, ...]:
    if isinstance(value, torch.Tensor):
        return ("tensor", value.dtype, tuple(value.shape), value.stride(), value.storage_offset(),
                str(value.device), value.is_sparse)
    return ("value", type(value).__name__, repr(value))


@dataclass(frozen=True)
class CopyPlan:
    """Which node each compiled copy stands for on each call.

    ``members[c]`` lists the nodes copy ``c`` computes, one per call (copy ``c`` is a copy of
    ``members[c][0]``); a copy with fewer members than ``calls`` repeats its last one.
    """

    members: tuple[tuple[str, ...], ...]

    @property
    def calls(self) -> int:
        return max((len(m) for m in self.members), default=0)

    def member(self, copy: int, call: int) -> str | None:
        """The node copy ``copy`` judges on call ``call`` (None: a repeat, not read)."""
        members = self.members[copy]
        return members[call] if call < len(members) else None

    def feed(self, copy: int, call: int) -> str:
        members = self.members[copy]
        return members[min(call, len(members) - 1)]


# What compiling one more copy costs, in runs of one copy: a copy is a kernel to generate and
# build (C++ on CPU, Triton on CUDA), a run is a call of it on small reference inputs.
COPY_COST_IN_RUNS = 256


def plan_copies(view: GraphView, names: Iterable[str], values: dict[str, Any], max_calls: int | None = None,
                constants: frozenset[str] = frozenset()) -> CopyPlan:
    """Group nodes by :func:`node_signature`, in graph order; groups longer than ``max_calls``
    are split (more copies, fewer calls). ``None``: the split that minimises the estimated cost,
    every copy compiled once and run once per call (see :func:`calls_per_copy`)."""
    groups: dict[Any, list[str]] = {}
    order: list[Any] = []
    for name in names:
        signature = node_signature(view.nodes[name], values, constants)
        key = ("alone", name) if signature is None else signature
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(name)
    cap = max_calls if max_calls is not None else calls_per_copy([len(g) for g in groups.values()])
    members: list[tuple[str, ...]] = []
    for key in order:
        group = groups[key]
        members.extend(tuple(group[i:i + cap]) for i in range(0, len(group), cap))
    return CopyPlan(tuple(members))


def calls_per_copy(sizes: Sequence[int], copy_cost: int = COPY_COST_IN_RUNS) -> int:
    """The most members one copy stands for: ``copies * (copy_cost + calls)`` is least (each call
    runs every copy), so a deep stack of identical layers compiles each distinct node once
    while one large group among many single nodes is split rather than run alone many times."""
    if not sizes:
        return 1

    def cost(cap: int) -> int:
        copies = sum(-(-size // cap) for size in sizes)
        return copies * (copy_cost + cap)

    largest = max(sizes)
    candidates = set(sizes) | {1 << k for k in range(largest.bit_length())}
    return min(sorted(candidates), key=lambda cap: (cost(cap), cap))


@dataclass(frozen=True)
class Copies:
    """A graph of one copy per plan entry, each reading placeholders of its own."""

    graph_module: fx.GraphModule
    plan: CopyPlan
    # per copy: its outputs (None for a single-output node, else the getitem index); its
    # placeholders are its node's ``fed_inputs``, in order
    output_slots: tuple[tuple[int | None, ...], ...]

    def inputs(self, view: GraphView, values: dict[str, Any], call: int) -> list[Any]:
        """The placeholder values for one call: each copy reads its member's reference inputs."""
        return [values[source.name]
                for copy in range(len(self.plan.members))
                for source in fed_inputs(view.nodes[self.plan.feed(copy, call)])]

    def positions(self, view: GraphView, names: frozenset[str]) -> list[int]:
        """The placeholders that read one of ``names`` (the same value on every call: a copy's
        members share the constants they read, see :func:`node_signature`)."""
        sources = [source for copy in range(len(self.plan.members))
                   for source in fed_inputs(view.nodes[self.plan.members[copy][0]])]
        return [i for i, source in enumerate(sources) if source.name in names]

    def assign(self, view: GraphView, call: int, outputs: Sequence[Any]) -> dict[str, Any]:
        """Map one call's outputs to the value-node names of the members judged on that call."""
        assigned: dict[str, Any] = {}
        position = 0
        for copy, slots in enumerate(self.output_slots):
            member = self.plan.member(copy, call)
            for slot in slots:
                if member is not None:
                    assigned[_value_name(view.nodes[member], slot)] = outputs[position]
                position += 1
        return assigned


def _value_name(node: fx.Node, slot: int | None) -> str:
    if slot is None:
        return node.name
    return next(v.name for v in value_nodes(node) if v is not node and v.args[1] == slot)


def build_copies(view: GraphView, plan: CopyPlan) -> Copies:
    """One copy of each plan entry's first member, every copy on placeholders of its own (no
    two copies share an input, so none can be fused with or CSE'd into another)."""
    graph = fx.Graph()
    # Placeholders first, all of them, so no copied node can take a placeholder's name.
    copies: list[tuple[fx.Node, dict[fx.Node, fx.Node]]] = []
    for index, members in enumerate(plan.members):
        node = view.nodes[members[0]]
        placeholders = {}
        for source in fed_inputs(node):
            placeholders[source] = graph.placeholder(f"c{index}_{source.name}")
            placeholders[source].meta.update(source.meta)
        copies.append((node, placeholders))
    attributes = _copy_attributes(graph, [node for node, _ in copies])
    outputs: list[fx.Node] = []
    output_slots: list[tuple[int | None, ...]] = []
    for node, placeholders in copies:
        copy = graph.node_copy(node, lambda source: attributes.get(source) or placeholders[source])
        slots: list[int | None] = []
        for value in value_nodes(node):
            if not is_tensor_value(value):
                continue
            if value is node:
                outputs.append(copy)
                slots.append(None)
            else:
                item = graph.node_copy(value, lambda source: copy)
                outputs.append(item)
                slots.append(cast(int, value.args[1]))
        output_slots.append(tuple(slots))
    graph.output(tuple(outputs))
    graph.lint()
    return Copies(fx.GraphModule(view.graph_module, graph), plan, tuple(output_slots))
