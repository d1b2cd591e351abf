"""A size sweep: one symbolic compile of a subgraph, run at many values of one symbolic size.

The compiled code takes its sizes from its inputs, so one compile judges every size: for each
size the captured graph's real inputs are resized along the symbol's dims (their data tiled, see
:func:`~bisect_engine.verdict.shapes.resized_inputs`), eager recomputes every node there, and the
subgraph's compiled outputs on those values are judged by the same rule as everywhere else. A size
where eager itself cannot run (an index past a table) is ``invalid``: neither failing nor passing.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any

import torch

from ..search import stop_if_out_of_memory
from .compare import Outcome
from .compiler import Compiler, run_compiled
from .graphs import Subgraph, reference_inputs
from .oracle import GraphContext, SubgraphVerdict
from .shapes import bind_symbols, resized_inputs

log = logging.getLogger(__name__)


def context_at(context: GraphContext, symbol: str, size: int) -> GraphContext:
    """The captured graph with ``symbol`` set to ``size``, every node's eager value recomputed."""
    captured = context.captured
    signature = captured.shape_signature
    if signature is None:
        raise ValueError(f"{captured.name} has no symbolic size")
    values = {**bind_symbols(signature, captured.inputs), symbol: size}
    resized = dataclasses.replace(captured, name=captured.name, inputs=resized_inputs(signature, captured.inputs, values),
                                  later_inputs=[])
    return GraphContext.from_captured(resized, context.oracle)


def judge_sizes(context: GraphContext, subgraph: Subgraph, compiler: Compiler, symbol: str, sizes: tuple[int, ...],
                *, label: str, compiled: Any = None) -> tuple[SubgraphVerdict, Any]:
    """The subgraph compiled once (or ``compiled``, from an earlier sweep), run at each size;
    returns the verdict (``sizes``: each size's outcome) and the compiled callable for reuse."""
    if compiled is None:
        try:
            compiled = compiler.compile(subgraph.graph_module, reference_inputs(subgraph, context.eager_values), label=label)
        except Exception as error:  # a crash verdict (a budget cut is no Exception: it goes on)
            stop_if_out_of_memory(error, "compiling a graph at another size")
            return SubgraphVerdict(Outcome.CRASH, error=f"{type(error).__name__}: {error}"), None
    outcomes = []
    for size in sizes:
        try:
            at_size = context_at(context, symbol, size)
            inputs = reference_inputs(subgraph, at_size.eager_values)
        except Exception as error:  # noqa: BLE001 - eager cannot run there: not a size to judge
            stop_if_out_of_memory(error, "running eager at another size")
            log.debug("%s=%d: eager does not run (%s)", symbol, size, error)
            outcomes.append((size, "invalid"))
            continue
        try:
            torch.manual_seed(context.seed)
            outputs = run_compiled(compiled, inputs)
        except Exception as error:  # noqa: BLE001 - the compiled code fails at this size
            stop_if_out_of_memory(error, "running the compiled code at another size")
            log.debug("%s=%d: compiled code raised %s", symbol, size, error)
            outcomes.append((size, Outcome.CRASH.value))
            continue
        outcomes.append((size, at_size._verdict(subgraph, inputs, outputs, own_inputs=False).outcome.value))
    failing = any(outcome in ("mismatch", "crash") for _, outcome in outcomes)
    return SubgraphVerdict(Outcome.MISMATCH if failing else Outcome.MATCH, sizes=tuple(outcomes)), compiled
