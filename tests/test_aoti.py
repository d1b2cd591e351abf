"""AOTInductor in script mode without compiling a package: the entry points' wrapping and its
restoration, the exported graph made flat, dynamic dims and their second size, the second-size
check's outcomes on fake packages, a package loaded from elsewhere named as not checked."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import torch
from torch import nn

from conftest import Job, background_result, fixtures_read, parse_python, planting_path, seeded_cache_dir

from bisect_engine.load.exported import DynamicDim, dynamic_dims, flat_graph_module, flat_inputs, resized_inputs
from bisect_engine.script import aoti_check
from bisect_engine.script.levels import Level, ScriptSettings
from bisect_engine.script.session import Session
from bisect_engine.verdict.inductor_adapter import AotiPatches


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, x: torch.Tensor, *, scale: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"y": self.norm(torch.relu(self.fc(x))) * scale}


@pytest.fixture
def exported() -> Any:
    torch.manual_seed(0)
    return torch.export.export(Block().eval(), (torch.randn(3, 8),), {"scale": torch.randn(4)},
                               dynamic_shapes={"x": {0: torch.export.Dim("batch", min=2, max=16)}, "scale": None})


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    yield Session(ScriptSettings(out_dir=tmp_path / "out", level=Level.CHECK), tmp_path / "script.py", [], "test")


def test_the_exported_graph_is_flat_and_runs_as_the_program(exported: Any) -> None:
    graph, inputs = flat_graph_module(exported), flat_inputs(exported)
    assert [n.op for n in graph.graph.nodes].count("placeholder") == 2 and len(inputs) == 2
    (args, kwargs) = exported.example_inputs
    assert torch.equal(graph(*inputs)[0], exported.module()(*args, **kwargs)["y"])


def test_a_dynamic_dim_gets_a_second_size_inside_its_range(exported: Any) -> None:
    inputs = flat_inputs(exported)
    (dim,) = dynamic_dims(exported, inputs)
    assert (dim.input, dim.dim, dim.size, dim.lower, dim.upper) == (0, 0, 3, 2, 16)
    assert dim.dim_name == "batch" and dim.to_json()["name"] == "batch" and not dim.specialised  # the user's Dim name
    assert dim.other_size() == 6
    assert DynamicDim(0, 0, 3, 3, 3, "s").other_size() is None  # the range holds the example size only
    assert DynamicDim(0, 0, 9, 2, 10, "s").other_size() == 10
    resized = resized_inputs(inputs, [dim], {dim.name: 6})
    assert resized[0].shape == (6, 8) and resized[1] is inputs[1]
    assert not torch.equal(resized[0][3:], resized[0][:3])  # the new rows are not copies


def _fake_package(graph: Any, wrong_at: int | None = None, raises_at: int | None = None) -> Callable[[list[Any]], Any]:
    def run(inputs: list[Any]) -> list[Any]:
        rows = inputs[0].shape[0]
        if rows == raises_at:
            raise RuntimeError(f"Error: input_handles[0]: expected size 3 at dim 0, got {rows}")
        outputs = list(graph(*inputs))
        return [o + 1 if rows == wrong_at else o for o in outputs]
    return run


@pytest.mark.parametrize(("wrong_at", "raises_at", "outcome"), [(None, None, "match"), (None, 6, "raised"),
                                                                (6, None, "mismatch")])
def test_the_second_size_check_says_raised_wrong_or_match(session: Session, exported: Any, wrong_at: int | None,
                                                          raises_at: int | None, outcome: str) -> None:
    graph, inputs = flat_graph_module(exported), flat_inputs(exported)
    record = session.add_graph(graph, aoti_check.BACKEND, {})
    run = _fake_package(graph, wrong_at, raises_at)
    session.check_external(record, run, inputs)
    assert record.outcome == "match"
    dims = dynamic_dims(exported, inputs)
    entry = aoti_check.second_shape(session, record, run, inputs, dims, "m.pt2")
    assert entry["second_shape"]["outcome"] == outcome and entry["second_shape"]["sizes"] == {dims[0].name: 6}
    assert (session.divergence is not None) is (outcome == "mismatch")
    if outcome == "raised":
        assert "expected size 3" in entry["second_shape"]["detail"]
        session.exported.append(entry)
        line = aoti_check.summary_lines({"exported": session.exported})[0]
        assert "dynamic dim(s) batch (s" in line and " at batch=6: raised (RuntimeError" in line  # the user's Dim name


class _OffsetFor4(nn.Module):
    """A per-row offset buffer made for batch 4: broadcasting against it pins a Dim.AUTO batch to 4."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("offset", torch.linspace(-1.0, 1.0, 32).view(4, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.fc(x) + self.offset)


