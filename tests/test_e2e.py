"""End to end: the real CLI with real Inductor compiles on every bundled case.

Each case file declares ``EXPECTED`` (the exact op, graph, kind, subsystem) and ``plant()``, which
installs its bug. The tool runs in a subprocess whose interpreter plants the bug at start-up (a
``sitecustomize``), so every fresh process it starts, the repro's included, has "the same
environment". Then the repro runs again with the bug absent (no plant, planted config keys
removed) and must exit 0. All cases run up front, two at a time, and the tests read the results.
"""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conftest import E2E_SECONDS, Job, background_result, parse_python, planting_path, seeded_cache_dir

ROOT = Path(__file__).resolve().parents[1]
# BISECT_TEST_DEVICE=cuda runs every case whose DEVICES lists cuda with `--device cuda` (its model,
# inputs and batches moved there): the same engine, Triton kernels instead of C++ ones.
DEVICE = os.environ.get("BISECT_TEST_DEVICE", "cpu")
# BISECT_TEST_TF32=1 lets every process of a case (model, tool, repro) run float32 matmuls and
# convolutions in TF32, as a user who set allow_tf32 does: the verdicts must not change.
TF32 = os.environ.get("BISECT_TEST_TF32", "0") == "1"


def _expected(case: Path) -> dict[str, Any]:
    """A case's EXPECTED, with its EXPECTED_CUDA (say) laid over it on that device: what differs
    there by nature, never by leniency (Triton's compile error is not a CppCompileError; a key set
    to None is not asserted there)."""
    expected = {**_literal(case, "EXPECTED"), **_literal(case, f"EXPECTED_{DEVICE.split(':')[0].upper()}", {})}
    return {key: value for key, value in expected.items() if value is not None}


def _is_model_case(path: Path) -> bool:
    """Model files (get_model + EXPECTED); plain-script cases belong to test_script_mode.py."""
    text = path.read_text()
    return "def get_model(" in text and "EXPECTED = " in text


def _literal(path: Path, name: str, default: Any = None) -> Any:
    for node in parse_python(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    return default


# The real-model corpus (repro_cases/models: HF transformers and timm-like architectures at tiny
# configs) runs its SUITE = "ci" cases here; BISECT_CORPUS=all runs every one of them.
CORPUS = os.environ.get("BISECT_CORPUS", "ci")


def _selected(case: Path) -> bool:
    default = "full" if case.parent.name == "models" else "ci"
    if CORPUS != "all" and _literal(case, "SUITE", default) != CORPUS:
        return False
    return _is_model_case(case) and DEVICE in _literal(case, "DEVICES", ["cpu"])


CASES = [case for folder in ("repro_cases", "repro_cases/models", "tests/upstream_cases")
         for case in sorted((ROOT / folder).glob("*.py")) if _selected(case)]
pytestmark = pytest.mark.e2e
# Cases also run with --trace (torch's structured trace kept in OUT/trace/): read by the trace tests.
TRACED = ("relu_bug",)


@dataclass
class CaseRun:
    case: Path
    exit_code: int
    output: str
    report: dict[str, Any] | None
    out_dir: Path
    env: dict[str, str]
    without_bug: subprocess.CompletedProcess[str] | None = None  # the repro, bug removed


def _planting_env(case: Path, site_dir: Path) -> dict[str, str]:
    tf32 = ("import torch as _torch\n_torch.backends.cuda.matmul.allow_tf32 = True\n"
            "_torch.backends.cudnn.allow_tf32 = True\n" if TF32 else "")
    env = dict(os.environ)
    env["PYTHONPATH"] = planting_path(case, site_dir, env, tf32)
    return env


def _run_case(case: Path, base: Path) -> CaseRun:
    started = time.perf_counter()
    try:
        return _run_case_untimed(case, base)
    finally:
        E2E_SECONDS[case.stem] = time.perf_counter() - started


def _run_case_untimed(case: Path, base: Path, extra: tuple[str, ...] = (), extra_env: dict[str, str] | None = None,
                      without_bug: bool = True) -> CaseRun:
    out_dir = base / case.stem / "out"
    workdir = base / case.stem / "cwd"
    workdir.mkdir(parents=True)
    env = {**_planting_env(case, base / case.stem / "site"), **(extra_env or {})}
    if _literal(case, "PLANTED", None) is not None:
        # A planted lowering or decomposition compiled once would be served from the on-disk cache
        # to the next case's compile of the same graph: each planted case gets its own cache.
        env["TORCHINDUCTOR_CACHE_DIR"] = str(seeded_cache_dir(base / case.stem / "inductor-cache"))
    command = [sys.executable, "-m", "bisect_engine.cli", "run", str(case), "--out", str(out_dir),
               "--verify-runs", "1", "--quiet", *_literal(case, "CLI_ARGS", []), *(["--trace"] if case.stem in TRACED else []),
               *extra]
    if DEVICE != "cpu":
        command += ["--device", DEVICE]
    completed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, cwd=workdir)
    report_path = out_dir / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    run = CaseRun(case, completed.returncode, completed.stdout + completed.stderr, report, out_dir, env)
    if without_bug and report and report.get("repro") and _removable(case):
        run.without_bug = _run_without_bug(case, Path(report["repro"]["path"]))
    return run


