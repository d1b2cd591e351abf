"""The pipeline's orchestration with a fake compiler (no Inductor): which candidates it proposes,
in what order, what the budget cuts, and what the report then says. The model is captured for
real (Dynamo and AOT Autograd), so the aten graphs are the ones a user's run gives."""
from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

from bisect_engine.load.capture import capture
from bisect_engine.load.model_file import ModelSpec
from bisect_engine.localise.options import EngineOptions
from bisect_engine.localise.drive import Driver, Step
from bisect_engine.localise.graph_steps import CULPRIT_FIRST_PLAN, GRAPH_PLAN
from bisect_engine.localise.pipeline import RunResult, run_captured
from bisect_engine.localise.records import RunFinding
from bisect_engine.localise.run_steps import FOLLOW_UP, RUN_PLAN
from bisect_engine.output.report import build_report
from bisect_engine.output.summary import summary
from bisect_engine.progress import Progress
from bisect_engine.search import Budget, BudgetExhausted, Search
from bisect_engine.verdict.compiler import Compiler
from fakes import FakeCompiler, kernel


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.down(torch.relu(self.up(x))) + x)


@pytest.fixture(scope="module")
def spec() -> ModelSpec:
    torch.manual_seed(0)
    model = Block().eval()
    inputs = (torch.randn(4, 8),)
    return ModelSpec(Path("block.py"), model, inputs, None, None)


@pytest.fixture(scope="module")
def captured(spec: ModelSpec) -> list[Any]:
    with torch.no_grad():
        graphs, _ = capture(spec.model, spec.inputs)
    return graphs


def _relu_kernel(captured: list[Any]) -> tuple[Any, ...]:
    graph = captured[0].graph_module.graph
    return kernel(next(n for n in graph.nodes if n.target is torch.ops.aten.relu.default))


def _run(spec: ModelSpec, captured: list[Any], compiler: FakeCompiler, **options: Any) -> tuple[RunResult, dict[str, Any]]:
    result = run_captured(spec, captured, EngineOptions(**options), Progress(enabled=False), compiler=compiler)
    return result, build_report(result)


def test_an_isolated_op_bug_costs_two_localisation_compiles_and_names_the_lowering(spec, captured) -> None:
    # the program is known to diverge (script mode, a scan's failing batch): the per-node check first
    compiler = FakeCompiler(("relu",), _relu_kernel(captured))
    result, report = _run(spec, captured, compiler, divergence_known=True)
    assert report["verdict"] == "divergent"
    assert (report["culprit"]["op"], report["culprit"]["kind"], report["culprit"]["confirmed_alone"]) == \
        ("aten.relu.default", "node", True)
    # per-node check, the culprit alone; then the subsystem stage on the culprit only
    assert compiler.by_stage["localise"] == 2
    assert {k: report["subsystem"][k] for k in ("kind", "name")} == {"kind": "lowering", "name": "aten.relu.default"}
    assert report["budget"] is None and report["stats"]["compiles"] == compiler.compiles
    # the whole graph was not compiled: the culprit's value, replayed eagerly, fails the outputs
    assert report["graphs"][0]["whole"] == "mismatch" and report["graphs"][0]["whole_by"] == "eager_injection"
    assert [(n["graph"], n["check"]) for n in report["not_checked"]] == [("forward_0", "whole_graph_compile")]
    assert "not compiled: forward_0 as a whole" in summary(report)


@pytest.mark.parametrize("order", [{"culprit_first": False}, {}], ids=["asked", "small-graph-unknown-outcome"])
def test_whole_graph_first_costs_three_compiles_with_the_same_answer(spec, captured, order: dict[str, Any]) -> None:
    # asked for, or chosen: a model file (outcome unknown) whose graph compiles whole no dearer
    # than its per-node check; the wrong op then costs one compile more than with the node check first
    compiler = FakeCompiler(("relu",), _relu_kernel(captured))
    result, report = _run(spec, captured, compiler, **order)
    assert (report["verdict"], report["culprit"]["op"], report["culprit"]["confirmed_alone"]) == \
        ("divergent", "aten.relu.default", True)
    assert compiler.by_stage["localise"] == 3  # whole graph, per-node check, the culprit alone
    assert report["graphs"][0]["whole_by"] == "compile" and report["not_checked"] == []