@pytest.mark.parametrize(("raises_at", "outcome"), [(None, "specialised"), (8, "raised")])
def test_a_dim_marked_dynamic_that_the_export_specialised_is_run_at_a_second_size(session: Session,
                                                                                   raises_at: int | None,
                                                                                   outcome: str) -> None:
    """Dim.AUTO lets torch.export specialise the batch silently: the dim is found in the export's
    ShapeEnv (its symbol replaced by 4), the package is run at a second size: refused (raised), or
    run unrefused (specialised: nothing holds that size to compare with, so no check, no error)."""
    torch.manual_seed(0)
    exported = torch.export.export(_OffsetFor4().eval(), (torch.randn(4, 8),),
                                   dynamic_shapes={"x": {0: torch.export.Dim.AUTO}})
    graph, inputs = flat_graph_module(exported), flat_inputs(exported)
    (dim,) = dynamic_dims(exported, inputs)
    assert dim.specialised and (dim.input, dim.dim, dim.size, dim.other_size()) == (0, 0, 4, 8)
    record = session.add_graph(graph, aoti_check.BACKEND, {})

    def package(values: list[Any]) -> list[Any]:  # as AOTInductor's does: no size check on a static dim
        if values[0].shape[0] == raises_at:
            raise RuntimeError("Error: input_handles[0]: expected size 4 at dim 0, got 8")
        return [torch.empty(values[0].shape[0], 8)]

    entry = aoti_check.second_shape(session, record, package, inputs, [dim], "m.pt2")
    assert entry["second_shape"]["outcome"] == outcome and session.divergence is None
    assert record.checks == 0 and not record.notes  # nothing compared, nothing failed
    session.exported.append(entry)
    line = aoti_check.summary_lines({"exported": session.exported})[0]
    assert "input 0 dim 0 (marked dynamic; the export specialised it to 4) at input 0 dim 0=8: " + outcome in line


def test_a_package_loaded_from_elsewhere_is_named_not_checked(session: Session) -> None:
    model = object()
    assert aoti_check.package_loaded(session, "/somewhere/m.pt2", model) is model
    (record,) = session.graphs
    assert record.outcome == "not_checked"
    assert record.notes == [aoti_check.loaded_elsewhere("/somewhere/m.pt2")]
    session.aoti_packages.append("/here/m.pt2")
    aoti_check.package_loaded(session, "/here/m.pt2", model)
    assert len(session.graphs) == 1  # compiled in this process: checked when it was compiled
    # What the command line makes of it (the run itself: tests/test_script_mode.py, BISECT_CORPUS=all):
    # no verdict on that graph, so `incomplete`, exit 4, the note said by name; never "compiled nothing".
    from bisect_engine.cli import _script_status
    from bisect_engine.script.runner import ScriptOutcome
    from bisect_engine.script.session import script_summary

    report = session.finish(0)
    assert report["verdict"] == "incomplete" and report["script"]["graphs"][0]["outcome"] == "not_checked"
    assert _script_status(ScriptOutcome(0, report, False, None, None)) == 4
    said = script_summary({**report, "report_path": "r"})
    assert "compiled in another process" in said and "compiled nothing" not in said


class FakeCompiledModel:
    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, x: int) -> str:
        return f"{self.path}({x})"


def test_the_entry_points_are_wrapped_and_restored() -> None:
    seen: list[Any] = []
    package = types.ModuleType("torch._inductor.package")
    package.load_package = lambda path, *a, **k: FakeCompiledModel(path)  # type: ignore[attr-defined]
    own_call = FakeCompiledModel.__call__
    debug = types.ModuleType("torch._inductor.debug")
    debug.aot_inductor_minifier_wrapper = lambda func, ep, **k: "made.pt2"  # type: ignore[attr-defined]
    original_load, original_compile = package.load_package, debug.aot_inductor_minifier_wrapper  # type: ignore[attr-defined]
    with AotiPatches(lambda ep, path, configs: seen.append(("compiled", ep, path, configs)),
                     lambda path, model: seen.append(("loaded", path, model.path)) or model,
                     lambda gm, result: seen.append(("library", gm, result)),
                     lambda model, args, kwargs, call: seen.append(("called", args)) or call(model, *args, **kwargs)
                     ) as patches:
        patches.patch(package)
        patches.patch(debug)
        patches.patch(types.ModuleType("torch.other"))  # not an entry point: left alone
        assert debug.aot_inductor_minifier_wrapper(None, "ep", inductor_configs={"a": 1}) == "made.pt2"  # type: ignore[attr-defined]
        model = package.load_package("made.pt2")  # type: ignore[attr-defined]
        assert isinstance(model, FakeCompiledModel) and model(3) == "made.pt2(3)"  # the program keeps its object
    assert seen == [("compiled", "ep", "made.pt2", {"a": 1}), ("loaded", "made.pt2", "made.pt2"), ("called", (3,))]
    assert package.load_package is original_load and debug.aot_inductor_minifier_wrapper is original_compile  # type: ignore[attr-defined]
    assert FakeCompiledModel.__call__ is own_call


