"""Runs graphs three ways: eager in the model's dtype, eager in fp64, and Inductor.

This module owns every Inductor compile the engine makes. Compiles go through
``torch._inductor.compile_fx.compile_fx`` (the entry point ``torch.compile(backend="inductor")``
uses, so decompositions, joint-graph and post-grad passes all run) with a counting
``inner_compile`` argument: no monkey-patching.
"""
from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch
import torch.fx as fx
from torch._inductor.compile_fx import compile_fx, compile_fx_inner

from .fx_eval import clone_value, interpret, run_graph, to_fp64

__all__ = ["Compiler", "interpret", "run_compiled", "run_graph", "to_fp64"]

log = logging.getLogger(__name__)

@dataclass
class Compiler:
    """Compiles graphs with Inductor and counts every inner compile it triggers.

    ``config_patches`` and ``decompositions`` are passed to ``compile_fx`` as they are, so a
    strategy can compile a candidate with a subsystem disabled without touching global state.
    """

    compiles: int = 0
    seconds: float = 0.0
    history: list[str] = field(default_factory=list)

    def compile(
        self,
        graph_module: fx.GraphModule,
        example_inputs: Sequence[Any],
        *,
        label: str = "",
        config_patches: dict[str, Any] | None = None,
        decompositions: dict[Any, Callable[..., Any]] | None = None,
    ) -> Callable[..., Any]:
        import time

        def counting_inner_compile(*args: Any, **kwargs: Any) -> Any:
            self.compiles += 1
            self.history.append(label)
            return compile_fx_inner(*args, **kwargs)

        start = time.perf_counter()
        try:
            compiled = compile_fx(
                copy.deepcopy(graph_module),
                list(example_inputs),
                inner_compile=counting_inner_compile,
                config_patches=config_patches,
                decompositions=decompositions,
            )
        finally:
            self.seconds += time.perf_counter() - start
        return compiled


def run_compiled(compiled: Callable[..., Any], inputs: Sequence[Any]) -> list[Any]:
    with torch.no_grad():
        outputs = compiled(*[clone_value(v) for v in inputs])
    if isinstance(outputs, (tuple, list)):
        return [clone_value(v) for v in outputs]
    return [clone_value(outputs)]
