"""The determinism question (issue 36): which op makes two identical runs differ, eager or compiled.

A duplicate-index sum (``index_add`` of 400,000 rows into 32 segments) compiled by Inductor for CPU
accumulates with atomic adds across threads: its values change run to run, eager's do not. It is
named (op, compiled side) and its repro, run in a fresh interpreter, exits 1; a program with no
such op is clean and writes no repro. The answer's pure parts (verdict, summary, repro text) are
tested on values. In the default run: an op planted to add fresh noise from the OS on every call
(a ``torch.library`` custom op, so the compiled graph calls it too: side ``both``), in one process,
named before the deterministic op that reads it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bisect_engine.localise.determinism import GraphDeterminism, RunToRun
from bisect_engine.output.determinism import determinism_key, summary_lines, verdict_of
from conftest import seeded_cache_dir

ROOT = Path(__file__).resolve().parents[1]

POOLING = '''
import torch

class Pool(torch.nn.Module):
    def forward(self, rows, segment):
        pooled = torch.zeros(32, 16).index_add(0, segment, rows)
        return pooled * 2.0 + 1.0

def get_model():
    return Pool()

def get_inputs():
    torch.manual_seed(1)
    return torch.randn(400_000, 16), torch.randint(0, 32, (400_000,))  # long enough for two threads to race
'''

STEADY = '''
import torch

class Steady(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x @ x.T).sum(1) + 1.0

def get_model():
    return Steady()

def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(64, 32),)
'''


def _model(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "model.py"
    path.write_text(text)
    return path


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all", reason="a fresh process each, 60-90 s under load: BISECT_CORPUS=all; test_a_noisy_op_is_named_before_what_reads_it covers the path")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one CPU: Inductor's duplicate-index sum is then deterministic")
def test_a_compiled_duplicate_index_sum_is_named_and_its_repro_exits_1(tmp_path: Path) -> None:
    result = _determinism(tmp_path, POOLING, threads=2)  # the suite runs one thread (conftest): atomics need two to race
    assert result.returncode == 1, result.stdout + result.stderr
    key = json.loads((tmp_path / "out" / "report.json").read_text())["determinism"]
    assert key["op"]["op"] == "aten.index_add.default" and key["side"] == "compiled"
    assert key["graphs"][0]["compiled_differs"] and not key["graphs"][0]["eager_differs"]
    assert key["repro"]["exit_code"] == 1, key["repro"]  # run by the tool in a fresh interpreter
    assert "THREADS = 2" in (tmp_path / "out" / "determinism" / "repro.py").read_text()
    assert "aten.index_add.default (index_add in forward_0), compiled side" in result.stdout


def _determinism(tmp_path: Path, model: str, threads: int = 1) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(seeded_cache_dir(tmp_path / "cache")), "OMP_NUM_THREADS": str(threads)}
    return subprocess.run([sys.executable, "-m", "bisect_engine.cli", "run", str(_model(tmp_path, model)),
                           "--question", "determinism", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=ROOT, timeout=600, env=environ)


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all", reason="a fresh process each, 60-90 s under load: BISECT_CORPUS=all; test_a_noisy_op_is_named_before_what_reads_it covers the path")
def test_a_deterministic_program_is_clean_with_no_repro(tmp_path: Path) -> None:
    result = _determinism(tmp_path, STEADY)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == "clean" and report["question"] == "determinism"
    assert report["determinism"]["op"] is None and report["determinism"]["repro"] is None
    assert not (tmp_path / "out" / "determinism").exists()


def test_verdicts_never_call_unchecked_or_unlocalised_runs_clean() -> None:
    op = RunToRun("index_add", "aten.index_add.default", "compiled", "index_add", 3)
    assert verdict_of([GraphDeterminism("g", 5)]) == "clean"
    assert verdict_of([GraphDeterminism("g", 5, compiled_differs=True, op=op)]) == "nondeterministic"
    # runs differ, no op alone does: still a finding, said so
    unlocalised = [GraphDeterminism("g", 5, compiled_differs=True)]
    assert verdict_of(unlocalised) == "nondeterministic"
    report = {"verdict": verdict_of(unlocalised), "determinism": determinism_key(unlocalised, None, 1.0)}
    assert any("not localised" in line for line in summary_lines(report))
    assert verdict_of([GraphDeterminism("g", 5), GraphDeterminism("h", 5, error="RuntimeError: x")]) == "incomplete"
    assert verdict_of([]) == "incomplete"  # nothing checked is never clean


def test_the_repro_text_is_pure_and_names_the_op() -> None:
    import torch.fx as fx

    from bisect_engine.output.determinism import render_repro

    graph = fx.Graph()
    zeros, index, rows = (graph.placeholder(name) for name in ("zeros", "index", "rows"))
    node = graph.call_function(torch.ops.aten.index_add.default, (zeros, 0, index, rows))
    op = RunToRun(node.name, "aten.index_add.default", "compiled", node.name, 2)
    text = render_repro("forward_0", op, node, {})
    assert text == render_repro("forward_0", op, node, {})
    assert "OP = 'aten.index_add.default'" in text and "SIDES = ['compiled']" in text
    assert "(T['zeros'], 0, T['index'], T['rows'], )" in text and "THREADS = 1" in text
    compile(text, "repro.py", "exec")


@torch.library.custom_op("bisect_determinism_test::noisy", mutates_args=())
def _noisy(x: torch.Tensor) -> torch.Tensor:
    """Planted nondeterminism: noise drawn from the OS, not from torch's seeded generator."""
    noise = torch.frombuffer(bytearray(os.urandom(4 * x.numel())), dtype=torch.int32).reshape(x.shape)
    return x + noise.to(x.dtype) * 1e-12