class FakePackage:
    """A loaded package: the exported graph's own values, 1 too high when ``wrong``."""

    def __init__(self, graph: Any, spec: Any, wrong: bool) -> None:
        self.graph, self.spec, self.wrong = graph, spec, wrong

    def __call__(self, x: torch.Tensor, *, scale: torch.Tensor) -> dict[str, torch.Tensor]:
        (y,) = self.graph(x, scale)
        return {"y": y + 1 if self.wrong and x.shape[0] == 5 else y}


@pytest.mark.parametrize("wrong", [False, True])
def test_the_programs_own_calls_of_a_package_it_compiled_are_checked(session: Session, exported: Any,
                                                                    wrong: bool) -> None:
    graph = flat_graph_module(exported)
    record = session.add_graph(graph, aoti_check.BACKEND, {})
    session.aoti_packages.append("m.pt2")
    session.aoti_records.append(("m.pt2", record, exported))
    model = FakePackage(graph, exported.call_spec.in_spec, wrong)
    assert aoti_check.package_loaded(session, "m.pt2", model) is model and len(session.graphs) == 1
    x = torch.randn(5, 8)  # the program's own input: not the example's size
    out = aoti_check.package_called(session, model, (x,), {"scale": torch.ones(4)},
                                    lambda m, *a, **k: FakePackage.__call__(m, *a, **k))
    assert torch.equal(out["y"], model(x, scale=torch.ones(4))["y"])  # the program's result, as the package gave it
    assert record.checks == 1 and (session.divergence is not None) is wrong
    aoti_check.package_called(session, model, (x,), {"scale": torch.ones(4)},
                              lambda m, *a, **k: FakePackage.__call__(m, *a, **k))
    assert record.checks == 1  # the second call is not checked (check_every 0: the first only)


# -- end to end: the corpus pair through the CLI (AOTInductor compiles: tens of seconds each) -----

ROOT = Path(__file__).resolve().parents[1]
CLEAN_CASE = ROOT / "repro_cases" / "script_aoti_attention.py"
PLANTED_CASE = ROOT / "repro_cases" / "script_aoti_attention_exp.py"


def _literal(path: Path, name: str) -> Any:
    tree = parse_python(path.read_text())
    return next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                and any(getattr(target, "id", None) == name for target in node.targets))