def _removable(case: Path) -> bool:
    """A planted compiler bug the repro can be run without (not the model's own NaN, not
    Inductor's real behaviour, as in the RNG case: PLANTED = None)."""
    return _literal(case, "PLANTED", None) is not None and not _expected(case).get("nan_eager_op")


def _run_without_bug(case: Path, repro: Path) -> subprocess.CompletedProcess[str]:
    """The repro in a fresh process that does not plant the bug, planted config keys removed."""
    script = repro.read_text()
    for key in _literal(case, "PLANTED")["config"]:
        script, removed = re.subn(rf"^    {re.escape(repr(key))}: .*,\n", "", script, flags=re.M)
        assert removed == 1, f"{key} not in the repro's INDUCTOR_CONFIG"
    fixed = repro.with_name("repro_without_bug.py")
    fixed.write_text(script)
    return subprocess.run([sys.executable, fixed.name], cwd=fixed.parent, env=dict(os.environ),
                          capture_output=True, text=True, timeout=600)


def _wanted(items: list[pytest.Item]) -> list[Path]:
    """The cases the selected tests read (``-k relu_bug`` runs one case, not all of them); the
    tests without a case parameter read relu_bug's run."""
    stems = set()
    for item in items:
        if item.module is not None and item.module.__name__ != __name__:
            continue
        callspec = getattr(item, "callspec", None)
        stems.add(callspec.params["stem"] if callspec and "stem" in callspec.params else "relu_bug")
    return [case for case in CASES if case.stem in stems] or CASES


def _cost(case: Path) -> float:
    """Rough seconds, to start the dearest first: a planted case also verifies its repro twice."""
    return 60.0 if _literal(case, "PLANTED", None) is not None else 20.0


def background_jobs(session: pytest.Session) -> list[Job]:
    """Every wanted case, started when collection ends (tests/conftest.py runs them two at a time
    beside the in-process tests)."""
    factory = session.config._tmp_path_factory  # type: ignore[attr-defined]
    base = factory.mktemp("e2e")
    cases = [Job(f"e2e:{case.stem}", _cost(case), lambda case=case: _run_case(case, base))
             for case in _wanted(session.items)]
    selected = {getattr(item, "originalname", "") for item in session.items
                if item.module is not None and item.module.__name__ == __name__}
    workers = _worker_jobs(factory, selected)  # a tool and two spawned workers each: among the dearest
    return cases + [Job(key, 45.0 if key.endswith("dies") else 90.0, run) for key, run in workers.items()]


@pytest.fixture(scope="session")
def case_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, CaseRun]:
    base = tmp_path_factory.mktemp("e2e-here")
    return {case.stem: background_result(f"e2e:{case.stem}", lambda case=case: _run_case(case, base))
            for case in _wanted(request.session.items)}


def _ids() -> list[str]:
    return [case.stem for case in CASES]


def _expectations(stems: "list[str] | None" = None) -> list[Any]:
    """The cases (of ``stems``), one whose header says ``KNOWN_MISS`` (why the tool does not yet give
    its ``EXPECTED``) as a strict xfail: it fails the suite once it passes, so its header is mended."""
    return [pytest.param(case.stem, marks=pytest.mark.xfail(strict=True, reason=_literal(case, "KNOWN_MISS")))
            if _literal(case, "KNOWN_MISS") else case.stem
            for case in CASES if stems is None or case.stem in stems]


