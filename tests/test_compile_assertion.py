"""``assert_compiled_matches`` and its pytest plugin.

Cheap: the upstream gate (``torch._dynamo.utils.same`` with an fp64 reference) on a backend that
adds one to every output and on one that does not; the failure message; test folder names. Then a
sample test suite on corpus models (one planted, then one clean; a second planted one with
BISECT_CORPUS=all), run by pytest in a fresh process with the plugin: exactly the planted ones fail,
each naming its op, and the junit XML carries the report path.
"""
from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
import torch

from bisect_engine.assertion import failure_message, upstream_same
from bisect_engine.live import CheckResult
from bisect_engine.pytest_plugin import folder_name
from conftest import Job, background_result, fixtures_read

ROOT = Path(__file__).resolve().parents[1]


def _off_by_one(graph_module: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    def run(*args: Any) -> Any:
        outputs = graph_module(*args)
        return type(outputs)(o + 1 for o in outputs) if isinstance(outputs, (tuple, list)) else outputs + 1
    return run


def _exact(graph_module: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
    return graph_module.forward


def test_the_upstream_gate_tells_a_wrong_backend_from_a_right_one() -> None:
    torch.manual_seed(0)
    model, inputs = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh()), (torch.randn(2, 4),)
    assert upstream_same(torch.compile(model, backend=_exact), inputs, {}, None)
    assert not upstream_same(torch.compile(model, backend=_off_by_one), inputs, {}, None)
    loss = torch.nn.functional.softplus
    assert not upstream_same(torch.compile(model, backend=_off_by_one), inputs, {}, lambda out: loss(out).sum())


def test_a_compiled_run_that_raises_fails_the_gate() -> None:
    def broken(graph_module: torch.fx.GraphModule, example_inputs: list[Any]) -> Any:
        def run(*args: Any) -> Any:
            raise RuntimeError("kernel failed")
        return run

    assert not upstream_same(torch.compile(torch.nn.Linear(2, 2), backend=broken), (torch.randn(1, 2),), {}, None)


def _result(**fields: Any) -> CheckResult:
    base: dict[str, Any] = dict(verdict="divergent", op="aten.relu.default", source="model.py:12", graph="forward_0",
                                node="relu", error_ulps=1.2e7, eager_error_ulps=0.0, findings=(), exit_status=1,
                                out_dir=Path("out"), report_path=Path("out/report.json"),
                                repro_path=Path("out/repro.py"), html_path=None, summary="bisect-accuracy: divergent",
                                report=MappingProxyType({}))
    return CheckResult(**{**base, **fields})


def test_the_failure_message_names_the_op_its_line_its_error_and_the_repro() -> None:
    message = failure_message(_result())
    assert message.splitlines()[:3] == [
        "torch.compile disagrees with eager (bisect-accuracy: divergent): aten.relu.default at model.py:12 "
        "(node relu, graph forward_0): 1.2e+07 ulps RMS against fp64 (eager: 0)",
        "repro: out/repro.py", "report: out/report.json"]
    assert failure_message(_result(verdict="incomplete", op=None)).startswith(
        "torch.compile and eager could not be told apart or not (bisect-accuracy: incomplete)")


def test_each_test_gets_a_folder_named_after_it() -> None:
    assert folder_name("tests/test_models.py::test_compiled[relu_bug-cpu]") == "test_models.py-test_compiled-relu_bug-cpu"


FAKE_FINDING = """
from pathlib import Path
from types import MappingProxyType
from bisect_engine.assertion import OUT_DIR, RESULTS
from bisect_engine.live import CheckResult

def test_compiled(tmp_path):
    assert OUT_DIR.get().parent == Path({reports!r})
    RESULTS.get().append(CheckResult("divergent", "aten.relu.default", "m.py:1", "forward_0", "relu", 1.0, 0.0, (), 1,
                                     Path("o"), Path("o/report.json"), Path("o/repro.py"), None, "the summary",
                                     MappingProxyType({{}})))
    assert False

def test_clean():
    RESULTS.get().append(CheckResult("clean", None, None, None, None, None, None, (), 0, Path("c"), None, None, None,
                                     "clean", MappingProxyType({{}})))
"""


def test_the_plugin_puts_a_finding_in_the_junit_properties_and_the_terminal(tmp_path: Path) -> None:
    """The plugin's plumbing, with results recorded as the assertion records them (no compile)."""
    (tmp_path / "test_fake.py").write_text(FAKE_FINDING.format(reports=str(tmp_path / "reports")))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_fake.py",
                          "--junitxml=junit.xml", "--bisect-accuracy-out", "reports"], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert "1 failed, 1 passed" in run.stdout, run.stdout + run.stderr
    assert "bisect-accuracy" in run.stdout and "the summary" in run.stdout  # the failing test's section
    cases = {case.get("name"): case for case in ElementTree.parse(tmp_path / "junit.xml").getroot().iter("testcase")}
    assert {p.get("name"): p.get("value") for p in cases["test_compiled"].iter("property")} == {
        "bisect_accuracy_verdict": "divergent", "bisect_accuracy_op": "aten.relu.default",
        "bisect_accuracy_source": "m.py:1", "bisect_accuracy_report": "o/report.json",
        "bisect_accuracy_repro": "o/repro.py"}
    assert list(cases["test_clean"].iter("property")) == []