def _cli(case: Path, out: Path, planted: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BISECT_ACCURACY_")}
    # fresh: a planted codegen is not in its graph's key (the kernels are the suite's: keyed by their source)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(seeded_cache_dir(out.parent / "inductor-cache"))
    if planted:  # the plant in every fresh process (the repro's verification too)
        env["PYTHONPATH"] = planting_path(case, out.parent / "site", env)
    command = [sys.executable, "-m", "bisect_engine.cli", "run", "--out", str(out), "--verify-runs", "1", "-q", str(case)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, cwd=out.parent)


def _attention(base: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    return _cli(CLEAN_CASE, base / "out", planted=False), base / "out"


def background_jobs(session: pytest.Session) -> list[Job]:
    """The attention block's run (an AOTInductor package: a whole-model C++ build), started when
    collection ends where a test of this file reads it (tests/conftest.py)."""
    if "aoti_attention" not in fixtures_read(session, sys.modules[__name__]):
        return []
    factory = session.config._tmp_path_factory  # type: ignore[attr-defined]
    return [Job("aoti:attention", 60.0, lambda: _attention(factory.mktemp("aoti-attention")))]


@pytest.fixture(scope="module")
def aoti_attention(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    return background_result("aoti:attention", lambda: _attention(tmp_path_factory.mktemp("aoti-attention")))


@pytest.mark.e2e
def test_an_exported_attention_block_through_aot_inductor_is_clean_at_both_sizes(
        aoti_attention: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    expected = _literal(CLEAN_CASE, "EXPECTED")
    run, out = aoti_attention
    assert run.returncode == 0, run.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == expected["verdict"] and report["script"]["graphs"][0]["backend"] == expected["backend"]
    (entry,) = report["exported"]
    assert entry["second_shape"]["outcome"] == expected["second_shape"] and entry["dynamic_dims"][0]["dim"] == 0
    assert report["script"]["calls_checked"] == 3  # the example inputs, the second size, the program's own call
    assert run.stdout.startswith("max |package - eager| = ")  # the program's own output, untouched


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all", reason="SUITE full: BISECT_CORPUS=all runs it")
def test_a_real_package_of_a_batch_the_export_specialised_runs_unrefused_at_a_second_size(tmp_path: Path) -> None:
    """script_aoti_auto_batch: Dim.AUTO, the export pins the batch to 4 (an offset buffer), the real
    AOTInductor package runs at batch 8 without an error; said by name, clean at the size it holds."""
    case = ROOT / "repro_cases" / "script_aoti_auto_batch.py"
    expected = _literal(case, "EXPECTED")
    run = _cli(case, tmp_path / "out", planted=False)
    assert run.returncode == 0, run.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == expected["verdict"] and report["script"]["graphs"][0]["backend"] == expected["backend"]
    (entry,) = report["exported"]
    assert entry["second_shape"]["outcome"] == expected["second_shape"], entry
    assert entry["dynamic_dims"][0]["specialised"] and entry["dynamic_dims"][0]["size"] == 4
    assert "checking graph_0 failed" not in run.stderr and "does not refuse a size" in entry["second_shape"]["detail"]


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all", reason="SUITE full: BISECT_CORPUS=all runs it")
def test_a_wrong_exp_in_an_aot_inductor_package_is_named_and_its_repro_compiles_through_aoti(tmp_path: Path) -> None:
    expected = _literal(PLANTED_CASE, "EXPECTED")
    run = _cli(PLANTED_CASE, tmp_path / "out", planted=True)
    assert run.returncode == 1, run.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == expected["verdict"]
    assert {k: report["culprit"][k] for k in ("op", "graph", "kind")} == \
        {k: expected[k] for k in ("op", "graph", "kind")}, run.stderr
    assert report["script"]["graphs"][0]["backend"] == expected["backend"]
    assert report["repro"]["status"] == "REPRODUCED", report["repro"]
    repro = tmp_path / "out" / "repro.py"
    assert '\nCOMPILE_WITH = "aot_inductor"\n' in repro.read_text()  # exported and packaged, as the program did
    env = {k: v for k, v in os.environ.items() if not k.startswith("BISECT_ACCURACY_")}
    env["TORCHINDUCTOR_CACHE_DIR"] = str(seeded_cache_dir(tmp_path / "clean-cache"))
    without = subprocess.run([sys.executable, "repro.py"], cwd=repro.parent, capture_output=True, text=True,
                             timeout=600, env=env)  # no plant in that process
    assert without.returncode == 0, without.stdout + without.stderr


class _Relu(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


class _ReluPlusOne(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) + 1


def _model_level(exported_model: nn.Module) -> tuple[Any, int]:
    from bisect_engine.load.model_file import ModelSpec
    from bisect_engine.localise.model_check import check_model_level
    from bisect_engine.verdict.compiler import Compiler
    from bisect_engine.verdict.judgement import Oracle

    inputs = (torch.randn(4, 8),)
    compiler = Compiler()
    spec = ModelSpec(Path("m.py"), _Relu(), inputs, None, None, aot_inductor=True,
                     exported_program=torch.export.export(exported_model, inputs))
    return check_model_level(spec, compiler, Oracle(), 0).outcome, compiler.compiles


def test_a_model_files_exported_program_is_checked_at_model_level_as_its_package() -> None:
    """get_model() returning an ExportedProgram: the model-level check runs the AOTInductor package
    the user ships, not torch.compile of ``ep.module()``. Shown by a spec whose program is not its
    eager model (``relu(x) + 1`` exported, ``relu(x)`` eager): only the package can differ."""
    from bisect_engine.verdict.compare import Outcome

    assert _model_level(_ReluPlusOne()) == (Outcome.MISMATCH, 1)


@pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all", reason="a second package compile: BISECT_CORPUS=all")
def test_a_model_files_exported_program_that_matches_its_package_is_a_match() -> None:
    from bisect_engine.verdict.compare import Outcome

    assert _model_level(_Relu()) == (Outcome.MATCH, 1)