@pytest.mark.parametrize("stem", _expectations())
def test_tool_names_the_planted_op(case_runs: dict[str, CaseRun], stem: str) -> None:
    run = case_runs[stem]
    expected = _expected(run.case)
    if "exit" in expected:  # a usage error: the exit status and a message that says why
        assert run.exit_code == expected["exit"], run.output
        assert expected["message"] in run.output and "Traceback" not in run.output, run.output
        return
    assert run.report is not None, run.output
    report = run.report
    if "harness" in expected:  # our recompile's fallback, said so, never a finding
        assert [h["fallback"] for h in report["harness"]] == [expected["harness"]], report["harness"]
    assert report["verdict"] == expected["verdict"], run.output
    assert run.exit_code == (0 if expected["verdict"] == "clean" else 1), run.output
    culprit = report["culprit"]
    if expected.get("op") is None:
        assert culprit is None, culprit
    else:
        assert culprit is not None, run.output
        assert culprit["op"] == expected["op"], run.output
        if "graph" in expected:
            assert culprit["graph"] == expected["graph"]
        if "kind" in expected:
            assert culprit["kind"] == expected["kind"], run.output
        if "ops" in expected:
            assert sorted(culprit["ops"]) == sorted(expected["ops"]), run.output
        if "forward_op" in expected:
            assert culprit["forward_op"]["op"] == expected["forward_op"], run.output
        if "amplifier" in expected:  # an amplified divergence: the op that amplifies, found by eager replays
            assert culprit["amplifier"] == expected["amplifier"], run.output
            assert culprit["replays"] >= 1 and culprit["own_error"]["material"] is False, culprit
            assert report["stats"]["compiles_by_stage"].get("localise") == 2, report["stats"]  # whole + per-node
        if "error_contains" in expected:
            crash = culprit.get("crash") or {}
            assert expected["error_contains"] in f"{crash.get('exception')}: {crash.get('message')}", culprit
    if "shapes" in expected:  # a symbolic graph: judged symbolically, compiled statically once
        assert culprit["shapes"] == expected["shapes"], culprit
    if "sizes" in expected:  # the failing sizes, one symbolic compile swept; the repro at the smallest
        sizes = report["sizes"]
        assert sizes["failing"] == expected["sizes"]["failing"], sizes
        assert sizes["repro_size"] == sizes["failing"][0][0] and report["stats"]["compiles_by_stage"]["shapes"] == 2, report
        assert "SYMBOLIC_SHAPES = [" in Path(report["repro"]["path"]).read_text()
    if "pre_grad" in expected:
        pre_grad = report["pre_grad"]
        assert pre_grad is not None, run.output
        rewritten = pre_grad["rewritten"][0]
        assert (pre_grad["aten_op"], rewritten["before"], rewritten["after"]) == tuple(
            expected["pre_grad"][k] for k in ("aten_op", "before", "after")), pre_grad
        assert rewritten["source"] and rewritten["source"].startswith(run.case.name), pre_grad
    if "compiles_at_most" in expected:  # the search's cost, in compiles (never in seconds)
        assert report["stats"]["compiles"] <= expected["compiles_at_most"], report["stats"]
    if "backend_graphs" in expected:  # captured inside the user's backend: the graphs it handed Inductor
        assert len(report["backend_graphs"]["captured"]) == expected["backend_graphs"], report["backend_graphs"]
    if expected.get("repro") is False:  # a finding with no Inductor repro (the user's own backend rewrote it)
        assert report.get("repro") is None, report.get("repro")
    if "differences" in expected:  # compiled differs from eager but is closer to fp64: listed, with the setting
        assert [d["op"] for d in report["differences"]] == expected["differences"], report["differences"]
        follows = expected.get("follows_eager", True)  # whether emulate_precision_casts makes compiled follow eager
        assert all(d["setting"]["follows_eager"] is follows for d in report["differences"]), report["differences"]
    if "backward" in expected:  # a forward difference carried into the gradients by one eager replay
        carried = [d for d in report["differences"] if d.get("backward")]
        ops = expected["backward"]["op"]  # one op, or each saved value the flip is carried from
        assert [d["op"] for d in carried] == (ops if isinstance(ops, list) else [ops]), report["differences"]
        backward = carried[0]["backward"]
        assert backward["graph"] == expected["backward"]["graph"] and backward["material"], backward
        assert backward["gradient_of"] == expected["backward"]["gradient_of"], backward
        # a saved mask that flips is its own amplifier: none listed beyond it
        amplifier = [expected["backward"]["amplifier"]] if "amplifier" in expected["backward"] else []
        assert [a["op"] for a in backward["amplifiers"]] == amplifier, backward
    below = [f for f in report["findings"] if f.get("below_tolerance")]
    if "below_tolerance" in expected:  # outputs within tolerance, an op wrong alone: said, never the verdict
        headline = next(f for f in below if f["headline"])
        assert {k: headline[k] for k in ("op", "graph")} == expected["below_tolerance"], report["findings"]
        assert run.exit_code == 0 and f"{headline['op']} is wrong on its own" in run.output, run.output
    elif expected["verdict"] == "clean":  # zero false alarms: a clean case lists no op below tolerance
        assert not below, report["findings"]
        if not (report["differences"] or report["harness"]):  # nothing beyond the verdict to look into
            # a clean graph costs one compile (localise/order.py); one that draws random numbers
            # adds its per-node check (its draws are judged there, checked_nodes says so)
            cost = sum(2 if graph["checked_nodes"] else 1 for graph in report["graphs"])
            assert report["stats"]["compiles_by_stage"].get("localise", 0) == cost, (report["stats"], report["graphs"])
    if "findings" in expected:  # every wrong op listed, with whether its error reaches the outputs
        found = {f["op"]: f.get("reaches_output") for f in report["findings"]}
        assert found == expected["findings"], report["findings"]
    for side in ("eager", "compiled"):
        key = f"nan_{side}_op"
        if key in expected:
            found = (report["nan"] or {}).get(side)
            assert (found["op"] if found else None) == expected[key], report["nan"]
    if "batch" in expected:
        assert {k: report["batch"][k] for k in ("index", "samples")} == expected["batch"], report.get("batch")
    if "step" in expected:
        assert report["step"] == expected["step"], run.output
    if "inside" in expected:  # a culprit HOP: the op inside named, the HOP and its subgraph as context
        inside = report["culprit"]["inside"]
        assert {k: inside.get(k) for k in expected["inside"]} == expected["inside"], report["culprit"]
        assert inside["op"] == expected["op"], report["culprit"]
    if "subsystem" in expected:
        subsystem = report["subsystem"]
        assert subsystem is not None, run.output
        assert {k: subsystem[k] for k in ("kind", "name")} == expected["subsystem"], run.output


