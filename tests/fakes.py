"""Fakes shared by the tests: a compiler that runs graphs eagerly and plants faults where a real
buggy compiler would have them (no Inductor, no C++ build: milliseconds per compile)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
import torch.fx as fx

from bisect_engine.verdict.compiler import Compiler


def dynamo_graphs(*calls: tuple[Callable[..., Any], tuple[Any, ...]]) -> list[fx.GraphModule]:
    """The Dynamo graph of each ``(function, arguments)``, compiled whole (``fullgraph``) by a backend
    that keeps it and runs it as it is; Dynamo reset before and after."""
    graphs: list[fx.GraphModule] = []

    def keep(graph_module: fx.GraphModule, _inputs: Any) -> Any:
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()
    try:
        for function, arguments in calls:
            torch.compile(function, backend=keep, fullgraph=True)(*arguments)
    finally:
        torch._dynamo.reset()
    return graphs


def kernel(node: fx.Node) -> tuple[Any, ...]:
    """What a real compiler's code for a lone node depends on: its op and its input shapes."""
    shapes = fx.node.map_arg(node.args, lambda a: tuple(getattr(a.meta.get("val", a.meta.get("example_value")), "shape", ())))
    return (node.target, repr(shapes))


class FakeCompiler(Compiler):
    """'Compiles' by running eagerly and corrupts (+1) what a buggy compiler would get wrong.

    A chain of one node is a per-node codegen bug: every compiled node with that node's kernel
    (op, input shapes, constants) comes out wrong, as real codegen would, wherever it sits. A
    longer chain is a fusion bug: its last node comes out wrong exactly when the whole chain is
    in the compiled graph with each node feeding the next."""

    def __init__(self, chain: tuple[str, ...], kernel: tuple[Any, ...] | None = None, crash: bool = False,
                 fault: Callable[[Any], Any] = lambda value: value + 1.0):
        super().__init__()
        self.chain = chain
        self.kernel = kernel
        self.crash = crash  # the faulty kernel raises at compile time instead of computing +1
        self.fault = fault  # what the faulty kernel computes from the right value (default: +1)

    def compile(self, graph_module: fx.GraphModule, example_inputs: Sequence[Any], *, fallbacks: Sequence[Any] = (),
                aten_graph: bool = True, **_: Any) -> Callable[..., Any]:
        """A planted node fault is a lowering bug: forcing its op to the aten fallback fixes it.
        Dynamo's torch-level graph (the model-level check's compile) goes through AOT Autograd
        first, as Inductor's own entry point takes it, so the fault is planted in its aten graphs too."""
        self.budget.check(self.compiles)
        self.compiles += 1  # one compile, forward and backward at once
        self.by_stage[self.stage] = self.by_stage.get(self.stage, 0) + 1
        if not aten_graph:
            from torch._functorch.aot_autograd import aot_module_simplified

            def aten(graph: fx.GraphModule, example: Sequence[Any]) -> Callable[..., Any]:
                return self._planted(graph, fallbacks)

            return aot_module_simplified(graph_module, list(example_inputs), fw_compiler=aten, bw_compiler=aten)
        return self._planted(graph_module, fallbacks)

    def _planted(self, graph_module: fx.GraphModule, fallbacks: Sequence[Any]) -> Callable[..., Any]:
        nodes = {n.name: n for n in graph_module.graph.nodes if n.op == "call_function"}
        if self.kernel is not None:
            faulty = {n for n in nodes.values() if kernel(n) == self.kernel and n.target not in fallbacks}
        else:
            present = all(name in nodes for name in self.chain) and all(
                nodes[a] in nodes[b].all_input_nodes for a, b in zip(self.chain, self.chain[1:])
            )
            faulty = {nodes[self.chain[-1]]} if present else set()
        if self.crash and faulty:
            raise RuntimeError("planted compile error\nsecond line of the message")

        fault = self.fault

        class Corrupting(fx.Interpreter):
            def run_node(self, node: fx.Node) -> Any:
                result = super().run_node(node)
                return fault(result) if node in faulty else result

        return lambda *args: Corrupting(graph_module).run(*args)


