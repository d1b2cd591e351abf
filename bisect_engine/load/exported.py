"""A ``torch.export.ExportedProgram`` as the engine sees it: its graph module with flat tensor
inputs and a tuple of outputs (what a captured Dynamo graph looks like), its example inputs
flattened the same way, and the dims it declared dynamic (``dynamic_shapes=``) with their ranges.

``ExportedProgram.module()`` reads its inputs through a pytree spec; the copy made here (without
the input guards, as AOTInductor compiles it) drops the spec, so the graph runs eagerly, in fp64
and through our capture as any other graph.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Sequence

import torch
import torch.fx as fx
import torch.fx._pytree as fx_pytree


@dataclass(frozen=True)
class DynamicDim:
    """A dim of a user input the export declared dynamic: input position, dim, its example size
    and the range ``torch.export`` allows (``upper`` None: unbounded)."""

    input: int
    dim: int
    size: int
    lower: int
    upper: int | None
    name: str
    dim_name: str | None = None  # the user's ``Dim("batch")`` name, where the export's ShapeEnv keeps it
    # marked dynamic (``Dim.AUTO``) but specialised by the export to ``size``: the package holds that size only
    specialised: bool = False

    def other_size(self) -> int | None:
        """A second size inside the range (the example size doubled, else the next one up or down)."""
        for size in (2 * self.size, self.size + 1, self.size - 1, self.lower):
            if size != self.size and size >= max(self.lower, 1) and (self.upper is None or size <= self.upper):
                return size
        return None

    def to_json(self) -> dict[str, Any]:
        return {"input": self.input, "dim": self.dim, "size": self.size, "min": self.lower, "max": self.upper,
                "symbol": self.name, "name": self.dim_name, "specialised": self.specialised}


def flat_graph_module(exported: Any) -> fx.GraphModule:
    """A copy of ``exported.module()`` that takes the flat user inputs and returns a tuple."""
    module = copy.deepcopy(exported.module(check_guards=False))
    module.graph._codegen = fx.graph.CodeGen()  # the pytree in/out specs read by module() go
    module.recompile()
    return module


def flat_inputs(exported: Any, args: Sequence[Any] | None = None, kwargs: dict[str, Any] | None = None) -> list[Any]:
    """``(args, kwargs)`` (the export's example inputs when None) in the order of the graph's inputs."""
    if args is None:
        if exported.example_inputs is None:
            return []
        args, kwargs = exported.example_inputs
    spec = exported.call_spec.in_spec
    return list(fx_pytree.tree_flatten_spec((tuple(args), dict(kwargs or {})), spec))


def dynamic_dims(exported: Any, inputs: Sequence[Any]) -> list[DynamicDim]:
    """The user inputs' dims whose size is symbolic in the exported graph."""
    user_inputs = set(exported.graph_signature.user_inputs)
    placeholders = [node for node in exported.graph.nodes if node.op == "placeholder" and node.name in user_inputs]
    ranges = {str(symbol): bound for symbol, bound in exported.range_constraints.items()}
    dims: list[DynamicDim] = []
    for position, (node, value) in enumerate(zip(placeholders, inputs)):
        fake = node.meta.get("val")
        if not isinstance(fake, torch.Tensor) or not isinstance(value, torch.Tensor):
            continue
        dims += specialised_dims(node, position, value)
        for dim, size in enumerate(fake.shape):
            if isinstance(size, torch.SymInt) and str(size) in ranges:
                bound = ranges[str(size)]
                upper = int(bound.upper) if bound.upper.is_finite else None  # type: ignore[union-attr]
                dims.append(DynamicDim(position, dim, int(value.shape[dim]), int(bound.lower), upper, str(size),
                                       dim_name(size)))
    return dims


def specialised_dims(node: fx.Node, position: int, value: torch.Tensor) -> list[DynamicDim]:
    """The dims of input ``node`` the user marked dynamic (the export made them a symbol) that the
    export then specialised to their example size (``Dim.AUTO`` lets it, silently: pytorch#150364):
    the symbol replaced by a constant in the export's ShapeEnv."""
    fake = node.meta.get("val")
    env = getattr(getattr(fake, "fake_mode", None), "shape_env", None)
    if env is None or not isinstance(fake, torch.Tensor):
        return []
    sources = {_source_name(source): symbol for symbol, found in env.var_to_sources.items() for source in found}
    dims = []
    for dim, size in enumerate(fake.shape):
        symbol = sources.get(f"L['{node.name}'].size()[{dim}]")
        fixed = env.replacements.get(symbol) if symbol is not None else None
        if fixed is not None and getattr(fixed, "is_number", False):
            dims.append(DynamicDim(position, dim, int(value.shape[dim]), 0, None, str(symbol), specialised=True))
    return dims


def dim_name(size: Any) -> str | None:
    """The name the user gave a symbolic size (``Dim("batch")``): the export's ShapeEnv maps the
    symbol's source (``L['x'].size()[0]``) to it. None when it keeps none (``Dim.AUTO``, a derived dim)."""
    env = getattr(getattr(size, "node", None), "shape_env", None)
    names = getattr(env, "source_name_to_debug_name", None) or {}
    for source in (getattr(env, "var_to_sources", None) or {}).get(getattr(size.node, "expr", None), []):
        if _source_name(source) in names:
            return str(names[_source_name(source)])
    return None


def _source_name(source: Any) -> str:
    """A ShapeEnv source's text (``L['x'].size()[0]``): ``name`` is a property in 2.13, called where it is a method."""
    return str(source.name() if callable(source.name) else source.name)


def resized_inputs(inputs: Sequence[Any], dims: Sequence[DynamicDim], sizes: dict[str, int],
                   seed: int = 0) -> list[Any]:
    """Copies of ``inputs`` with every dynamic dim of symbol ``s`` at ``sizes[s]``: the example
    values repeated along that dim (cut where smaller), plus a small deterministic perturbation of
    floating values so the new rows are not copies of old ones."""
    generator = torch.Generator().manual_seed(seed)
    resized = list(inputs)
    for dim in dims:
        value, size = resized[dim.input], sizes.get(dim.name)
        if size is None:
            continue
        repeats = -(-size // value.shape[dim.dim])
        value = torch.cat([value] * repeats, dim=dim.dim).narrow(dim.dim, 0, size).contiguous()
        resized[dim.input] = value
    for position, value in enumerate(resized):
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value is not inputs[position]:
            noise = torch.randn(value.shape, generator=generator).to(value.dtype) * 0.01
            resized[position] = value + noise * value.abs().mean()
    return resized