def test_without_a_culprit_alone_the_whole_graph_is_compiled_and_decides(spec, captured) -> None:
    # a fusion bug (two nodes together): no node is wrong alone, so the whole graph is compiled
    # after the per-node check (whose verdict the search's cache then serves again) and decides
    compiler = FakeCompiler(("addmm", "relu"))
    result, report = _run(spec, captured, compiler, stop_after="localise")
    assert report["graphs"][0]["whole_by"] == "compile" and report["not_checked"] == []
    assert report["graphs"][0]["whole"] == "mismatch" and report["culprit"]["kind"] == "window"


def test_a_clean_graph_costs_one_compile_then_the_model_level_check(spec, captured) -> None:
    compiler = FakeCompiler(("nothing",))
    result, report = _run(spec, captured, compiler)
    assert report["verdict"] == "clean" and report["culprit"] is None
    assert compiler.by_stage == {"localise": 1, "model_check": 1}
    assert report["stats"]["compiles_by_stage"] == {"localise": 1, "model_check": 1}
    assert report["model_level"] == "match"
    # judged as before: by the whole graph's compile (the per-node check's verdict is not reported)
    assert report["graphs"][0]["whole_by"] == "compile" and report["graphs"][0]["checked_nodes"] == 0


@pytest.fixture(scope="module")
def training() -> tuple[ModelSpec, list[Any]]:
    """A training step of ``Block`` (forward and backward graphs), captured once."""
    torch.manual_seed(0)
    spec = ModelSpec(Path("block.py"), Block(), (torch.randn(4, 8),), lambda out: out.sum(), None)
    graphs, _ = capture(spec.model, spec.inputs, spec.loss_fn)
    return spec, graphs


def test_a_clean_training_model_costs_one_localisation_compile_per_graph(training) -> None:
    # forward and backward, the outcome unknown (a model file): each graph compiled whole, once
    training, graphs = training
    compiler = FakeCompiler(("nothing",))
    result, report = _run(training, graphs, compiler)
    assert report["verdict"] == "clean" and report["stats"]["graphs_captured"] == len(graphs) == 2
    assert report["stats"]["compiles_by_stage"]["localise"] == len(graphs)
    assert [g["whole_by"] for g in report["graphs"]] == ["compile", "compile"]