# --- a sample suite, run by pytest with the plugin (real Inductor compiles) ------------------------

# make test: one planted model, then the clean one (a finding never leaks into the next test);
# BISECT_CORPUS=all: a second planted model between them.
PLANTED = {"relu_bug": "aten.relu.default",
           **({"log1p_bug": "aten.log1p.default"} if os.environ.get("BISECT_CORPUS", "ci") == "all" else {})}
CLEAN = "clean_bf16"


def _sample_suite(base: Path) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    from conftest import seeded_cache_dir

    suite = base / "suite"
    suite.mkdir()
    (suite / "test_models.py").write_text((ROOT / "tests" / "fixtures" / "sample_compile_suite.py").read_text())
    junit, reports = base / "junit.xml", base / "reports"
    environment = {**os.environ, "BISECT_CORPUS_DIR": str(ROOT / "repro_cases"),
                   "SAMPLE_CASES": ",".join([*PLANTED, CLEAN]),
                   "TORCHINDUCTOR_CACHE_DIR": str(seeded_cache_dir(base / "cache"))}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_models.py",
                          f"--junitxml={junit}", "--bisect-accuracy-out", str(reports)],
                         capture_output=True, text=True, timeout=1500, cwd=suite, env=environment)
    return run, junit, reports


def background_jobs(session: pytest.Session) -> list[Job]:
    """The sample suite, started when collection ends where a test of this file reads it
    (tests/conftest.py): its models run beside the in-process tests."""
    if "suite_run" not in fixtures_read(session, sys.modules[__name__]):
        return []
    factory = session.config._tmp_path_factory  # type: ignore[attr-defined]
    return [Job("assertion:suite", 150.0, lambda: _sample_suite(factory.mktemp("sample_suite")))]


@pytest.fixture(scope="module")
def suite_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    return background_result("assertion:suite", lambda: _sample_suite(tmp_path_factory.mktemp("sample_suite")))


@pytest.mark.e2e
def test_a_sample_suite_fails_exactly_the_planted_models_naming_the_op(
        suite_run: tuple[subprocess.CompletedProcess[str], Path, Path]) -> None:
    run, junit, reports = suite_run
    assert run.returncode == 1, run.stdout[-4000:] + run.stderr[-2000:]
    assert f"{len(PLANTED)} failed, 1 passed" in run.stdout, run.stdout[-4000:]
    cases = {case.get("name"): case for case in ElementTree.parse(junit).getroot().iter("testcase")}
    assert cases[f"test_compiled_model_matches_eager[{CLEAN}]"].find("failure") is None
    for name, op in PLANTED.items():
        case = cases[f"test_compiled_model_matches_eager[{name}]"]
        failure = case.find("failure")
        assert failure is not None and f"torch.compile disagrees with eager (bisect-accuracy: divergent): {op} at " \
            f"{name}.py:" in failure.get("message", "")
        properties = {p.get("name"): p.get("value") for p in case.iter("property")}
        report = Path(properties["bisect_accuracy_report"])
        assert properties["bisect_accuracy_op"] == op and report.is_file() and report.parent.parent == reports
        assert Path(properties["bisect_accuracy_repro"]).is_file()
        assert f"repro: {properties['bisect_accuracy_repro']}" in failure.get("message", "")