@_noisy.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@pytest.mark.e2e
def test_a_noisy_op_is_named_before_what_reads_it() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    from bisect_engine.localise.determinism import check_graph
    from bisect_engine.verdict.compiler import Compiler
    from bisect_engine.verdict.graphs import CapturedGraph
    from bisect_engine.verdict.oracle import GraphContext

    def context(function):  # type: ignore[no-untyped-def]
        x = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
        return GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, make_fx(function)(x), [x], True))

    compiler = Compiler()
    noisy = check_graph(context(lambda x: torch.ops.bisect_determinism_test.noisy(x.sin()).cos()), compiler, runs=3)
    assert noisy.eager_differs and noisy.compiled_differs and noisy.op is not None
    assert noisy.op.op == "bisect_determinism_test.noisy.default" and noisy.op.side == "both"
    assert noisy.op.differing_runs == 2


def test_a_workers_mismatch_is_decided_over_its_reruns_as_in_process() -> None:
    """``--workers``: a worker sends further runs only where they changed; the verdict formed here
    is then decided by the majority of ``RUNS`` runs, as ``GraphContext.judge`` decides its own."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from bisect_engine.verdict.compare import Outcome
    from bisect_engine.verdict.graphs import CapturedGraph, reference_inputs
    from bisect_engine.verdict.oracle import RUNS, GraphContext

    x = torch.randn(64, generator=torch.Generator().manual_seed(0))
    context = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, make_fx(torch.sin)(x), [x], True))
    subgraph = context.whole()
    inputs = reference_inputs(subgraph, context.eager_values)
    right = [context.eager_values[name] for name in subgraph.output_names]
    wrong = [value + 0.5 for value in right]
    alone = context.verdict_from(subgraph, inputs, wrong, False)
    assert alone.outcome is Outcome.MISMATCH
    assert context.verdict_from(subgraph, inputs, wrong, False, reruns=()).outcome is Outcome.MISMATCH
    mostly_right = [right] * (RUNS - 1)  # sent only because the second run differed from the first
    decided = context.verdict_from(subgraph, inputs, wrong, False, reruns=mostly_right)
    assert decided.outcome is Outcome.MATCH and decided.runs == (1, RUNS)
    also_wrong = [value + 0.25 for value in right]
    mostly_wrong = [also_wrong] + [wrong] * (RUNS - 3) + [right]
    kept = context.verdict_from(subgraph, inputs, wrong, False, reruns=mostly_wrong)
    assert kept.outcome is Outcome.MISMATCH and kept.runs == (RUNS - 1, RUNS)


def test_a_worker_reruns_only_where_a_second_run_differs() -> None:
    from bisect_engine.localise.workers import _reruns
    from bisect_engine.verdict.oracle import RUNS

    steady = torch.ones(3)
    assert _reruns(lambda: (steady.clone(),), 0, (steady,)) == ()
    counter = iter(range(100))
    changing = _reruns(lambda: (torch.full((3,), float(next(counter))),), 0, (torch.full((3,), -1.0),))
    assert len(changing) == RUNS - 1


def test_a_scripts_graphs_are_asked_the_question_as_a_model_files_are(tmp_path: Path, monkeypatch) -> None:
    """``run SCRIPT --question determinism`` (``api.determinism_script``): the graphs the script's
    one run captured (here handed in: ``run_capturing`` is ``record``'s path, tested there) go
    through the model file's loop (its ``check_graph`` faked here: the loop's own test above runs
    it), each under the Inductor options the script compiled it with; a graph the script compiled
    and we could not capture is listed as not checked and never lets the run be clean."""
    import torch._inductor.config as inductor_config
    from torch.fx.experimental.proxy_tensor import make_fx

    from bisect_engine import api
    from bisect_engine.localise import determinism
    from bisect_engine.script import env_script
    from bisect_engine.verdict.graphs import CapturedGraph

    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    graph = CapturedGraph("forward_0", "forward", 0, make_fx(lambda v: torch.sin(v).cos())(x), [x], True)
    seen: list[tuple[str, int]] = []

    def check_graph(context, compiler, runs):  # type: ignore[no-untyped-def]
        seen.append((context.name, inductor_config.cpp.simdlen))
        op = RunToRun("sin", "aten.sin.default", "compiled", "sin", runs - 1) if differs else None
        return GraphDeterminism(context.name, runs, compiled_differs=differs, op=op)

    monkeypatch.setattr(determinism, "check_graph", check_graph)
    for differs, verdict in ((True, "nondeterministic"), (False, "incomplete")):
        graphs = env_script.ScriptGraphs([graph], {"forward_0": {"cpp.simdlen": 1}}, ["graph_1: compiled by eager"], 2)
        monkeypatch.setattr(env_script, "run_capturing", lambda script, argv: graphs)
        out = tmp_path / verdict
        report = api.determinism_script(tmp_path / "script.py", (), out, verify=False, runs=3)
        assert report["verdict"] == verdict and report["question"] == "determinism"
        assert report["not_checked"] == ["graph_1: compiled by eager"]
        assert "  NOT CHECKED: graph_1: compiled by eager" in summary_lines(report)
        assert (out / "determinism" / "repro.py").exists() == differs
    assert seen == [("forward_0", 1), ("forward_0", 1)]  # the script's own options applied


POOLING_SCRIPT = '''
import torch

def pool(rows, segment):
    return torch.zeros(32, 16).index_add(0, segment, rows) * 2.0 + 1.0

torch.manual_seed(1)
rows, segment = torch.randn(400_000, 16), torch.randint(0, 32, (400_000,))
print(torch.compile(pool)(rows, segment).sum().item())
'''


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all", reason="a fresh process, 60-90 s under load: BISECT_CORPUS=all; test_a_scripts_graphs_are_asked_the_question_as_a_model_files_are covers the path")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="one CPU: Inductor's duplicate-index sum is then deterministic")
def test_a_scripts_compiled_duplicate_index_sum_is_named(tmp_path: Path) -> None:
    script = tmp_path / "pool.py"
    script.write_text(POOLING_SCRIPT)
    environ = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(seeded_cache_dir(tmp_path / "cache")), "OMP_NUM_THREADS": "2"}
    result = subprocess.run([sys.executable, "-m", "bisect_engine.cli", "run", str(script), "--question",
                             "determinism", "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, cwd=tmp_path, timeout=600, env=environ)
    assert result.returncode == 1, result.stdout + result.stderr
    key = json.loads((tmp_path / "out" / "report.json").read_text())["determinism"]
    assert key["op"]["op"] == "aten.index_add.default" and key["side"] == "compiled"
    assert key["repro"]["exit_code"] == 1, key["repro"]