def _has_repro(stem: str) -> bool:
    case = next(c for c in CASES if c.stem == stem)
    expected = _expected(case)
    return expected.get("verdict") in ("divergent", "nan") and expected.get("op") is not None and expected.get("repro", True)


@pytest.mark.parametrize("stem", _expectations([s for s in _ids() if _has_repro(s)]))
def test_repro_reproduces_in_a_fresh_process_and_not_without_the_bug(case_runs: dict[str, CaseRun], stem: str) -> None:
    """The tool ran the repro in a fresh process of the planted environment (exit 1 recorded);
    here it runs again with the bug absent and must exit 0."""
    run = case_runs[stem]
    assert run.report is not None, run.output
    repro = run.report["repro"]
    assert repro["status"] == "REPRODUCED" and [r["exit"] for r in repro["runs"]] == [1], repro
    if "--random-inputs" in _literal(run.case, "CLI_ARGS", []):
        assert repro["inputs"] == "random (checked to reproduce)"
        assert "INPUT_RECIPES = [" in Path(repro["path"]).read_text()
    if not _removable(run.case):
        return
    assert run.without_bug is not None
    assert run.without_bug.returncode == 0, run.without_bug.stdout + run.without_bug.stderr


def test_nothing_is_written_outside_the_output_folder(case_runs: dict[str, CaseRun]) -> None:
    for run in case_runs.values():
        assert list((run.out_dir.parent / "cwd").iterdir()) == [], run.case.stem


# -- the culprit's kernel and the trace, on the relu case ---------------------------------------

# What the planted bug makes of relu(x) in each backend's kernel (x + 1).
PLANTED_RELU = {"cpu": "tmp0 + decltype(tmp0)(1)", "cuda": "tmp0 + 1"}


