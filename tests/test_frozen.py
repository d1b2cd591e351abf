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
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
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


class ArangeTimesConstant(nn.Module):
    """pytorch#175966's function: the int64 constant is made inside the compiled function."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.arange(0, 11, device=x.device, dtype=torch.int64) * torch.tensor([int(1e9)], dtype=torch.int64)


@functools.lru_cache(maxsize=None)
def _arange_times_constant() -> GraphContext:
    graphs, _ = capture(ArangeTimesConstant(), (torch.zeros(1),))
    return GraphContext.from_captured(graphs[0])


def test_a_tensor_made_inside_the_compiled_function_is_a_constant_of_every_cut() -> None:
    """AOT Autograd traces ``torch.tensor([1e9])`` to a ``get_attr`` attribute, which Inductor lowers
    as a constant (and inlines into the arange's index arithmetic, where it wraps at 2**31). Before,
    every cut took it as an input: the whole graph compiled right alone, and the run ended
    ``not_reproducible``. Now it and what is computed from it alone are constants, compiled as
    plain attributes (no freezing: not parameters)."""
    context = _arange_times_constant()
    attribute = next(n.name for n in context.captured.graph_module.graph.nodes if n.op == "get_attr")
    assert context.captured.frozen == () and not context.constants_frozen
    assert attribute in context.constants and "lift_fresh_copy" in context.constants
    assert "mul" not in context.constants and "arange" not in context.constants
    whole = context.whole()
    assert [whole.input_names[i] for i in context.constant_positions(whole.input_names)] == [attribute]
    cut = context.subgraph(["mul"], isolate=True)
    assert [cut.input_names[i] for i in context.constant_positions(cut.input_names)] == ["lift_fresh_copy"]


def test_graph_constants_reach_inductor_as_constants_not_inputs() -> None:
    """What Compiler.compile hands ``compile_fx`` (a copy of the frozen copy): the constant stays a
    plain attribute through ``GraphModule``'s copy (which makes every tensor attribute a buffer, and
    AOT Autograd lifts buffers as inputs), so the graph Inductor lowers reads it through ``get_attr``.
    No Inductor compile: the inner compile only records the graph."""
    import copy as copying

    from torch._inductor.compile_fx import compile_fx

    from bisect_engine.verdict.frozen import CONSTANT_PREFIX, graph_constants_kept

    context = _arange_times_constant()
    whole = context.whole()
    inputs = [context.eager_values[name] for name in whole.input_names]
    positions = context.constant_positions(whole.input_names)
    frozen = frozen_copy(whole.graph_module, positions, inputs, parameters=False)
    assert not list(frozen.named_parameters()) and not list(frozen.named_buffers())
    assert list(copying.deepcopy(frozen).named_buffers())  # the copy's own rule, which the next line undoes
    kept = graph_constants_kept(copying.deepcopy(frozen))
    assert not list(kept.named_buffers()) and any(k.startswith(CONSTANT_PREFIX) for k in vars(kept))
    lowered: list[torch.fx.GraphModule] = []

    def record(graph_module: torch.fx.GraphModule, _inputs: Any, **_kwargs: Any) -> Any:
        lowered.append(graph_module)
        return lambda args: [torch.zeros(11, dtype=torch.int64)]

    with torch.no_grad(), inductor_config.patch(fx_graph_cache=False):
        compile_fx(kept, [inputs[i] for i in kept_inputs(len(inputs), positions)], inner_compile=record)
    ops = [n.op for n in lowered[0].graph.nodes]
    assert "placeholder" not in ops and "get_attr" in ops  # before: the constant was the graph's one input


def test_the_repro_holds_graph_constants_as_plain_attributes() -> None:
    context = _arange_times_constant()
    whole = context.whole()
    spec = with_judgement(repro_spec(whole, context.eager_values, title="t", finding=[], environment={},
                                     config={}, unrenderable_config=[]), context, whole)
    assert spec.constants == (0,) and not spec.constants_frozen
    script = render(spec).script
    assert "CONSTANTS_FROZEN = False" in script and "def graph_constants_kept(" in script


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


def test_script_mode_records_the_frozen_parameters_of_a_graph_the_program_compiled() -> None:
    """Script mode re-runs a Dynamo graph the program compiled outside any Dynamo compile, so no
    tracing context holds AOT's ``params_flat``: under the program's ``freezing`` the parameters the
    Dynamo graph holds (freezing keeps them attributes) are still recorded as frozen. Before, none
    were: our copies then compiled ``sin(phase)`` that the program's compile folds, and blamed it."""
    from bisect_engine.load.capture import capture_graph_module

    torch.manual_seed(0)
    model = TwoLinear().eval()
    graphs: list[tuple[torch.fx.GraphModule, list[torch.Tensor]]] = []

    def keep(graph_module: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> object:
        graphs.append((graph_module, list(example_inputs)))
        return graph_module.forward

    torch._dynamo.reset()
    with inductor_config.patch(freezing=True), torch.no_grad():
        torch.compile(model, backend=keep)(torch.randn(4, 8))
        ((graph_module, inputs),) = graphs
        (captured,) = capture_graph_module(graph_module, inputs)
    torch._dynamo.reset()
    placeholders = [n.name for n in captured.graph_module.graph.nodes if n.op == "placeholder"]
    assert captured.frozen == tuple(placeholders[:4]) and len(placeholders) == 5  # a, b's weights and biases; x


SCRIPT = Path(__file__).parent / "scripts" / "frozen_mlp.py"


def _script_run(tmp_path: Path, planted: bool) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    from conftest import planting_path, seeded_cache_dir

    env = {k: v for k, v in os.environ.items() if not k.startswith("BISECT_ACCURACY_")}
    # fresh: a planted lowering is not in its graph's key (the kernels are the suite's: keyed by their source)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(seeded_cache_dir(tmp_path / "inductor-cache"))
    if planted:  # a wrong aten.sin lowering in every fresh process (the repro's verification too)
        env["PYTHONPATH"] = planting_path(PLANT, tmp_path / "site", env)
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "bisect_engine.cli", "run", "--out", str(out), "--verify-runs", "1",
                          str(SCRIPT)], env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    return run, json.loads((out / "report.json").read_text())