class Stack(torch.nn.Module):
    """Sixteen identical layers: the per-node check compiles each distinct node once (three
    copies), the whole graph every one of its nodes."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def test_a_deep_stack_of_identical_layers_keeps_the_per_node_check_first() -> None:
    torch.manual_seed(0)
    stack = ModelSpec(Path("stack.py"), Stack().eval(), (torch.randn(4, 8),), None, None)
    with torch.no_grad():
        graphs, _ = capture(stack.model, stack.inputs)
    relu = next(n for n in graphs[0].graph_module.graph.nodes if n.target is torch.ops.aten.relu.default)
    compiler = FakeCompiler(("relu",), kernel(relu))
    result, report = _run(stack, graphs, compiler, stop_after="localise")
    # the whole compile is the dear one here: an isolated-op bug still costs two, the whole skipped;
    # then the upstream gate's one model-level compile (its outputs fail: the headline stands)
    assert (report["verdict"], report["culprit"]["op"]) == ("divergent", "aten.relu.default")
    assert compiler.by_stage == {"localise": 2, "model_check": 1} and report["graphs"][0]["whole_by"] == "eager_injection"
    compiler = FakeCompiler(("nothing",))
    result, report = _run(stack, graphs, compiler)
    assert report["verdict"] == "clean" and compiler.by_stage == {"localise": 2, "model_check": 1}


@pytest.mark.parametrize(("rows", "expected"), [(4, False), (32768, True)])
def test_a_deep_stack_of_large_values_is_compiled_whole_first(rows: int, expected: bool) -> None:
    # judging every node alone reads every node's value: at 8 M elements (32 nodes of 32768 x 8)
    # that costs more than the per-node check saves in compiles, so the whole graph goes first
    from bisect_engine.localise.order import whole_first
    from bisect_engine.verdict.oracle import GraphContext
    torch.manual_seed(0)
    with torch.no_grad():
        graphs, _ = capture(Stack().eval(), (torch.randn(rows, 8),))
    assert whole_first(GraphContext.from_captured(graphs[0]), EngineOptions()) is expected
    assert whole_first(GraphContext.from_captured(graphs[0]), EngineOptions(divergence_known=True)) is False


@pytest.mark.parametrize("limit", [1, 2, 3, 4])
def test_max_compiles_caps_every_stage_and_the_report_says_which(spec, captured, limit: int) -> None:
    compiler = FakeCompiler(("relu",), _relu_kernel(captured))
    compiler.budget = Budget(max_compiles=limit)
    result, report = _run(spec, captured, compiler, max_compiles=limit, divergence_known=True)
    assert compiler.compiles == limit
    stage = "localise" if limit < 2 else "subsystem"  # the refused compile is the next stage's
    assert report["budget"] == (f"--max-compiles {limit} reached ({limit} compiles) during the {stage} stage; "
                                "raise the limit for a complete answer")
    # the per-node check found the culprit on the first compile, and its value replayed eagerly
    # makes the outputs diverge: never clean, whatever the budget cut
    assert report["verdict"] == "divergent"
    assert report["culprit"]["op"] == "aten.relu.default"
    assert report["culprit"]["confirmed_alone"] is (True if limit >= 2 else None)
    assert report["subsystem"] is None
    assert "search stopped: --max-compiles" in summary(report)


class CrashesEverywhere(FakeCompiler):
    """The relu kernel raises in every compile that holds relu, the user's torch.compile of the
    model (a Dynamo graph calling torch.relu) included: a real compiler crash."""

    def compile(self, graph_module: Any, example_inputs: Any, **options: Any) -> Any:
        if any(node.target in (torch.relu, torch.nn.functional.relu) for node in graph_module.graph.nodes):
            self.compiles += 1
            raise RuntimeError("planted compile error\nsecond line of the message")
        return super().compile(graph_module, example_inputs, **options)


def test_a_crash_is_a_finding_with_its_error(spec, captured) -> None:
    compiler = CrashesEverywhere(("relu",), _relu_kernel(captured), crash=True)
    result, report = _run(spec, captured, compiler, stop_after="localise")
    assert report["verdict"] == "crash"
    culprit = report["culprit"]
    assert culprit["op"] == "aten.relu.default" and culprit["confirmed_alone"] is True
    assert culprit["crash"] == {"exception": "RuntimeError",
                                "message": "planted compile error\nsecond line of the message"}
    assert report["graphs"][0]["crashed_nodes"][0]["node"] == "relu"
    assert "raised:  RuntimeError: planted compile error" in summary(report)


def test_a_budget_spent_before_any_verdict_is_incomplete_not_clean(spec, captured) -> None:
    compiler = FakeCompiler(("nothing",))
    compiler.budget = Budget(max_compiles=0)
    result, report = _run(spec, captured, compiler, max_compiles=0)
    assert compiler.compiles == 0 and report["verdict"] == "incomplete"


class Masked(torch.nn.Module):
    """relu's value never reaches the output: ``where`` picks ``x`` everywhere."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(torch.where(x > 10.0, torch.relu(x), x))


def test_a_culprit_whose_error_never_reaches_the_outputs_leaves_the_verdict_to_the_whole_graph() -> None:
    spec = ModelSpec(Path("masked.py"), Masked().eval(), (torch.randn(4, 8),), None, None)
    with torch.no_grad():
        graphs, _ = capture(spec.model, spec.inputs)
    relu = next(n for n in graphs[0].graph_module.graph.nodes if n.target is torch.ops.aten.relu.default)
    compiler = FakeCompiler(("relu",), kernel(relu))
    result, report = _run(spec, graphs, compiler)
    # relu is wrong alone, but its value replayed eagerly leaves the outputs as they are: the whole
    # graph is compiled and matches, as it did before the per-node check came first (a small
    # graph: compiled whole first, one compile; with the per-node check first, two)
    assert report["verdict"] == "clean" and report["culprit"] is None
    assert compiler.by_stage == {"localise": 1, "model_check": 1}
    assert report["graphs"][0]["whole_by"] == "compile" and report["not_checked"] == []
    compiler = FakeCompiler(("relu",), kernel(relu))
    result, report = _run(spec, graphs, compiler, divergence_known=True)
    assert report["verdict"] == "clean" and report["culprit"] is None
    assert compiler.by_stage == {"localise": 2, "model_check": 1}
    assert report["graphs"][0]["whole_by"] == "compile" and report["not_checked"] == []