def test_the_culprits_kernel_is_the_generated_one_that_computes_it(case_runs: dict[str, CaseRun]) -> None:
    run = case_runs["relu_bug"]
    assert run.report is not None, run.output
    culprit = run.report["culprit"]
    (kernel,) = culprit["kernels"]
    assert culprit["node"] in kernel["nodes"] and "relu" in kernel["name"], kernel
    assert kernel["kind"] == ("cpp" if DEVICE == "cpu" else "triton") and kernel["mapped_by"] == "provenance"
    assert PLANTED_RELU[DEVICE.split(":")[0]] in kernel["source"], kernel["source"]
    assert f"kernel:  {kernel['name']}" in run.output  # the summary names it
    repro = Path(run.report["repro"]["path"]).read_text()
    quoted = [line for line in repro.splitlines() if PLANTED_RELU[DEVICE.split(":")[0]] in line]
    assert quoted and all(line.startswith("#   ") for line in quoted), quoted  # a comment block, line by line
    assert f"# ---- kernel {kernel['name']} (" in repro
    assert kernel["name"] in (run.out_dir / "bug_report.md").read_text()
    assert kernel["name"] in (run.out_dir / "report.html").read_text()


def _trace_records(path: Path) -> list[tuple[dict[str, Any], str]]:
    from test_trace import read_trace

    return read_trace(path)


def test_trace_holds_our_artifacts_under_the_culprit_graphs_dynamo_compile(case_runs: dict[str, CaseRun]) -> None:
    run = case_runs["relu_bug"]
    assert run.report is not None, run.output
    trace = run.out_dir / "trace" / "torch_trace.log"
    assert run.report["trace"]["path"] == str(trace) and f"trace:   {trace}" in run.output
    graph = next(g for g in run.report["graphs"] if g["name"] == run.report["culprit"]["graph"])
    frame, frame_compile = map(int, graph["compile_id"].split("/"))
    records = _trace_records(trace)
    ours = {r["artifact"]["name"]: (r, json.loads(payload)) for r, payload in records
            if (r.get("artifact") or {}).get("name", "").startswith("bisect_accuracy_")}
    assert set(ours) == {"bisect_accuracy_report", "bisect_accuracy_finding"}
    for record, _ in ours.values():
        assert (record["frame_id"], record["frame_compile_id"]) == (frame, frame_compile)
    assert ours["bisect_accuracy_finding"][1]["culprit"]["op"] == "aten.relu.default"
    assert ours["bisect_accuracy_report"][1]["verdict"] == "divergent"
    # Dynamo's own records of that compile are in the same trace (the capture ran under --trace)
    assert any("dynamo_output_graph" in r and (r.get("frame_id"), r.get("frame_compile_id")) == (frame, frame_compile)
               for r, _ in records)


def _tlparse() -> str | None:
    beside = Path(sys.executable).with_name("tlparse")
    return str(beside) if beside.exists() else shutil.which("tlparse")


@pytest.mark.skipif(_tlparse() is None, reason="tlparse is not installed (pip install tlparse): an optional tool")
def test_tlparse_lists_our_artifacts_under_the_graphs_compile(case_runs: dict[str, CaseRun], tmp_path: Path) -> None:
    run = case_runs["relu_bug"]
    assert run.report is not None, run.output
    tlparse = _tlparse()
    assert tlparse is not None
    subprocess.run([tlparse, str(run.out_dir / "trace" / "torch_trace.log"), "-o", str(tmp_path / "tl"),
                    "--no-browser", "--overwrite"], check=True, capture_output=True, text=True, timeout=300)
    compile_id = run.report["graphs"][0]["compile_id"]
    folder = "-_" + compile_id.replace("/", "_") + "_-"  # tlparse's folder for [0/0] records without an attempt
    found = sorted(p.name.rsplit("_", 1)[0] for p in (tmp_path / "tl" / folder).glob("bisect_accuracy_*.json"))
    assert found == ["bisect_accuracy_finding", "bisect_accuracy_report"]
    index = (tmp_path / "tl" / "index.html").read_text()
    section = index[index.index(f'<a id="[{compile_id}]">'):]
    section = section[:section.index("</ul>")]  # the build products of that compile
    assert f"{folder}/bisect_accuracy_finding_" in section and "dynamo_output_graph" in section


