"""The user's ``torch._inductor.config.freezing`` honoured in every copy we compile (issue 24 item 3).

Under freezing (no grad) the user's compile folds the parameters into constants; max-autotune's
C++ GEMM template is chosen only for a constant weight. The capture records which placeholders
were frozen, every cut and per-node copy holds them (and what is computed from them alone) as
parameters of the module compiled, and the repro does the same. No max-autotune compile here: the
corpus pair ``repro_cases/models/max_autotune_cpp_gemm_template.py`` / ``max_autotune_frozen_clean.py``
(``BISECT_CORPUS=all``) runs the template end to end.
"""
from __future__ import annotations

import functools

import torch
import torch._inductor.config as inductor_config
from torch import nn

from bisect_engine.load.capture import capture
from bisect_engine.output.repro import render, repro_spec, with_judgement
from bisect_engine.verdict.compiler import Compiler
from bisect_engine.verdict.frozen import FROZEN_PREFIX, frozen_copy, kept_inputs
from bisect_engine.verdict.graphs import plan_copies
from bisect_engine.verdict.oracle import GraphContext


class TwoLinear(nn.Module):
    """Two linears of one shape with different weights: one node signature without freezing."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


@functools.lru_cache(maxsize=None)  # one capture each way; no test changes what it is given
def _captured(freezing: bool) -> GraphContext:
    torch.manual_seed(0)
    model = TwoLinear().eval()
    with inductor_config.patch(freezing=freezing):
        graphs, _ = capture(model, (torch.randn(4, 8),))
    return GraphContext.from_captured(graphs[0])


def test_without_freezing_nothing_is_constant() -> None:
    context = _captured(freezing=False)
    assert context.captured.frozen == ()
    assert context.constants == frozenset()
    assert context.constant_positions(context.subgraph(["addmm"]).input_names) == []


def test_freezing_records_the_parameters_and_what_is_computed_from_them() -> None:
    context = _captured(freezing=True)
    placeholders = context.view.placeholder_names()
    assert context.captured.frozen == tuple(placeholders[:4])  # AOT's params first: a.weight, a.bias, b.weight, b.bias
    transposes = {n.name for n in context.view.compute_nodes if n.target is torch.ops.aten.t.default}
    assert transposes and transposes <= context.constants  # a weight's transpose: freezing folds it
    assert placeholders[-1] not in context.constants  # the input stays an input
    assert "addmm" not in context.constants and "relu" not in context.constants
    cut = context.subgraph(["addmm"], isolate=True)
    positions = context.constant_positions(cut.input_names)
    assert [cut.input_names[i] for i in positions] == [n for n in cut.input_names if n != "relu" and n in context.constants]
    assert len(positions) == 2  # the bias and the transposed weight, not the activation


def test_nodes_reading_different_frozen_weights_get_copies_of_their_own() -> None:
    frozen, plain = _captured(freezing=True), _captured(freezing=False)
    addmms = [n.name for n in frozen.view.compute_nodes if n.target is torch.ops.aten.addmm.default]
    assert len(plan_copies(plain.view, addmms, plain.eager_values).members) == 1  # one signature
    plan = plan_copies(frozen.view, addmms, frozen.eager_values, constants=frozen.constants)
    assert len(plan.members) == 2  # a copy with a's weights baked in cannot judge b


def test_frozen_copy_turns_placeholders_into_parameters() -> None:
    context = _captured(freezing=True)
    cut = context.subgraph(["addmm"], isolate=True)
    inputs = [context.eager_values[name] for name in cut.input_names]
    positions = context.constant_positions(cut.input_names)
    copy = frozen_copy(cut.graph_module, positions, inputs)
    placeholders = [n for n in copy.graph.nodes if n.op == "placeholder"]
    attributes = [n for n in copy.graph.nodes if n.op == "get_attr"]
    assert len(placeholders) == len(inputs) - len(positions) and len(attributes) == len(positions)
    assert all(str(n.target).startswith(FROZEN_PREFIX) for n in attributes)
    assert {name for name, _ in copy.named_parameters()} == {str(n.target) for n in attributes}
    assert [n for n in cut.graph_module.graph.nodes if n.op == "placeholder"].__len__() == len(inputs)  # untouched
    kept = kept_inputs(len(inputs), positions)
    torch.testing.assert_close(copy(*[inputs[i] for i in kept])[0], context.eager_values["addmm"])


def test_a_frozen_compile_folds_the_weights_and_takes_every_input() -> None:
    """One default-mode Inductor compile: the frozen copy's weights are constants of the compiled
    code (no argument of its call), the callable still takes every input, and it agrees."""
    context = _captured(freezing=True)
    cut = context.subgraph(["addmm"], isolate=True)
    inputs = [context.eager_values[name] for name in cut.input_names]
    code: list = []
    with inductor_config.patch(freezing=True):
        compiled = Compiler().compile(cut.graph_module, inputs, constants=context.constant_positions(cut.input_names),
                                      output_code=code)
    torch.testing.assert_close(compiled(*inputs)[0], context.eager_values["addmm"])
    assert code and "_frozen_param" in code[0].source  # Inductor's name for a constant freezing made
    call = code[0].source.split("def call(")[1]
    unpacked = next(line for line in call.splitlines() if line.strip().endswith("= args"))
    assert unpacked.strip().count(",") == 1  # "arg2_1, = args": the activation alone


def test_the_repro_holds_the_frozen_inputs_as_constants() -> None:
    context = _captured(freezing=True)
    cut = context.subgraph(["addmm"], isolate=True)
    spec = with_judgement(repro_spec(cut, context.eager_values, title="t", finding=[], environment={},
                                     config={"freezing": True}, unrenderable_config=[]), context, cut)
    assert spec.constants == tuple(context.constant_positions(cut.input_names))
    script = render(spec).script
    assert f"CONSTANT_INPUTS = {list(spec.constants)}" in script and "def frozen_copy(" in script
    plain = _captured(freezing=False)
    cut = plain.subgraph(["addmm"], isolate=True)
    script = render(with_judgement(repro_spec(cut, plain.eager_values, title="t", finding=[], environment={},
                                              config={}, unrenderable_config=[]), plain, cut)).script
    assert "CONSTANT_INPUTS = " not in script and "def frozen_copy(" not in script


def test_freezing_given_only_in_options_freezes_nothing_so_we_do_not_either() -> None:
    """``torch.compile(options={"freezing": True})`` patches the config after Dynamo traced the
    parameters as inputs: torch's own compile freezes nothing (checked here, one small compile each
    way), so our global patch of the user's options leaves the key out."""
    from torch._inductor.utils import run_and_get_code

    from bisect_engine.api import without_dynamo_only_keys

    assert without_dynamo_only_keys({"freezing": True, "max_autotune": True}) == {"max_autotune": True}
    model = nn.Linear(8, 8).eval()
    frozen = []
    for options, global_freezing in (({"freezing": True}, False), ({}, True)):
        torch._dynamo.reset()
        with inductor_config.patch(freezing=global_freezing, fx_graph_cache=False), torch.no_grad():
            _, code = run_and_get_code(torch.compile(model, options=options), torch.randn(4, 8))
        frozen.append("_frozen_param" in code[0])
    torch._dynamo.reset()
    assert frozen == [False, True]
