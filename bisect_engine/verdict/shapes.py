"""Symbolic shapes: which sizes of a graph are symbols, and inputs to compile it as Inductor got it.

A graph Dynamo compiled with dynamic shapes carries them on its placeholders (``meta["val"]``:
fake tensors whose sizes are ``SymInt``s such as ``s0`` or ``2*s0``, and ``SymInt`` inputs). A
recompile fed real tensors would specialise every size and generate other kernels (no symbolic
index arithmetic, no tail masks), so a bug that lives only in symbolic kernels would vanish.
:func:`shape_signature` writes each placeholder's sizes and strides as expression text;
:func:`bind_symbols` reads the real value of every symbol off the real inputs; :func:`fake_inputs`
makes fake inputs from a fresh ``ShapeEnv`` with the same symbols (same dims symbolic, the others
static), which ``compile_fx`` compiles symbolically; the compiled code then runs at any size.
:func:`resized_inputs` gives a graph's inputs with one symbol set to another value (real data
tiled along the symbolic dims, laid out with the strides the compiled code assumes).

Embedded verbatim into every repro of a symbolic graph: only torch, sympy and the standard
library, no relative imports.
"""
from __future__ import annotations

from typing import Any

import torch
import sympy  # after torch: torch sets sympy up as it needs

# An entry per placeholder: ("tensor", sizes, strides) with each size and stride as expression
# text ("s0", "2*s0", "32"), ("int", expression) for a SymInt input, ("static",) otherwise.
ShapeEntry = tuple


class ShapeMismatch(ValueError):
    """The real inputs do not fit the graph's symbolic shapes (a symbol with two values)."""


def _text(size: Any) -> str:
    if isinstance(size, torch.SymInt):
        node = size.node
        expr = node.expr
        shape_env = getattr(node, "shape_env", None)
        if shape_env is not None:
            expr = shape_env.replace(expr)  # s1 unified with s0 by a guard reads as s0
        return str(expr)
    return str(int(size))


def shape_signature(graph_module: torch.fx.GraphModule) -> tuple[ShapeEntry, ...] | None:
    """Each placeholder's symbolic sizes and strides; None when no placeholder has a symbol."""
    entries: list[ShapeEntry] = []
    for node in graph_module.graph.nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("val", node.meta.get("example_value"))
        if isinstance(value, torch.Tensor) and not value.is_sparse:
            entries.append(("tensor", tuple(_text(s) for s in value.shape), tuple(_text(s) for s in value.stride())))
        elif isinstance(value, torch.SymInt):
            entries.append(("int", _text(value)))
        else:
            entries.append(("static",))
    return tuple(entries) if symbols_of(entries) else None


def _data_dependent_node(node: torch.fx.Node) -> bool:
    tags = getattr(node.target, "tags", ())
    if torch.Tag.data_dependent_output not in tags and torch.Tag.dynamic_output_shape not in tags:
        return False
    if node.target is torch.ops.aten.index.Tensor:  # data-dependent only with a boolean mask
        indices: Any = node.args[1] if len(node.args) > 1 else ()
        values = [getattr(i, "meta", {}).get("val") for i in indices if i is not None]
        return any(not isinstance(v, torch.Tensor) or v.dtype in (torch.bool, torch.uint8) for v in values)
    return True


def data_dependent_ops(graph_module: torch.fx.GraphModule) -> list[str]:
    """The graph's ops whose output size or value is data-dependent (``nonzero``,
    ``masked_select``, ``unique``, a boolean-mask index, ``.item()``), each once: Inductor traces
    such an op only with a ``ShapeEnv`` (an unbacked symbol), as Dynamo's own fake inputs carry one."""
    ops = (str(node.target) for node in graph_module.graph.nodes
           if node.op == "call_function" and _data_dependent_node(node))
    return list(dict.fromkeys(ops))


# Loop HOPs Inductor lowers with unbacked symbols (scan becomes a while_loop indexed by ``.item()``):
# traced only with a ShapeEnv, as Dynamo's fake inputs carry one.
LOOP_HOPS = ("while_loop", "while_loop_stack_output", "scan")


def _loop_node(node: torch.fx.Node) -> bool:
    return isinstance(node.target, torch._ops.HigherOrderOperator) and node.target.name() in LOOP_HOPS


def data_dependent(graph_module: torch.fx.GraphModule) -> bool:
    """Whether Inductor must trace the graph with a ``ShapeEnv``: a data-dependent op, a loop HOP,
    or either inside a HOP's subgraph."""
    if data_dependent_ops(graph_module):
        return True
    if any(node.op == "call_function" and _loop_node(node) for node in graph_module.graph.nodes):
        return True
    return any(isinstance(module, torch.fx.GraphModule) and data_dependent(module)
               for module in graph_module.children())