# --workers: the report is the same for one worker and several (timings and stats.workers aside),
# on a planted case (its subsystem switches compiled by the workers) and a clean one.
# (The clean one, whose pool never starts, only with BISECT_CORPUS=all: the planted one covers the path.)
WORKER_CASES = [stem for stem in ("relu_bug",) + (("graph_break_item",) if CORPUS == "all" else ()) if stem in _ids()]


def _without_timings(value: Any, out_dir: Path) -> Any:
    """The report with its timings, its peak memory and what waited on disk, ``stats.workers`` and its
    output folder's path taken out (measurements of the run, not its findings)."""
    if isinstance(value, dict):
        return {key: _without_timings(item, out_dir) for key, item in value.items()
                if key not in ("seconds", "workers", "peak_rss_mb", "offload") and not key.endswith("_seconds")}
    if isinstance(value, list):
        return [_without_timings(item, out_dir) for item in value]
    return value.replace(str(out_dir), "OUT") if isinstance(value, str) else value


def _other_workers() -> str:
    from bisect_engine.localise.workers import default_workers

    return "1" if default_workers() > 1 else "2"  # the suite's own run took the default


def _again(stem: str, base: Path) -> CaseRun:
    """The case once more with the other worker count (EAGER: candidates queue to the workers
    while they start, so they surely judge some)."""
    from bisect_engine.localise.workers import EAGER

    other = _other_workers()
    case = next(case for case in CASES if case.stem == stem)
    # The repro without the bug is the suite's own run's check (the same case, the same repro).
    return _run_case_untimed(case, base, ("--workers", other), {EAGER: "1"} if other == "2" else {}, without_bug=False)


def _dies(base: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    from bisect_engine.localise.workers import DIE_ON, EAGER

    case = ROOT / "repro_cases" / "relu_bug.py"
    env = {**_planting_env(case, base / "site"), "TORCHINDUCTOR_CACHE_DIR": str(seeded_cache_dir(base / "inductor-cache")),
           DIE_ON: "subsystem", EAGER: "1"}
    command = [sys.executable, "-m", "bisect_engine.cli", "run", str(case), "--out", str(base / "out"),
               "--workers", "2", "--stage", "subsystem", "--quiet"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=900, cwd=base), base / "out"


WORKER_TESTS = ("test_one_worker_and_two_give_the_same_report", "test_a_worker_that_dies_is_an_internal_error_naming_its_candidate")


def _worker_jobs(factory: pytest.TempPathFactory, tests: Any = WORKER_TESTS) -> dict[str, Any]:
    """The runs the worker ``tests`` read, by key: each an argument-free callable."""
    jobs: dict[str, Any] = {}
    if WORKER_TESTS[0] in tests:
        jobs.update({f"workers:{stem}": (lambda stem=stem: _again(stem, factory.mktemp(f"workers-{stem}")))
                     for stem in WORKER_CASES})
    if WORKER_TESTS[1] in tests:
        jobs["workers:dies"] = lambda: _dies(factory.mktemp("workers-dies"))
    return jobs


@pytest.fixture(scope="module")
def worker_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return {key: (lambda key=key, run=run: background_result(key, run))
            for key, run in _worker_jobs(tmp_path_factory).items()}


@pytest.mark.parametrize("stem", WORKER_CASES)
def test_one_worker_and_two_give_the_same_report(case_runs: dict[str, CaseRun], worker_runs: dict[str, Any],
                                                 stem: str) -> None:
    run, again = case_runs[stem], worker_runs[f"workers:{stem}"]()
    assert run.report is not None and again.report is not None, again.output
    assert again.exit_code == run.exit_code
    assert _without_timings(again.report, again.out_dir) == _without_timings(run.report, run.out_dir)
    if _other_workers() == "2" and _expected(run.case)["verdict"] != "clean":  # the workers judged subsystem switches
        assert again.report["stats"]["workers"]["adopted"] >= 1, again.report["stats"]


def test_a_worker_that_dies_is_an_internal_error_naming_its_candidate(worker_runs: dict[str, Any]) -> None:
    completed, out = worker_runs["workers:dies"]()
    said = [line for line in completed.stderr.splitlines() if line.startswith("bisect-accuracy:")]
    assert completed.returncode == 3, completed.stdout + completed.stderr
    assert len(said) == 1 and "worker process died" in said[0] and "forward_0:subsystem" in said[0], said
    assert json.loads((out / "report.json").read_text())["verdict"] == "error"