class CrashesAlone(FakeCompiler):
    """Compiles relu wrongly... never: it raises only when relu reads a placeholder (compiled alone,
    as our per-node check cuts it); the whole graph, as the user's compile sees it, compiles."""

    def compile(self, graph_module: Any, example_inputs: Any, **options: Any) -> Any:
        for node in graph_module.graph.nodes:
            if node.target is torch.ops.aten.relu.default and node.args[0].op == "placeholder":
                self.compiles += 1
                raise RuntimeError("planted: relu alone does not compile")
        return super().compile(graph_module, example_inputs, **options)


def test_a_node_that_crashes_only_in_our_cut_is_harness_never_a_crash(spec, captured) -> None:
    result, report = _run(spec, captured, CrashesAlone(("nothing",)), culprit_first=False, oracle="strict")
    assert report["verdict"] == "clean", summary(report)
    (harness,) = report["harness"]
    assert "relu alone" in harness["problem"] and harness["judged"] is True
    assert report["culprit"] is None
    assert "harness: our recompile" in summary(report)


# what torch's CPU allocator raises when an allocation fails (a RuntimeError, not an OutOfMemoryError)
CPU_ALLOCATOR = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried "
                 "to allocate 4503599627370496 bytes. Error code 12 (Cannot allocate memory)")
OUT_OF_MEMORY = {"cuda": lambda: torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                                                         "total capacity of 79.10 GiB of which 1.12 GiB is free."),
                 "cpu-allocator": lambda: RuntimeError(CPU_ALLOCATOR)}


class OutOfMemoryWithRelu(FakeCompiler):
    """Every compile holding relu runs out of memory (the device's allocator while autotuning, or the
    host's): the run's memory, never a crash of the compiler's code."""

    def __init__(self, error: Any) -> None:
        super().__init__(("nothing",))
        self.error = error

    def compile(self, graph_module: Any, example_inputs: Any, **options: Any) -> Any:
        if any(node.target in (torch.ops.aten.relu.default, torch.relu) for node in graph_module.graph.nodes):
            self.compiles += 1
            raise self.error()
        return super().compile(graph_module, example_inputs, **options)


@pytest.mark.parametrize("kind", sorted(OUT_OF_MEMORY))
def test_an_allocation_that_fails_in_our_compile_stops_the_run_for_memory_never_a_crash(spec, captured, kind) -> None:
    result, report = _run(spec, captured, OutOfMemoryWithRelu(OUT_OF_MEMORY[kind]))
    assert report["verdict"] == "incomplete", summary(report)
    assert report["culprit"] is None and report["harness"] == []
    assert report["budget"].startswith("memory: an allocation failed") and "out of memory" in report["budget"].lower() \
        or "can't allocate memory" in report["budget"], report["budget"]
    assert "forward_0" in [n["graph"] for n in report["not_checked"]]