def forget_unbacked_bindings(graph_module: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """The graph (a copy, changed in place) without the unbacked-symbol bindings of the ShapeEnv
    that traced it: a retrace on fake inputs from a fresh ShapeEnv would rename its new unbacked
    symbols to those of the old one, which it does not know (``AttributeError`` inside torch)."""
    for node in graph_module.graph.nodes:
        node.meta.pop("unbacked_bindings", None)
    return graph_module


def static_signature(inputs: list[Any]) -> tuple[ShapeEntry, ...]:
    """Every input at its real sizes and strides, written as a signature with no symbol: fake
    inputs made from it are static but carry a ``ShapeEnv`` (for :func:`data_dependent` graphs)."""
    return tuple(("tensor", tuple(str(s) for s in v.shape), tuple(str(s) for s in v.stride()))
                 if isinstance(v, torch.Tensor) and not v.is_sparse else ("static",) for v in inputs)


def _locals() -> dict[str, Any]:
    import torch.utils._sympy.functions as functions

    names = {name: getattr(functions, name) for name in dir(functions) if not name.startswith("_")}
    return {name: value for name, value in names.items() if isinstance(value, type)}


_LOCALS: dict[str, Any] = {}


def parse(text: str) -> sympy.Expr:
    """An expression written by :func:`shape_signature`, every symbol a plain ``sympy.Symbol``."""
    if not _LOCALS:
        _LOCALS.update(_locals())
    return sympy.sympify(text, locals=dict(_LOCALS))


def _pairs(signature: tuple[ShapeEntry, ...], inputs: list[Any]) -> list[tuple[str, int]]:
    """(expression text, real value) for every size."""
    pairs: list[tuple[str, int]] = []
    for entry, value in zip(signature, inputs):
        if entry[0] == "int":
            pairs.append((entry[1], int(value)))
        elif entry[0] == "tensor" and isinstance(value, torch.Tensor):
            if len(entry[1]) != value.dim():
                raise ShapeMismatch(f"an input of {value.dim()} dims where the graph has {len(entry[1])}")
            pairs += zip(entry[1], value.shape)
    return pairs


def strides_of(entry: ShapeEntry, value: torch.Tensor, values: dict[str, int]) -> list[str]:
    """The strides to compile ``value`` with: the graph's own where the real tensor has them;
    else (a copy made dense, say) the real layout's, written with the symbolic sizes: the
    compiled code must address the tensor it is given."""
    sizes, strides = entry[1], entry[2]
    if all(evaluate(t, values) == real for t, real, size in zip(strides, value.stride(), value.shape) if size > 1):
        return list(strides)
    if not _dense(value):
        raise ShapeMismatch(f"an input with strides {tuple(value.stride())} that are neither the graph's "
                            f"({', '.join(strides)}) nor dense")
    order = sorted(range(value.dim()), key=lambda d: (value.stride(d), -d))  # innermost first
    dense: list[str] = ["1"] * value.dim()
    running = sympy.Integer(1)
    for dim in order:
        dense[dim] = str(running)
        running = running * parse(sizes[dim])
    return dense


def _dense(value: torch.Tensor) -> bool:
    order = sorted(range(value.dim()), key=lambda d: (value.stride(d), -d))
    expected = 1
    for dim in order:
        if value.shape[dim] > 1 and value.stride(dim) != expected:
            return False
        expected *= value.shape[dim]
    return True


def symbols_of(signature: Any) -> list[str]:
    """The symbols a signature names, in order of first appearance."""
    seen: dict[str, None] = {}
    for entry in signature:
        texts = [entry[1]] if entry[0] == "int" else list(entry[1]) + list(entry[2]) if entry[0] == "tensor" else []
        for text in texts:
            if not text.lstrip("-").isdigit():
                for symbol in sorted(parse(text).free_symbols, key=lambda s: s.name):
                    seen.setdefault(symbol.name, None)
    return list(seen)


def bind_symbols(signature: tuple[ShapeEntry, ...], inputs: list[Any]) -> dict[str, int]:
    """Every symbol's value in this call, read off the real inputs' sizes (a plain ``s0`` first,
    then expressions of one unknown); raises :class:`ShapeMismatch` when the inputs do not fit."""
    values: dict[str, int] = {}
    parsed = [(parse(text), real) for text, real in _pairs(signature, inputs)]
    for expr, real in parsed:
        if isinstance(expr, sympy.Symbol):
            values.setdefault(expr.name, int(real))
    for _ in range(3):
        for expr, real in parsed:
            rest = expr.subs({sympy.Symbol(k): v for k, v in values.items()})
            unknown = rest.free_symbols
            if len(unknown) == 1:
                (symbol,) = unknown
                solutions = [s for s in sympy.solve(sympy.Eq(rest, real), symbol) if s.is_integer]
                if len(solutions) == 1:
                    values[symbol.name] = int(solutions[0])
    missing = [s for s in symbols_of(signature) if s not in values]
    if missing:
        raise ShapeMismatch(f"no value for {', '.join(missing)} in the real inputs")
    for text, real in _pairs(signature, inputs):
        if evaluate(text, values) != int(real):
            raise ShapeMismatch(f"{text} is {evaluate(text, values)} by the sizes but {real} in the inputs")
    return values


def evaluate(text: str, values: dict[str, int]) -> int:
    return int(parse(text).subs({sympy.Symbol(k): v for k, v in values.items()}))


def fake_inputs(signature: tuple[ShapeEntry, ...], inputs: list[Any], values: dict[str, int] | None = None) -> list[Any]:
    """Fake inputs from a fresh ``ShapeEnv`` with one backed symbol per symbol of the signature
    (its hint: the real value), the other sizes static: ``compile_fx`` compiles them symbolically."""
    from torch._dynamo.source import ConstantSource
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv

    values = bind_symbols(signature, inputs) if values is None else values
    shape_env = ShapeEnv()
    fake_mode = FakeTensorMode(shape_env=shape_env)
    new_symbols = {sympy.Symbol(name): shape_env.create_symbol(value, ConstantSource(name), dynamic_dim=DimDynamic.DYNAMIC)
                   for name, value in values.items()}

    def symint(text: str) -> Any:
        expr = parse(text)
        if not expr.free_symbols:
            return int(expr)
        return shape_env.create_symintnode(expr.xreplace(new_symbols), hint=evaluate(text, values))

    fakes: list[Any] = []
    with fake_mode:
        for entry, value in zip(signature, inputs):
            if entry[0] == "tensor":
                strides = strides_of(entry, value, values)
                fake = torch.empty_strided([symint(s) for s in entry[1]], [symint(s) for s in strides],
                                           dtype=value.dtype, device=value.device)
                fakes.append(fake)
            elif entry[0] == "int":
                fakes.append(symint(entry[1]))
            else:
                fakes.append(value)
    return fakes


def resized_inputs(signature: tuple[ShapeEntry, ...], inputs: list[Any], values: dict[str, int]) -> list[Any]:
    """The inputs at other symbol ``values``: each tensor's real data tiled (or cut) along the dims
    whose size changes, laid out with the strides the symbolic code assumes; SymInt inputs their
    new value. Raises ``ValueError`` where that cannot be done (an empty dim, an expanded input)."""
    resized: list[Any] = []
    old_values = bind_symbols(signature, inputs)
    for entry, value in zip(signature, inputs):
        if entry[0] == "int":
            resized.append(evaluate(entry[1], values))
            continue
        if entry[0] != "tensor" or not isinstance(value, torch.Tensor):
            resized.append(value)
            continue
        sizes = [evaluate(s, values) for s in entry[1]]
        strides = [evaluate(s, values) for s in strides_of(entry, value, old_values)]
        tiled = value.detach()
        for dim, (old, new) in enumerate(zip(value.shape, sizes)):
            if old != new:
                if old == 0:
                    raise ValueError("an empty dim cannot be tiled")
                tiled = tiled.index_select(dim, torch.arange(new, device=value.device) % old)
        if any(stride == 0 for stride, size in zip(strides, sizes) if size > 1):
            raise ValueError("an expanded input (stride 0) cannot be resized")
        out = torch.empty_strided(sizes, strides, dtype=value.dtype, device=value.device)
        resized.append(out.copy_(tiled))
    return resized


def dynamic_dims(signature: tuple[ShapeEntry, ...], names: list[str]) -> list[dict[str, Any]]:
    """For the report: each input with a symbolic size, which dims, and their expressions."""
    described = []
    for entry, name in zip(signature, names):
        if entry[0] == "tensor":
            dims = {str(i): text for i, text in enumerate(entry[1]) if not text.lstrip("-").isdigit()}
            if dims:
                described.append({"input": name, "dims": dims, "shape": list(entry[1])})
        elif entry[0] == "int" and not entry[1].lstrip("-").isdigit():
            described.append({"input": name, "symint": entry[1]})
    return described