PLANT = Path(__file__).parent.parent / "repro_cases" / "models" / "moe_cond_sin_lowering.py"


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all",
                    reason="a script run (~40 s here): BISECT_CORPUS=all; make test covers its capture with "
                           "test_script_mode_records_the_frozen_parameters_of_a_graph_the_program_compiled")
def test_a_script_compiling_under_freezing_is_clean(tmp_path: Path) -> None:
    run, report = _script_run(tmp_path, planted=False)
    assert run.returncode == 0, run.stderr
    assert report["verdict"] == "clean" and report["script"]["calls_checked"] >= 1


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all", reason="a planted run (~3 min here): BISECT_CORPUS=all")
def test_a_script_compiling_under_freezing_names_the_sin_its_compile_lowers_not_the_one_it_folds(tmp_path: Path) -> None:
    run, report = _script_run(tmp_path, planted=True)
    assert run.returncode == 1, run.stderr
    line = next(i for i, text in enumerate(SCRIPT.read_text().splitlines(), start=1) if "# ACTIVATION" in text)
    culprit = report["culprit"]
    assert (report["verdict"], culprit["op"], culprit["graph"]) == ("divergent", "aten.sin.default", "forward_0")
    assert culprit["source"] == f"frozen_mlp.py:{line}", culprit  # not sin(phase), which freezing folds
    assert not report["findings"] or all(f.get("source") != f"frozen_mlp.py:{line - 1}" for f in report["findings"])
    assert report["repro"]["status"] == "REPRODUCED", report["repro"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("BISECT_ACCURACY_")}
    from conftest import seeded_cache_dir

    env["TORCHINDUCTOR_CACHE_DIR"] = str(seeded_cache_dir(tmp_path / "clean-cache"))
    without = subprocess.run([sys.executable, "repro.py"], cwd=tmp_path / "out", capture_output=True, text=True,
                             timeout=600, env=env)  # no plant in that process
    assert without.returncode == 0, without.stdout + without.stderr