@pytest.fixture
def fp64_tanh_out_of_memory() -> Any:
    """aten.tanh's CPU kernel fails to allocate in fp64 (the fp64 reference does not fit); in the
    model's dtype it computes tanh, for eager and the fake compiler alike."""
    library = torch.library.Library("aten", "IMPL")

    def tanh(x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float64:
            raise RuntimeError(CPU_ALLOCATOR)
        return 2.0 * torch.sigmoid(2.0 * x) - 1.0

    with warnings.catch_warnings():  # "Overriding a previously registered kernel": what it is for
        warnings.simplefilter("ignore", UserWarning)
        library.impl("tanh", tanh, "CPU")
    try:
        yield
    finally:
        library._destroy()


def test_an_fp64_reference_that_does_not_fit_stops_the_run_never_eager_standing_in(spec, captured,
                                                                                    fp64_tanh_out_of_memory) -> None:
    # before: the fp64 run took eager's tanh for the reference (an op "without an fp64 kernel") and
    # the verdict was clean, judged against a reference that was not fp64's
    result, report = _run(spec, captured, FakeCompiler(("nothing",)))
    assert report["verdict"] == "incomplete", summary(report)
    assert report["budget"].startswith("memory: an allocation failed in an op of the fp64 reference run"), report["budget"]
    assert "can't allocate memory" in report["budget"]


def test_what_an_allocation_that_failed_looks_like() -> None:
    from torch._dynamo.exc import BackendCompilerFailed

    from bisect_engine.search import out_of_memory
    for make in OUT_OF_MEMORY.values():
        assert out_of_memory(make())
    assert out_of_memory(MemoryError())
    wrapped = BackendCompilerFailed(lambda *a: None, OUT_OF_MEMORY["cuda"](), None)  # Dynamo wrapping Inductor's
    assert out_of_memory(wrapped)
    try:
        try:
            raise OUT_OF_MEMORY["cpu-allocator"]()
        except RuntimeError as error:
            raise ValueError("converted") from error
    except ValueError as outer:
        assert out_of_memory(outer)
    assert out_of_memory("OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB")  # a worker's report
    from bisect_engine.errors import WorkerDied
    died = WorkerDied("a worker process died (killed, out of memory or crashed) while compiling forward_0")
    for other in (RuntimeError("planted compile error"), ValueError("shapes do not match"), "RuntimeError: bad",
                  died, ValueError("the model ran out of memory"), f"WorkerDied: {died}"):
        assert not out_of_memory(other), other


def test_a_candidate_that_runs_out_of_memory_is_the_search_s_memory_cut() -> None:
    def evaluate(candidate: int) -> int:
        raise OUT_OF_MEMORY["cuda"]()

    search = Search(evaluate)
    with pytest.raises(BudgetExhausted) as cut:
        search.judge(1)
    assert cut.value.reason == "memory" and "CUDA out of memory" in str(cut.value)
    with pytest.raises(ValueError):  # any other error is the caller's to judge
        Search(lambda candidate: int("x")).judge(1)


@pytest.mark.parametrize("faulty, options, step", [
    (("relu",), {"divergence_known": True}, "confirm"),  # per-node check first, the culprit alone
    (("relu",), {"culprit_first": False}, "confirm"),  # whole graph first, then the culprit alone
    (("addmm", "relu"), {"stop_after": "localise"}, "window"),  # no node wrong alone: a window
    (("nothing",), {}, "whole"),  # a clean graph: its whole compile decided it
], ids=["culprit-first", "whole-first", "window", "clean"])
def test_each_graph_says_which_step_of_its_plan_decided_it(spec, captured, faulty, options, step) -> None:
    kernels = _relu_kernel(captured) if faulty == ("relu",) else None
    compiler = FakeCompiler(faulty, kernels) if kernels else FakeCompiler(faulty)
    result, report = _run(spec, captured, compiler, **options)
    assert result.graphs[0].ended_by == report["graphs"][0]["ended_by"] == step


def test_the_findings_are_frozen_records(spec, captured) -> None:
    result, _ = _run(spec, captured, FakeCompiler(("relu",), _relu_kernel(captured)), divergence_known=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.budget = "changed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.graphs[0].window = ("relu",)  # type: ignore[misc]


def test_a_step_cut_by_the_budget_leaves_what_the_steps_before_it_learned() -> None:
    compiler = Compiler()
    search = Search(lambda candidate: None, budget=compiler.budget, cost=lambda: compiler.compiles)
    finding = RunFinding(None, (), compiler, 0.0, search=search)  # type: ignore[arg-type]
    driver = Driver(finding, None, EngineOptions(), None)  # type: ignore[arg-type]

    def spent(run: RunFinding, driver: Driver) -> RunFinding:
        raise BudgetExhausted("no compile left", "max_compiles")

    plan = (Step("model_check", lambda r, d: dataclasses.replace(r, model_level="mismatch"), stage="model_check"),
            Step("not_applicable", spent, when=lambda r, d: r.model_level == "match"),
            Step("subsystem", spent, stage="subsystem"),
            Step("never_reached", lambda r, d: dataclasses.replace(r, model_level="match")))
    with pytest.raises(BudgetExhausted):
        driver.run_plan(plan)
    assert driver.finding.model_level == "mismatch" and driver.ran == ["model_check", "subsystem"]
    assert compiler.stage == "subsystem"  # what the budget message names
    assert finding.model_level is None  # the record the run started from is untouched


def test_every_step_of_a_plan_has_its_own_name() -> None:
    for plan in (GRAPH_PLAN, CULPRIT_FIRST_PLAN, FOLLOW_UP, RUN_PLAN):
        names = [step.name for step in plan]
        assert len(names) == len(set(names)), names


def test_a_clean_graph_lets_go_of_its_values_and_keeps_its_digests(spec, captured) -> None:
    # issue 34: once a graph is judged clean nothing later reads its tensors: its eager values,
    # compiled values and cached verdicts' values are dropped, its digests taken first
    from bisect_engine.localise.judge import judge_of, run_search
    from bisect_engine.verdict.digest import digest
    from bisect_engine.verdict.graphs import value_nodes
    from bisect_engine.verdict.oracle import GraphContext
    options = EngineOptions()
    search = run_search(options, compiler=FakeCompiler(("no_such_node",)))  # a compiler without bugs
    result = run_captured(spec, captured, options, Progress(enabled=False), search=search)
    graph = result.graphs[0]
    assert graph.whole.outcome.value == "match" and graph.digests is not None
    assert graph.context.eager_values == {} and not graph.whole.compiled_values
    assert graph.nodes is None or not graph.nodes.verdict.compiled_values
    assert graph.context.name not in judge_of(search).contexts and graph.context.name not in judge_of(search).compiled
    assert all(not verdict.compiled_values for key, verdict in search.history if getattr(key, "graph", None))
    fresh = GraphContext.from_captured(captured[0])
    expected = {v.name: digest(fresh.eager_values[v.name]).to_json() for n in fresh.view.compute_nodes
                for v in value_nodes(n) if isinstance(fresh.eager_values.get(v.name), torch.Tensor)}
    entries = build_report(result)["graphs"][0]["digests"]
    assert {e["node"]: e["eager"] for e in entries} == expected
    compiled = [e for e in entries if e["compiled"] is not None]  # taken before the values were dropped
    assert compiled and all(e["compiled"] == e["eager"] for e in compiled)  # no bug: the same bits


class PaddedBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.lin(x)).masked_fill(pad[..., None], 0.0)


class SharedInALoop(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = PaddedBlock()

    def forward(self, x: torch.Tensor, pads: torch.Tensor) -> torch.Tensor:
        for i in range(pads.shape[0]):
            x = self.block(x, pads[i])
            torch._dynamo.graph_break()
        return x


def test_a_graph_called_again_in_a_loop_is_named_on_the_call_that_diverges() -> None:
    """The in-process twin of repro_cases/models/loop_reuse_masked_fill_decomp.py (BISECT_CORPUS=all):
    one Dynamo graph called three times; the first call's mask is all False, so the planted fault
    (filled positions come out 1, not 0) shows only from the second call on."""
    torch.manual_seed(0)
    pads = torch.zeros(3, 2, 6, dtype=torch.bool)
    pads[1, 1, 4:] = True
    pads[2, 0, 3:] = True
    spec = ModelSpec(Path("loop.py"), SharedInALoop().eval(), (torch.randn(2, 6, 8), pads), None, None)
    torch._dynamo.reset()
    with torch.no_grad():
        graphs, _ = capture(spec.model, spec.inputs)
    compiler = FakeCompiler(("masked_fill",), fault=lambda value: torch.where(value == 0, torch.ones_like(value), value))
    result, report = _run(spec, graphs, compiler)
    assert (report["verdict"], report["culprit"]["op"], report["culprit"]["graph"]) == \
        ("divergent", "aten.masked_fill.Scalar", "forward_0_call2"), [g["name"] for g in report["graphs"]]


def test_graphs_with_departures_let_go_of_their_values_once_carried_into_the_backward(training, monkeypatch) -> None:
    # issue 34: a clean graph with departures holds its values for the carry into the backward
    # only; then (before the model-level check) its digests are taken and its values dropped,
    from bisect_engine.localise import graph_steps, run_steps
    from bisect_engine.strategies.departures import DepartedValue
    from bisect_engine.verdict.compare import Departure

    def listed(context: Any, values: dict[str, Any], scope: str) -> list[DepartedValue]:
        name = context.view.output_names()[0]
        return [DepartedValue(name, name, scope, Departure(1.0, 4.0, 1.0, 4.0), 1)]

    held_at_model_check: list[int] = []
    model_check = run_steps._model_check

    def checked(run: Any, driver: Any) -> Any:
        held_at_model_check.append(sum(len(g.context.eager_values) for g in run.graphs))
        return model_check(run, driver)

    monkeypatch.setattr(graph_steps, "find_departures", listed)
    monkeypatch.setattr(run_steps, "_model_check", checked)
    monkeypatch.setattr(run_steps, "RUN_PLAN", tuple(dataclasses.replace(s, run=checked) if s.name == "model_check"
                                                     else s for s in run_steps.RUN_PLAN))
    training, graphs = training
    from bisect_engine.localise import pipeline
    monkeypatch.setattr(pipeline, "RUN_PLAN", run_steps.RUN_PLAN)
    result, report = _run(training, graphs, FakeCompiler(("nothing",)))
    assert report["verdict"] == "clean" and len(report["differences"]) == 2  # one listed per graph
    assert held_at_model_check == [0]  # every value let go before the model-level check
    assert all(g.digests and g.context.eager_values == {} and not g.whole.compiled_values for g in result.graphs)
    assert [len(g["digests"]) for g in report["graphs"]] == [len(g.digests) for g in result.graphs]


class ScatterIntoZerosThenAdd(torch.nn.Module):
    """A max-pool backward's shape in small (pytorch#185509): gradients scattered into a zero buffer,
    which an ``add`` then reads."""

    def forward(self, src: torch.Tensor, index: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        buffer = torch.zeros(2, 8).scatter_add(1, index, src)
        return torch.tanh(y + buffer) * 2.0


def test_a_window_whose_compiled_code_drops_a_nodes_work_is_named_by_that_node() -> None:
    """The planted fusion bug computes the ``add`` without the scatter's work (the zeros it was
    scattered into, as pytorch#185509's fused kernel does): the window (scatter_add, add) is named by
    ``scatter_add``, whose skipped work gives the compiled values, not by the ``add`` whose own
    output departs. A fusion bug of another shape keeps its name (the same planted chain, +1)."""
    torch.manual_seed(0)
    src, index, y = torch.randn(2, 6), torch.randint(0, 8, (2, 6)), torch.randn(2, 8)
    scattered = torch.zeros(2, 8).scatter_add(1, index, src)
    spec = ModelSpec(Path("scatter.py"), ScatterIntoZerosThenAdd().eval(), (src, index, y), None, None)
    torch._dynamo.reset()
    with torch.no_grad():
        graphs, _ = capture(spec.model, spec.inputs)
    result, report = _run(spec, graphs, FakeCompiler(("scatter_add", "add"), fault=lambda value: value - scattered),
                          stop_after="localise")
    culprit = report["culprit"]
    assert (culprit["kind"], culprit["nodes"], culprit["op"]) == \
        ("window", ["scatter_add", "add"], "aten.scatter_add.default"), culprit
    dropped = culprit["dropped_work"]
    kept = result.graphs[0].context.view.nodes[dropped["kept"]]
    assert (dropped["node"], kept.target, dropped["replays"]) == ("scatter_add", torch.ops.aten.zeros.default, 1)
    assert dropped["max_abs_diff"] < 1e-5 < dropped["eager_max_abs_diff"]
    assert "dropped: the window's compiled outputs are eager's with scatter_add's work skipped" in summary(report)
    from bisect_engine.output.bug_report import render_bug_report
    assert "| work dropped | the compiled outputs are eager's with `scatter_add` skipped" in \
        (render_bug_report(report, "", None) or "")
    # the same window, its add wrong by +1: no skipped work gives that, so the node whose output departs
    _, report = _run(spec, graphs, FakeCompiler(("scatter_add", "add")), stop_after="localise")
    assert (report["culprit"]["op"], report["culprit"].get("dropped_work")) == ("aten.add.Tensor", None)
