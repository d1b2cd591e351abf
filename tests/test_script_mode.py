"""Script mode: unmodified scripts through ``bisect-accuracy run`` and through the start-up hook.

Fast layers first (levels, ranks, the import hook, the checking backend with cheap non-Inductor
backends), then the end to end runs with real Inductor compiles, all started up front two at a
time: the CLI and the environment variable on one planted-bug training script (same culprit, a
repro that reproduces), a clean script (stdout and exit status exactly as ``python`` gives them),
scripts that raise or exit, and a two-rank ``torchrun``.
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import unittest.mock
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import torch

from conftest import Job, background_result, fixtures_read, parse_python, seeded_cache_dir

from bisect_engine import autostart
from bisect_engine.script.hook import HOOK_LINE, install_hook, uninstall_hook
from bisect_engine.verdict.inductor_adapter import compiles_routed_through
from bisect_engine.script.levels import (LEVEL_VARIABLE, Level, ScriptSettings, clear_environment,
                                  settings_from_environment)
from bisect_engine.script.ranks import collect_statuses, summarise
from bisect_engine.script.session import Session, script_summary
from bisect_engine.load.contract import defines_model_contract
from bisect_engine.script.messages import DivergenceStop
from bisect_engine.script.runner import exit_status

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RELU_SCRIPT = ROOT / "repro_cases" / "script_relu_bug.py"
CLEAN_SCRIPT = ROOT / "repro_cases" / "script_clean.py"
BACKWARD_SCRIPT = ROOT / "repro_cases" / "script_backward_bug.py"
TORCHRUN_SCRIPT = ROOT / "tests" / "scripts" / "torchrun_rank1_bug.py"


# -- levels and settings ----------------------------------------------------------------------


def test_levels_parse_numbers_and_names() -> None:
    assert Level.parse("2") is Level.CHECK and Level.parse(" Localise ") is Level.LOCALISE
    with pytest.raises(ValueError, match="expected one of 0 off, 1 record"):
        Level.parse("5")
    assert autostart.LEVEL_VARIABLE == LEVEL_VARIABLE


def test_settings_from_environment() -> None:
    settings = settings_from_environment({LEVEL_VARIABLE: "3", "BISECT_ACCURACY_OUT": "o",
                                          "BISECT_ACCURACY_CHECK_EVERY": "5", "BISECT_ACCURACY_STOP": "1"})
    assert (settings.level, settings.out_dir, settings.check_every, settings.stop_on_divergence,
            settings.stage) == (Level.LOCALISE, Path("o"), 5, True, "subsystem")
    assert settings_from_environment({}).level is Level.OFF
    with pytest.raises(ValueError, match="BISECT_ACCURACY_CHECK_EVERY"):
        settings_from_environment({LEVEL_VARIABLE: "2", "BISECT_ACCURACY_CHECK_EVERY": "often"})


@pytest.mark.parametrize(("every", "checked"), [(0, [1]), (1, [1, 2, 3, 4, 5, 6, 7]), (3, [1, 4, 7])])
def test_checked_calls(every: int, checked: list[int]) -> None:
    assert [c for c in range(1, 8) if ScriptSettings(check_every=every).checks_call(c)] == checked


def test_clear_environment_removes_only_ours() -> None:
    environ = {LEVEL_VARIABLE: "2", "BISECT_ACCURACY_OUT": "x", "PATH": "/bin"}
    assert clear_environment(environ) == {LEVEL_VARIABLE: "2", "BISECT_ACCURACY_OUT": "x"}
    assert environ == {"PATH": "/bin"}


def test_exit_status_follows_python() -> None:
    assert exit_status(None) == (0, None) and exit_status(7) == (7, None) and exit_status("bye") == (1, "bye")


# -- model file or script ---------------------------------------------------------------------


@pytest.mark.parametrize(("name", "is_model"), [("relu_bug.py", True), ("script_relu_bug.py", False),
                                                ("script_clean.py", False)])
def test_model_files_and_scripts_are_told_apart_without_running_them(name: str, is_model: bool) -> None:
    assert defines_model_contract(ROOT / "repro_cases" / name) is is_model


# -- ranks --------------------------------------------------------------------------------------


def _status(wall_time: float | None, call: int = 1, final: bool = True) -> dict[str, Any]:
    divergence = None if wall_time is None else {"wall_time": wall_time, "call": call}
    return {"final": final, "divergence": divergence}


def test_summary_orders_ranks_by_time_then_call() -> None:
    summary = summarise({0: _status(None), 1: _status(5.0, 3), 2: _status(5.0, 2), 3: _status(4.0, 9, final=False),
                         4: None})
    assert summary["diverged"] == [1, 2, 3] and summary["first"] == 3 and summary["order"] == [3, 2, 1]
    assert summary["missing"] == [4] and summary["unfinished"] == [3]


@pytest.mark.parametrize(("verdicts", "merged"), [
    (["clean", "clean"], "clean"),
    (["clean", "divergent"], "divergent"),
    (["incomplete", "clean"], "incomplete"),
    (["clean", None], "incomplete"),  # a rank that wrote no status: never seen to the end
    (["crash", "divergent"], "divergent"),
])
def test_one_verdict_covers_every_rank(verdicts: list[str | None], merged: str) -> None:
    statuses = {rank: None if v is None else {**_status(None), "verdict": v} for rank, v in enumerate(verdicts)}
    summary = summarise(statuses)
    assert summary["verdict"] == merged
    assert summary["verdicts"] == {str(r): v or "incomplete" for r, v in enumerate(verdicts)}


def test_a_rank_still_running_is_incomplete_whatever_it_said_so_far() -> None:
    summary = summarise({0: {**_status(None), "verdict": "clean"}, 1: {**_status(None, final=False), "verdict": "clean"}})
    assert (summary["verdict"], summary["verdicts"]) == ("incomplete", {"0": "clean", "1": "incomplete"})


def test_collect_statuses_waits_a_bounded_time(tmp_path: Path) -> None:
    (tmp_path / "rank0").mkdir()
    (tmp_path / "rank0" / "status.json").write_text(json.dumps(_status(None)))
    naps: list[float] = []
    statuses = collect_statuses(tmp_path, 2, wait_s=0.0, sleep=naps.append)
    assert statuses[0] == _status(None) and statuses[1] is None and naps == []


# -- the start-up hook --------------------------------------------------------------------------


def _python(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BISECT_ACCURACY_")}
    completed = subprocess.run([sys.executable, "-c", code], env={**environ, **env}, capture_output=True,
                               text=True, timeout=120, check=True)
    return completed.stdout.strip()


def test_autostart_imports_no_torch_until_dynamo_is_imported() -> None:
    code = "import sys, bisect_engine.autostart; print('torch' in sys.modules)"
    assert _python(code) == "False"
    assert _python(code, **{LEVEL_VARIABLE: "2"}) == "False"


# The program's first process runs under a supervisor forked at start-up (issue 37: a native crash of
# compiled code is a verdict with a report, not the program's death). Programs without torch: fast.
_PROGRAM = """import os, signal, sys
with open(sys.argv[1], "a") as runs:
    runs.write(os.environ.get("BISECT_NATIVE_CRASH_RERUN", "first") + "\\n")
print("ran", flush=True)
if sys.argv[2] == "abort":
    os.abort()
if sys.argv[2] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
sys.exit(5)
"""


def _supervised(tmp_path: Path, how: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    (tmp_path / "program.py").write_text(_PROGRAM)
    env = {**_hook_site_at(tmp_path / "hook"), LEVEL_VARIABLE: "2", "BISECT_ACCURACY_OUT": str(tmp_path / "out")}
    completed = subprocess.run([sys.executable, "program.py", "runs.txt", how], cwd=tmp_path, env=_environment(**env),
                               capture_output=True, text=True, timeout=120)
    return completed, (tmp_path / "runs.txt").read_text().split()


def test_under_the_start_up_supervisor_a_program_ends_as_it_would_alone(tmp_path: Path) -> None:
    completed, runs = _supervised(tmp_path, "exit")
    assert (completed.returncode, completed.stdout, runs) == (5, "ran\n", ["first"]), completed.stderr


def test_a_program_that_dies_natively_is_run_again_isolated_and_leaves_a_report(tmp_path: Path) -> None:
    completed, runs = _supervised(tmp_path, "abort")
    assert completed.returncode == 3 and runs == ["first", "1"], completed.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["verdict"] == "error"  # the rerun died too: not localised, never clean
    assert report["native_crash"] == {"signal": "SIGABRT", "exit": -6, "rerun_exit": -6, "isolated_rerun": True}


def test_a_program_killed_from_outside_is_not_rerun_and_ends_by_the_same_signal(tmp_path: Path) -> None:
    completed, runs = _supervised(tmp_path, "kill")
    assert (completed.returncode, runs) == (-9, ["first"]), completed.stderr


def test_only_the_programs_first_process_is_supervised_at_start_up() -> None:
    assert autostart._first_process({})
    for marked in ("BISECT_ACCURACY_ROOT_PID", "RANK", "BISECT_START_UP_SUPERVISED"):
        assert not autostart._first_process({marked: "1"}), marked


def test_after_import_calls_back_with_the_real_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "watched_module.py").write_text("VALUE = 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[Any] = []
    finder = autostart.AfterImport("watched_module", seen.append)
    sys.meta_path.insert(0, finder)
    try:
        import watched_module  # type: ignore[import-not-found]
    finally:
        autostart.stand_down()
        sys.modules.pop("watched_module", None)
    assert seen == [watched_module] and watched_module.VALUE == 41
    assert type(watched_module.__loader__).__name__ == "SourceFileLoader"
    assert finder not in sys.meta_path


def test_hook_installs_into_the_given_site_packages_and_its_line_is_inert_without_the_package(tmp_path: Path) -> None:
    site_dir = tmp_path / "site"
    (site_dir / "bisect_accuracy-0.1.0.dist-info").mkdir(parents=True)
    record = site_dir / "bisect_accuracy-0.1.0.dist-info" / "RECORD"
    record.write_text("bisect_engine/__init__.py,sha256=x,0\n")
    path = install_hook(site_dir)
    assert path == site_dir / "bisect_accuracy_hook.pth" and path.read_text() == HOOK_LINE
    install_hook(site_dir)  # idempotent
    assert record.read_text().splitlines() == ["bisect_engine/__init__.py,sha256=x,0", "bisect_accuracy_hook.pth,,"]
    # Python runs the line at start-up; with no bisect_engine importable it must do nothing at all.
    empty = subprocess.run([sys.executable, "-I", "-S", "-c",
                            f"import sys; sys.path[:] = [p for p in sys.path if 'site-packages' not in p]; "
                            f"exec(open({str(path)!r}).read()); print('ok', 'bisect_engine' in sys.modules)"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert (empty.stdout, empty.stderr) == ("ok False\n", "")
    assert uninstall_hook(site_dir) == path and not path.exists()
    assert record.read_text().splitlines() == ["bisect_engine/__init__.py,sha256=x,0"]
    assert uninstall_hook(site_dir) is None


# -- the checking backend, in process, with cheap backends -------------------------------------


def _off_by_one(graph_module: torch.fx.GraphModule, _example_inputs: list[Any]) -> Callable[..., Any]:
    """A wrong compiler: every floating output is off by one."""
    def run(*args: Any) -> Any:
        return tuple(v + 1 if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                     for v in graph_module(*args))
    return run


def _function(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * 2


@pytest.fixture
def session_factory(tmp_path: Path) -> Iterator[Callable[..., Session]]:
    torch._dynamo.reset()
    yield lambda **kw: Session(ScriptSettings(out_dir=tmp_path / "out", **kw), tmp_path / "script.py", [], "test")
    torch._dynamo.reset()


def _run_compiled(session: Session, backend: Any, calls: int = 3) -> list[torch.Tensor]:
    original = torch._dynamo.optimize
    with compiles_routed_through(session.wrap_backend):
        compiled = torch.compile(_function, backend=backend)
        outputs = [compiled(torch.full((4,), float(i))) for i in range(calls)]
    assert torch._dynamo.optimize is original
    return outputs


def test_a_wrong_backend_is_reported_and_the_program_keeps_its_result(session_factory: Callable[..., Session]) -> None:
    session = session_factory(level=Level.LOCALISE)
    outputs = _run_compiled(session, _off_by_one)
    assert torch.equal(outputs[0], _function(torch.zeros(4)) + 1)  # the compiled result, wrong as it is
    report = session.finish(0)
    assert report["verdict"] == "divergent" and report["culprit"] is None
    script = report["script"]
    assert script["first_divergence_call"]["graph"] == "graph_0" and script["first_divergence_call"]["call"] == 1
    assert "localisation compiles with Inductor" in script["not_localised"]
    assert Path(script["graphs"][0]["files"][0]).read_text().startswith("class GraphModule")
    assert "diverged: graph_0 on its call 1" in script_summary(report)


def test_stop_on_divergence_ends_the_program_there(session_factory: Callable[..., Session]) -> None:
    session = session_factory(level=Level.CHECK, stop_on_divergence=True)
    with pytest.raises(DivergenceStop) as stop:
        _run_compiled(session, _off_by_one)
    assert stop.value.code == 1 and session.stopped and session.calls == 1


@pytest.mark.parametrize(("every", "checked"), [(0, 1), (2, 2)])
def test_a_right_backend_is_clean_and_checked_as_asked(session_factory: Callable[..., Session], every: int,
                                                       checked: int) -> None:
    session = session_factory(level=Level.CHECK, check_every=every)
    outputs = _run_compiled(session, "aot_eager")
    assert torch.equal(outputs[2], _function(torch.full((4,), 2.0)))
    report = session.finish(0)
    assert report["verdict"] == "clean"
    assert (report["script"]["calls"], report["script"]["calls_checked"]) == (3, checked)
    assert report["script"]["graphs"][0]["backend"] == "aot_eager"


def _scaled(relative: float) -> Callable[..., Any]:
    """A compiler whose floating outputs are off by ``relative`` (a few ulps: rounding noise; 2e-5:
    beyond the ulp rule, within upstream's ``same``; 1e-2: a real error)."""
    def compile(graph_module: torch.fx.GraphModule, _example_inputs: list[Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            return tuple(v * (1 + relative) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                         for v in graph_module(*args))
        return run
    return compile


def _with_graph_break(x: torch.Tensor) -> torch.Tensor:
    gate = torch.erf(x * 0.3) + 2.0
    if gate.max().item() > 0.01:  # a graph break: the gate is an output of the first graph
        return x * gate
    return x - gate


@pytest.mark.parametrize(("relative", "verdict", "listed"), [(1e-6, "clean", 0), (2e-5, "clean", 3),
                                                             (1e-2, "divergent", 0)])
def test_script_calls_are_judged_end_to_end_and_never_stricter_than_upstream(
        session_factory: Callable[..., Session], relative: float, verdict: str, listed: int) -> None:
    """Issue 36: what a compiled call returns (here the gate feeding ``.item()``, and the result) is
    judged at the end-to-end tolerance (a few ulps on it is noise: the script_graph_breaks_erf
    case, cheaply), and never fails where ``torch._dynamo.utils.same`` passes it (listed instead)."""
    session = session_factory(level=Level.CHECK)
    with compiles_routed_through(session.wrap_backend):
        compiled = torch.compile(_with_graph_break, backend=_scaled(relative))
        compiled(torch.linspace(-2, 2, 64))
    report = session.finish(0)
    assert report["verdict"] == verdict, report["script"]
    assert len(session.graphs) == 2 and all(g.checks for g in session.graphs)
    if verdict == "divergent":  # 1 % on the gate read by .item(): no later graph absorbs it (script/reach.py)
        assert report["script"]["first_divergence_call"]["graph"] == "graph_0"
    within = [item for graph in report["script"]["graphs"] for item in graph["within_upstream"]]
    assert len(within) == listed, within  # the gate and its max (graph_0), the result (graph_1)
    assert all(item["reason"] == "upstream_same" and item["compiled_rms_ulps"] > 64 for item in within)
    if listed:
        assert "within torch._dynamo.utils.same's tolerance" in script_summary(report)


def _sigmoid_off(graph_module: torch.fx.GraphModule, _example_inputs: list[Any]) -> Callable[..., Any]:
    """A compiler whose graph computing a sigmoid returns it 1 % off: beyond upstream's ``same``,
    not material (a rounding-sized amount to the material rule); other graphs are right."""
    wrong = any(node.target in (torch.sigmoid, torch.ops.aten.sigmoid.default) for node in graph_module.graph.nodes)

    def run(*args: Any) -> Any:
        return tuple(v * 1.01 if wrong and isinstance(v, torch.Tensor) and v.is_floating_point() else v
                     for v in graph_module(*args))
    return run


def _gated(x: torch.Tensor, how: str) -> torch.Tensor:
    gate = torch.sigmoid(x) * 4  # in (2.9, 3.8) for x in [1, 3]: far from the comparison's threshold
    torch._dynamo.graph_break()  # the gate is an output of the first graph, an input of the second
    if how == "kept":
        return gate
    return torch.where(gate > 2.0, x, -x) if how == "compared" else gate * x


@pytest.mark.parametrize(("how", "verdict", "absorbed"), [("compared", "clean", 1), ("multiplied", "divergent", 0),
                                                        ("kept", "divergent", 0)])
def test_an_interior_error_is_a_divergence_only_where_it_reaches_what_the_program_keeps(
        session_factory: Callable[..., Session], how: str, verdict: str, absorbed: int) -> None:
    """Issue 36, item 3: a graph output that only feeds a later graph, where a comparison absorbs
    its error, is listed (``absorbed``), the run clean; fed into a product, or kept by the program,
    the first graph's call is the divergence."""
    session = session_factory(level=Level.CHECK)
    with compiles_routed_through(session.wrap_backend):
        compiled = torch.compile(lambda x: _gated(x, how), backend=_sigmoid_off)
        result = compiled(torch.linspace(1, 3, 64))
    if how == "compared":
        assert torch.equal(result, torch.linspace(1, 3, 64))  # the program's result: unchanged by the error
    report = session.finish(0)
    assert report["verdict"] == verdict, report["script"]
    graphs = report["script"]["graphs"]
    assert [len(graph["absorbed"]) for graph in graphs][0] == absorbed, graphs
    if verdict == "divergent":
        first = report["script"]["first_divergence_call"]
        assert (first["graph"], first["graph_call"], first["call"]) == ("graph_0", 1, 1), first
    else:
        assert graphs[0]["absorbed"][0]["read_by"] == ["graph_1"] and graphs[0]["within_upstream"] == []
        assert graphs[0]["absorbed"][0]["ops"] is None  # level 2, and not Inductor: no op named
        assert "absorbed by graph_1 and never reached what the program kept" in script_summary(report)


def test_suspects_followed_are_bounded_and_the_first_call_is_the_divergence(
        session_factory: Callable[..., Session]) -> None:
    """A graph failing every call by 1 % (its outputs read by no later graph): at most
    ``reach.CAPACITY`` calls are followed (each holds its inputs); then the oldest is the divergence."""
    from bisect_engine.script.reach import CAPACITY

    session = session_factory(level=Level.CHECK, check_every=1)
    with compiles_routed_through(session.wrap_backend):
        compiled = torch.compile(_function, backend=_scaled(1e-2))
        for i in range(CAPACITY + 4):
            compiled(torch.full((4,), 0.5 + i))
    first = session.finish(0)["script"]["first_divergence_call"]
    assert (first["graph_call"], first["call"]) == (1, 1), first
    assert session.calls_checked == CAPACITY + 1  # checks stop at the divergence


def _accumulate(x: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    total.add_(x)
    return x * 2


def _writes_wrongly(graph_module: torch.fx.GraphModule, _example_inputs: list[Any]) -> Callable[..., Any]:
    """A wrong compiler: right outputs, but the input the graph writes to is off by one."""
    position = [n.target for n in graph_module.graph.nodes if n.op == "placeholder"].index("L_total_")

    def run(*args: Any) -> Any:
        outputs = graph_module(*args)
        args[position].add_(1)
        return outputs
    return run


def test_inputs_written_in_place_are_checked(session_factory: Callable[..., Session]) -> None:
    session = session_factory(level=Level.CHECK)
    total = torch.zeros(4)
    with compiles_routed_through(session.wrap_backend):
        torch.compile(_accumulate, backend=_writes_wrongly)(torch.ones(4), total)
    assert torch.equal(total, torch.full((4,), 2.0))  # the program saw the compiled write, once
    first = session.finish(0)["script"]["first_divergence_call"]
    assert first["output"] == "input 0 (L_total_), written in place", first


def _decode_step(token: torch.Tensor, cache: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
    cache.index_copy_(0, position, token)  # a static KV cache, written in place at each step
    return torch.tanh(cache).sum(dim=0)


def _writes_cache_wrongly(graph_module: torch.fx.GraphModule, _example_inputs: list[Any]) -> Callable[..., Any]:
    """A wrong compiler for the decode step: right outputs, the cache row it writes off by one."""
    position = [n.target for n in graph_module.graph.nodes if n.op == "placeholder"].index("L_cache_")

    def run(*args: Any) -> Any:
        outputs = graph_module(*args)
        args[position].add_(1)
        return outputs
    return run


@pytest.mark.parametrize("backend", ["aot_eager", "writes_wrongly"])
def test_a_static_cache_written_in_place_on_every_step_is_checked(session_factory: Callable[..., Session],
                                                                  backend: str) -> None:
    """HF ``generate()`` with ``cache_implementation="static"`` in small (the corpus case
    tests/scripts/hf_generate_static.py runs the real one): a buffer marked as a static address,
    written in place with ``index_copy_`` by one graph called at every step."""
    session = session_factory(level=Level.CHECK, check_every=1)
    cache = torch.zeros(4, 3)
    torch._dynamo.mark_static_address(cache)
    compiled = _writes_cache_wrongly if backend == "writes_wrongly" else backend
    with compiles_routed_through(session.wrap_backend):
        step = torch.compile(_decode_step, backend=compiled, fullgraph=True)
        for i in range(3):
            step(torch.full((1, 3), float(i + 1)), cache, torch.tensor([i]))
    report = session.finish(0)
    graphs = report["script"]["graphs"]
    if backend == "aot_eager":
        assert torch.equal(cache[:3, 0], torch.tensor([1.0, 2.0, 3.0]))
        assert report["verdict"] == "clean" and [(g["calls"], g["checks"]) for g in graphs] == [(3, 3)], graphs
    else:
        first = report["script"]["first_divergence_call"]
        assert (report["verdict"], first["output"]) == ("divergent", "input 0 (L_cache_), written in place"), first


def _bf16_in_fp32(graph_module: torch.fx.GraphModule, _example_inputs: list[Any]) -> Callable[..., Any]:
    """A right compiler under autocast: it computes in fp32 and rounds the results to bf16 (as
    Inductor's fused kernels do), so it differs from eager's bf16 ops by bf16 rounding only."""
    def run(*args: Any) -> Any:
        with torch.autocast("cpu", enabled=False):
            outputs = graph_module(*[a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                                     for a in args])
        return tuple(v.bfloat16() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in outputs)
    return run


def _autocast_mlp(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.relu(torch.layer_norm(x @ w, (16,)) @ w)


@pytest.mark.parametrize(("backend", "verdict"), [(_bf16_in_fp32, "clean"), (_off_by_one, "divergent")])
def test_bf16_rounding_under_autocast_is_not_a_divergence(session_factory: Callable[..., Session], backend: Any,
                                                          verdict: str) -> None:
    """CPU AMP (``torch.autocast("cpu", dtype=torch.bfloat16)``) in small (the corpus case
    tests/scripts/amp_bf16_gradscaler.py runs it with GradScaler and Inductor)."""
    session = session_factory(level=Level.CHECK)
    generator = torch.Generator().manual_seed(0)
    x, w = torch.randn(32, 16, generator=generator), torch.randn(16, 16, generator=generator) / 4
    with compiles_routed_through(session.wrap_backend), torch.autocast("cpu", dtype=torch.bfloat16):
        output = torch.compile(_autocast_mlp, backend=backend)(x, w)
    assert output.dtype == torch.bfloat16
    report = session.finish(0)
    assert report["verdict"] == verdict and report["script"]["graphs"][0]["checked"], report["script"]


def _wrong_backward_compiler(graph_module: torch.fx.GraphModule, _example_inputs: Any) -> Callable[..., Any]:
    def run(args: list[Any]) -> list[Any]:
        return [g * 2 if isinstance(g, torch.Tensor) else g for g in graph_module(*args)]
    run._boxed_call = True  # type: ignore[attr-defined]
    return run


def test_gradients_are_checked_in_a_training_step(session_factory: Callable[..., Session]) -> None:
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    backend = aot_autograd(fw_compiler=lambda gm, _: make_boxed_func(gm.forward), bw_compiler=_wrong_backward_compiler)
    session = session_factory(level=Level.CHECK)
    weight = torch.randn(4, requires_grad=True)
    with compiles_routed_through(session.wrap_backend):
        output = torch.compile(lambda x, w: torch.tanh(x * w), backend=backend)(torch.randn(4), weight)
    output.sum().backward()  # the program's own backward still runs (through the wrong compiler)
    first = session.finish(0)["script"]["first_divergence_call"]
    assert first["output"] == "gradient of input 1 (L_w_)", first


def test_level_1_records_graphs_without_checking(session_factory: Callable[..., Session], tmp_path: Path) -> None:
    session = session_factory(level=Level.RECORD)
    _run_compiled(session, _off_by_one)
    report = session.finish(0)
    assert report["verdict"] == "unchecked" and report["script"]["calls_checked"] == 0
    inputs = torch.load(tmp_path / "out" / "graphs" / "graph_0_call_1.pt")
    assert torch.equal(inputs[0], torch.zeros(4))


def test_a_graph_compiled_and_never_called_is_named_and_the_run_is_incomplete(
        session_factory: Callable[..., Session]) -> None:
    session = session_factory(level=Level.CHECK)
    _run_compiled(session, "aot_eager", calls=1)
    graph = torch.fx.symbolic_trace(torch.nn.Tanh())
    session.add_graph(graph, "inductor", {})  # compiled (say, a recompile) and never called by the program
    report = session.finish(0)
    assert report["verdict"] == "incomplete", report["script"]
    graphs = report["script"]["graphs"]
    assert [(g["checked"], g["not_checked_reason"] is None) for g in graphs] == [(True, True), (False, False)]
    assert "never called by the program" in report["script"]["graphs_unseen"]["graph_1"]
    assert "not checked: graph_1: compiled but never called" in script_summary(report)


def test_a_check_that_fails_is_not_checked_and_never_clean(session_factory: Callable[..., Session]) -> None:
    session = session_factory(level=Level.CHECK)
    with compiles_routed_through(session.wrap_backend):
        compiled = torch.compile(_function, backend="aot_eager")
        with unittest.mock.patch("bisect_engine.script.session.reference_outputs", side_effect=RuntimeError("x")):
            compiled(torch.zeros(4))
    report = session.finish(0)
    assert report["verdict"] == "incomplete"
    assert report["script"]["graphs_unseen"] == {"graph_0": "checking it failed (RuntimeError: x): not checked, "
                                                            "never a match"}


def _halve(grad: torch.Tensor) -> torch.Tensor:
    return grad * 0.5


def _hooked(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    hidden = x * w
    hidden.register_hook(_halve)  # Dynamo keeps the registration in the graph (a register_hook node)
    return torch.tanh(hidden)


@pytest.mark.parametrize("backend", ["aot_eager", "off_by_one"])
def test_a_graph_that_registers_a_tensor_hook_is_checked(session_factory: Callable[..., Session],
                                                         backend: str) -> None:
    session = session_factory(level=Level.CHECK)
    x, weight = torch.randn(4), torch.randn(4, requires_grad=True)
    with compiles_routed_through(session.wrap_backend):
        compiled = torch.compile(_hooked, backend=_off_by_one if backend == "off_by_one" else backend)
        output = compiled(x, weight)
    targets = [n.target for n in session.graphs[0].graph_module.graph.nodes]
    assert torch.ops.higher_order.register_hook in targets, targets  # the case at hand: registered in the graph
    report = session.finish(0)
    if backend == "aot_eager":
        output.sum().backward()  # the program's hook still acts in its backward
        assert torch.allclose(weight.grad, 0.5 * x * (1 - torch.tanh(x * weight.detach()) ** 2))
        assert report["verdict"] == "clean" and report["script"]["graphs"][0]["checked"], report["script"]
    else:
        assert report["verdict"] == "divergent", report["script"]


def _backward_off_by_one(graph_module: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    """A compiler wrong in compiled autograd's backward graphs only (each forward graph, and the
    backward its gradient check runs outside compiled autograd, stay right)."""
    from bisect_engine.verdict.inductor_adapter import in_compiled_autograd

    if in_compiled_autograd():
        return _off_by_one(graph_module, example_inputs)
    return torch._dynamo.lookup_backend("aot_eager")(graph_module, example_inputs)


@pytest.mark.parametrize("backend", ["aot_eager", "backward_off_by_one"])
def test_compiled_autograd_backward_graphs_are_judged_on_the_programs_calls(
        session_factory: Callable[..., Session], backend: str) -> None:
    """``torch._dynamo.config.compiled_autograd = True`` and ``loss.backward()`` in a compiled step:
    the backward graph (a list input, the new gradients as outputs) judged through its flat copy."""
    session = session_factory(level=Level.CHECK)
    weight = torch.nn.Parameter(torch.randn(4, 4, generator=torch.Generator().manual_seed(0)))

    def step(x: torch.Tensor) -> torch.Tensor:
        loss = torch.tanh(x @ weight).square().mean()
        loss.backward()
        return loss

    compiler = _backward_off_by_one if backend == "backward_off_by_one" else backend
    try:
        with compiles_routed_through(session.wrap_backend), torch._dynamo.config.patch(compiled_autograd=True):
            torch.compile(step, backend=compiler)(torch.ones(2, 4))
    finally:
        torch._dynamo.compiled_autograd.reset()
    expected = weight.detach().clone().requires_grad_(True)
    torch.tanh(torch.ones(2, 4) @ expected).square().mean().backward()
    report = session.finish(0)
    graphs = report["script"]["graphs"]
    assert len(graphs) == 2 and session.graphs[1].flat is not None, graphs  # the forward, then the backward
    if backend == "aot_eager":
        assert torch.allclose(weight.grad, expected.grad)
        assert report["verdict"] == "clean" and all(g["checked"] for g in graphs), graphs
    else:
        assert torch.allclose(weight.grad, expected.grad + 1)  # the program got the wrong gradient
        first = report["script"]["first_divergence_call"]
        assert (report["verdict"], first["graph"]) == ("divergent", "graph_1"), report["script"]
        assert graphs[0]["outcome"] == "match", graphs


def _raises(_graph_module: torch.fx.GraphModule, _example_inputs: list[Any]) -> Callable[..., Any]:
    raise ValueError("planted compile failure")


def test_a_compile_that_raises_is_a_crash_and_the_program_sees_its_exception(
        session_factory: Callable[..., Session]) -> None:
    session = session_factory(level=Level.CHECK)
    with compiles_routed_through(session.wrap_backend):
        with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="planted compile failure"):
            torch.compile(_function, backend=_raises)(torch.zeros(4))
    report = session.finish(1)
    assert report["verdict"] == "crash", report["script"]
    assert report["script"]["graphs"][0]["outcome"] == "crash"
    assert report["crash"]["error"] == "ValueError: planted compile failure"
    assert report["script"]["first_divergence_call"]["graph"] == "graph_0"
    assert "crashed: compiling graph_0 (after 0 program call(s)): ValueError: planted compile failure" \
        in script_summary(report)


def _runs_out_of_memory(_graph_module: torch.fx.GraphModule, _example_inputs: list[Any]) -> Callable[..., Any]:
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")  # autotuning on a full device


def test_a_compile_that_runs_out_of_memory_is_not_checked_never_a_crash_and_the_program_sees_it(
        session_factory: Callable[..., Session]) -> None:
    session = session_factory(level=Level.CHECK)
    with compiles_routed_through(session.wrap_backend):
        with pytest.raises(torch._dynamo.exc.BackendCompilerFailed, match="CUDA out of memory"):
            torch.compile(_function, backend=_runs_out_of_memory)(torch.zeros(4))
    report = session.finish(1)
    assert report["verdict"] == "incomplete", report["verdict"]  # never crash, clean or divergent
    graph = report["script"]["graphs"][0]
    assert graph["outcome"] == "not_checked" and any("ran out of memory" in note for note in graph.get("notes", [])), graph
    assert report.get("crash") is None and report["script"]["first_divergence_call"] is None


def test_our_check_of_a_call_that_runs_out_of_memory_is_not_checked_and_named_so(
        session_factory: Callable[..., Session], monkeypatch: pytest.MonkeyPatch) -> None:
    """An allocation that fails in the tool's own check of a call (its fp64 references here): the call
    is not checked, never a match or a finding, and the report says it was our memory (it said only
    "checking it failed"); the program gets its compiled result all the same."""
    from bisect_engine.script import session as session_module

    def references_run_short(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory")

    monkeypatch.setattr(session_module, "reference_outputs", references_run_short)
    session = session_factory(level=Level.CHECK)
    with compiles_routed_through(session.wrap_backend):
        result = torch.compile(_function, backend="aot_eager")(torch.ones(4))
    assert torch.equal(result, _function(torch.ones(4)))
    report = session.finish(0)
    assert report["verdict"] == "incomplete", report["verdict"]
    graph = report["script"]["graphs"][0]
    assert graph["outcome"] == "error" and not graph["checked"], graph
    assert session_module.CHECK_OUT_OF_MEMORY in graph.get("notes", []), graph
    unseen = report["script"]["graphs_unseen"]
    assert list(unseen) == ["graph_0"] and unseen["graph_0"].startswith("checking it ran out of memory"), unseen


def test_calls_on_fake_tensors_are_the_compilers_not_the_programs(session_factory: Callable[..., Session]) -> None:
    """DDPOptimizer calls each compiled bucket piece on fake tensors while it compiles the split
    graph: no value to check there (checking one failed with DataDependentOutputException)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    session = session_factory(level=Level.CHECK)
    record = session.add_graph(torch.fx.symbolic_trace(torch.nn.Tanh()), "inductor", {})
    seen: list[Any] = []
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.zeros(4))
        session.call(record, lambda *args: seen.append(args) or torch.tanh(args[0]), (fake,))
    assert len(seen) == 1 and (record.calls, session.calls) == (0, 0)
    session.call(record, torch.tanh, (torch.zeros(4),))
    report = session.finish(0)
    assert report["verdict"] == "clean" and report["script"]["graphs"][0]["calls"] == 1, report["script"]


def test_a_rank_that_compiled_nothing_says_so_and_the_summary_covers_it(tmp_path: Path) -> None:
    """torch.compile(DistributedDataParallel(model)) on torch 2.13: Dynamo breaks on DDP's logger and
    compiles no graph. A launcher that compiles nothing stays silent; a rank of the program never does."""
    import contextlib

    from bisect_engine.script.ranks import RankInfo
    from bisect_engine.script.session import ActiveSession, _finish_at_exit

    settings = ScriptSettings(level=Level.CHECK, out_dir=tmp_path / "out", summary_wait_s=0.0)
    session = Session(settings, tmp_path / "train.py", [], "environment", rank=RankInfo(0, 1, 0))
    _finish_at_exit(ActiveSession(session, contextlib.ExitStack()))
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["verdict"], summary["verdicts"]) == ("unchecked", {"0": "unchecked"}), summary


def test_calls_inside_the_tools_own_work_are_not_the_programs(session_factory: Callable[..., Session]) -> None:
    session = session_factory(level=Level.CHECK)
    with compiles_routed_through(session.wrap_backend):
        compiled = torch.compile(_function, backend="aot_eager")
        with session.tool_work():
            compiled(torch.zeros(4))  # the graph is compiled and called by the tool: never the program's graph
        compiled(torch.ones(4))
    report = session.finish(0)
    assert report["verdict"] == "clean" and report["script"]["calls"] == 1, report["script"]


# -- end to end, real Inductor compiles ---------------------------------------------------------


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str
    out_dir: Path
    cwd: Path
    repro_again: subprocess.CompletedProcess[str] | None = None  # its repro, run once more in a fresh process

    @property
    def report(self) -> dict[str, Any]:
        return json.loads((self.out_dir / "report.json").read_text())


def _expected(script: Path) -> dict[str, Any]:
    tree = parse_python(script.read_text())
    return next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                and any(getattr(target, "id", None) == "EXPECTED" for target in node.targets))


def _environment(**extra: str) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BISECT_ACCURACY_")}
    return {**environ, "PYTHONDONTWRITEBYTECODE": "1", **extra}


def _run(base: Path, name: str, command: list[str], **env: str) -> Run:
    cwd, out_dir = base / name / "cwd", base / name / "out"
    cwd.mkdir(parents=True)
    env = {k: v.replace("{out}", str(out_dir)) for k, v in env.items()}
    command = [part.replace("{out}", str(out_dir)) for part in command]
    completed = subprocess.run(command, cwd=cwd, env=_environment(**env), capture_output=True, text=True, timeout=600)
    return Run(completed.returncode, completed.stdout, completed.stderr, out_dir, cwd)


def _tool(*args: str) -> list[str]:
    return [str(BIN / "bisect-accuracy"), "run", "--out", "{out}", "--verify-runs", "1", "-q", *args]


def _python_script(*args: str) -> list[str]:
    return [sys.executable, *args]


RUNS: dict[str, tuple[list[str], dict[str, str]]] = {
    "plain_relu": (_python_script(str(RELU_SCRIPT), "--steps", "2"), {}),
    "cli_relu": (_tool("--trace", str(RELU_SCRIPT), "--steps", "2"), {}),
    "env_relu": (_python_script(str(RELU_SCRIPT), "--steps", "2"),
                 {LEVEL_VARIABLE: "4", "BISECT_ACCURACY_OUT": "{out}", "BISECT_ACCURACY_VERIFY_RUNS": "1",
                  "TORCH_TRACE": "{out}_torch_trace"}),
    "cli_backward": (_tool(str(BACKWARD_SCRIPT), "--level", "3"), {}),
    "plain_clean": (_python_script(str(CLEAN_SCRIPT), "--exit-code", "3"), {}),
    "cli_clean": (_tool(str(CLEAN_SCRIPT), "--exit-code", "3"), {}),
    "env_clean": (_python_script(str(CLEAN_SCRIPT), "--exit-code", "3"),
                  {LEVEL_VARIABLE: "check", "BISECT_ACCURACY_OUT": "{out}"}),
    "torchrun": ([str(BIN / "torchrun"), "--standalone", "--nproc_per_node", "2", str(TORCHRUN_SCRIPT)],
                 {LEVEL_VARIABLE: "3", "BISECT_ACCURACY_OUT": "{out}", "OMP_NUM_THREADS": "1"}),
}


def _hook_site(factory: pytest.TempPathFactory) -> dict[str, str]:
    return _hook_site_at(factory.mktemp("hook"))


def _hook_site_at(base: Path) -> dict[str, str]:
    """The real hook line, installed into a throwaway site folder that every process of the runs
    adds at start-up (a ``sitecustomize`` on PYTHONPATH): nothing is written to the venv."""
    site_dir, custom = base / "site", base / "custom"
    site_dir.mkdir(parents=True)
    custom.mkdir()
    install_hook(site_dir)
    (custom / "sitecustomize.py").write_text(f"import site\nsite.addsitedir({str(site_dir)!r})\n")
    return {"PYTHONPATH": os.pathsep.join([str(custom), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


# The runs whose repro the tests run once more in a fresh process without the tool's environment: in
# the same background job, so that run overlaps the in-process tests instead of trailing them.
REPRO_AGAIN = ("env_relu",)


def _repro_again(run: Run) -> subprocess.CompletedProcess[str]:
    repro = Path(run.report["repro"]["path"])
    return subprocess.run([sys.executable, repro.name], cwd=repro.parent, env=_environment(),
                          capture_output=True, text=True, timeout=600)


def _run_and_repro(base: Path, name: str, command: list[str], **env: str) -> Run:
    run = _run(base, name, command, **env)
    if name in REPRO_AGAIN and run.exit_code == 0 and (run.out_dir / "report.json").exists() and run.report.get("repro"):
        return replace(run, repro_again=_repro_again(run))
    return run


def _jobs(factory: pytest.TempPathFactory) -> dict[str, Callable[[], Run]]:
    base, site = factory.mktemp("script_mode"), _hook_site(factory)
    return {name: (lambda name=name, command=command, env=env: _run_and_repro(base, name, command, **{**site, **env}))
            for name, (command, env) in RUNS.items()}


def background_jobs(session: pytest.Session) -> list[Job]:
    """The runs, started when collection ends, when any test of this file reads them (tests/conftest.py)."""
    wanted = fixtures_read(session, sys.modules[__name__])
    factory = session.config._tmp_path_factory  # type: ignore[attr-defined]
    jobs = [Job(f"script:{name}", 40.0, run) for name, run in _jobs(factory).items()] if "runs" in wanted else []
    if "own_runs" in wanted:
        jobs += [Job(f"script:{name}", 60.0, run) for name, run in _own_jobs(factory).items()]
    return jobs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    return {name: background_result(f"script:{name}", lambda name=name: _jobs(tmp_path_factory)[name]())
            for name in RUNS}


@pytest.mark.e2e
def test_cli_and_environment_variable_find_the_same_culprit(runs: dict[str, Run]) -> None:
    cli, env = runs["cli_relu"], runs["env_relu"]
    assert cli.exit_code == 1, cli.stderr
    assert env.exit_code == 0, env.stderr  # the program's own status: the hook never ends it by default
    for run in (cli, env):
        report = run.report
        assert report["verdict"] == "divergent", run.stderr
        expected = _expected(RELU_SCRIPT)
        assert {k: report["culprit"][k] for k in ("op", "graph", "kind")} == \
               {k: expected[k] for k in ("op", "graph", "kind")}
        assert report["repro"]["status"] == "REPRODUCED", report["repro"]
        assert report["script"]["first_divergence_call"]["call"] == 1
        # the program's own output, exactly as a plain run of the same (buggy) program prints it
        assert run.stdout == runs["plain_relu"].stdout and run.stdout.count("\n") == 2, run.stdout
    assert cli.report["culprit"]["node"] == env.report["culprit"]["node"]
    assert (cli.report["script"]["mode"], env.report["script"]["mode"]) == ("cli", "environment")


@pytest.mark.e2e
def test_findings_go_into_the_structured_trace_under_the_culprit_graphs_compile(runs: dict[str, Run]) -> None:
    """--trace keeps the trace in OUT/trace/; TORCH_TRACE (the hook's run) writes it where it says."""
    from test_trace import artifacts

    for run, traces in ((runs["cli_relu"], [runs["cli_relu"].out_dir / "trace" / "torch_trace.log"]),
                        (runs["env_relu"], sorted(Path(f"{runs['env_relu'].out_dir}_torch_trace").glob("*.log")))):
        report = run.report
        graph = next(g for g in report["graphs"] if g["name"] == report["culprit"]["graph"])
        trace = Path(report["trace"]["path"])  # TORCH_TRACE: one file a process (the repro's runs too)
        assert trace in traces, (report.get("trace"), traces)
        found = [(record["artifact"]["name"], f"{record['frame_id']}/{record['frame_compile_id']}")
                 for record, _ in artifacts(trace)]
        assert ("bisect_accuracy_finding", graph["compile_id"]) in found, (found, run.stderr)


@pytest.mark.e2e
def test_a_bug_in_the_backward_is_found_through_the_gradients(runs: dict[str, Run]) -> None:
    run = runs["cli_backward"]
    assert run.exit_code == 1, run.stderr
    report, expected = run.report, _expected(BACKWARD_SCRIPT)
    assert report["script"]["first_divergence_call"]["output"].startswith("gradient of input")
    culprit = report["culprit"]
    assert (culprit["op"], culprit["graph"], culprit["kind"], culprit["forward_op"]["op"]) == \
           (expected["op"], expected["graph"], expected["kind"], expected["forward_op"]), run.stderr
    assert {k: report["subsystem"][k] for k in ("kind", "name")} == expected["subsystem"]
    assert "repro" not in report or report["repro"] is None  # level 3: no repro


@pytest.mark.e2e
def test_the_repro_reproduces_in_a_fresh_process(runs: dict[str, Run]) -> None:
    again = runs["env_relu"].repro_again or _repro_again(runs["env_relu"])
    assert again.returncode == 1, again.stdout + again.stderr


@pytest.mark.e2e
def test_a_clean_script_keeps_its_stdout_and_exit_status(runs: dict[str, Run]) -> None:
    plain = runs["plain_clean"]
    assert plain.exit_code == 3 and plain.stdout.count("\n") == 2
    for name, verdict in (("cli_clean", "clean"), ("env_clean", "incomplete")):
        run = runs[name]
        assert (run.exit_code, run.stdout) == (plain.exit_code, plain.stdout), run.stderr
        report = run.report
        assert report["verdict"] == verdict and report["script"]["calls_checked"] == 1, run.stderr
    # dropout: eager and Inductor draw differently; the engine, fed eager's draws, clears it (level 4);
    # level 2 cannot tell, so that graph is not checked and the run is never clean
    assert runs["cli_clean"].report["script"]["graphs"][0]["outcome"] == "random_ok_as_data"
    assert runs["env_clean"].report["script"]["graphs"][0]["outcome"] == "inconclusive_random"
    assert "level 2 cannot tell" in runs["env_clean"].report["script"]["graphs_unseen"]["graph_0"]


@pytest.mark.e2e
def test_nothing_is_written_outside_the_output_folder(runs: dict[str, Run]) -> None:
    for name, run in runs.items():
        assert list(run.cwd.iterdir()) == [], name


@pytest.mark.e2e
def test_torchrun_gives_per_rank_reports_and_a_summary(runs: dict[str, Run]) -> None:
    run = runs["torchrun"]
    assert run.exit_code == 0, run.stderr
    summary = json.loads((run.out_dir / "summary.json").read_text())
    assert (summary["diverged"], summary["first"], summary["missing"]) == ([1], 1, []), summary
    rank0 = json.loads((run.out_dir / "rank0" / "report.json").read_text())
    rank1 = json.loads((run.out_dir / "rank1" / "report.json").read_text())
    assert rank0["verdict"] == "clean" and rank0["script"]["rank"]["rank"] == 0
    assert rank1["verdict"] == "divergent" and rank1["culprit"]["op"] == "aten.relu.default"
    # both ranks ran to the end (their lines may interleave: they share torchrun's stdout)
    assert sorted(re.findall(r"rank \d step \d", run.stdout)) == \
        ["rank 0 step 0", "rank 0 step 1", "rank 1 step 0", "rank 1 step 1"], run.stdout


# -- scripts that fail ----------------------------------------------------------------------------


def test_a_script_runs_as_under_python(tmp_path: Path) -> None:
    """``__main__``, argv, sys.path[0], the working directory, and no torch before the script's own import."""
    script = tmp_path / "show.py"
    script.write_text("import os, sys\n"
                      "print(__name__, sys.argv[1:], 'torch' in sys.modules, os.getcwd())\n"
                      "print(sys.path[0] == os.path.dirname(os.path.abspath(__file__)))\n")
    command = [str(script), "a", "--lr=0.1", "--", "--out", "x"]
    python = subprocess.run([sys.executable, *command[:3], *command[4:]], capture_output=True, text=True,
                            env=_environment(), cwd=tmp_path)
    ours = subprocess.run([str(BIN / "bisect-accuracy"), "run", "--out", str(tmp_path / "o"), *command],
                          capture_output=True, text=True, env=_environment(), cwd=tmp_path, timeout=300)
    assert python.returncode == 0 and ours.stdout == python.stdout == \
           f"__main__ ['a', '--lr=0.1', '--out', 'x'] False {tmp_path}\nTrue\n", ours.stderr
    # It compiled nothing, so nothing was checked: never a pass.
    assert ours.returncode == 2 and "the script compiled nothing" in ours.stderr
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["script"]["graphs_compiled"] == 0 and report["verdict"] == "unchecked"


@pytest.mark.parametrize(("source", "code", "stdout", "message"), [
    ("import sys\nprint('before')\nsys.exit('bye')\n", 1, "before\n", "bye"),
    ("print('before')\nraise SystemExit(4)\n", 4, "before\n", None),
    ("import sys\nprint('before', sys.argv[1:])\ndef fail():\n    raise ValueError('broken')\nfail()\n", 1,
     "before ['a', '--b']\n", "ValueError: broken"),
], ids=["exit-message", "exit-code", "raises"])
def test_a_script_that_exits_or_raises_behaves_as_under_python(tmp_path: Path, source: str, code: int, stdout: str,
                                                               message: str | None) -> None:
    script = tmp_path / "script.py"
    script.write_text(source)
    python = subprocess.run([sys.executable, str(script), "a", "--b"], capture_output=True, text=True,
                            env=_environment())
    ours = subprocess.run([str(BIN / "bisect-accuracy"), "run", str(script), "a", "--b", "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, env=_environment(), timeout=300)
    assert (ours.returncode, ours.stdout) == (python.returncode, python.stdout) == (code, stdout)
    if message:
        assert message in ours.stderr and message in python.stderr
    if "Traceback" in python.stderr:
        assert ours.stderr.split("Traceback", 1)[1].startswith(" (most recent call last):\n  File \"" + str(script))


@pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all",
                    reason="SUITE full: make test checks a package through script_aoti_attention (tests/test_aoti.py)")
def test_an_aot_inductor_package_the_script_compiles_is_checked(tmp_path: Path) -> None:
    """torch.export + aoti_compile_and_package + aoti_load_package: the package, run on the exported
    program's example inputs, is checked against the exported graph eagerly and in fp64: clean, exit 0."""
    script = Path(__file__).parent / "scripts" / "aoti_package.py"
    env = {**_environment(), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    ours = subprocess.run([str(BIN / "bisect-accuracy"), "run", str(script), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert ours.returncode == 0 and "compiled nothing" not in ours.stderr, ours.stderr
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["script"]["aot_inductor"] is True and report["verdict"] == "clean"
    graph = report["script"]["graphs"][0]
    # checked twice: on the exported program's example inputs, then on the script's own call of the loaded package
    assert (graph["backend"], graph["outcome"], graph["checks"]) == ("aot_inductor", "match", 2)


@pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all",
                    reason="SUITE full (an AOTInductor build, ~30 CPU-seconds): make test checks the same session "
                           "path, verdict and exit status in process (tests/test_aoti.py, loaded from elsewhere)")
def test_an_aot_inductor_package_compiled_elsewhere_is_named_not_checked(tmp_path: Path) -> None:
    """aoti_load_package of a file another process compiled: not checked, by name (exit 4)."""
    package = tmp_path / "m.pt2"
    make = ("import torch; from torch import nn; torch.manual_seed(0); x = torch.randn(2, 8); "
            "ep = torch.export.export(nn.Linear(8, 4).eval(), (x,)); "
            f"torch._inductor.aoti_compile_and_package(ep, package_path={str(package)!r})")
    env = {**_environment(), "TORCHINDUCTOR_CACHE_DIR": str(seeded_cache_dir(tmp_path / "cache"))}
    subprocess.run([sys.executable, "-c", make], check=True, env=env, timeout=600, capture_output=True)
    script = Path(__file__).parent / "scripts" / "aoti_load_elsewhere.py"
    ours = subprocess.run([str(BIN / "bisect-accuracy"), "run", str(script), str(package), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert ours.returncode == 4, ours.stderr
    assert f"an AOTInductor package loaded from {package} was compiled in another process" in ours.stderr
    assert "compiled nothing" not in ours.stderr and ours.stdout == "torch.Size([2, 4])\n"
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["verdict"] == "incomplete" and report["script"]["graphs"][0]["outcome"] == "not_checked"


# -- issue 35: hooks, compiled autograd, a compile that crashes (each run alone: select with -k) --------

SCRIPTS = Path(__file__).parent / "scripts"
ALL_CORPUS = os.environ.get("BISECT_CORPUS", "ci") == "all"


def _own_run(tmp_path: Path, script: str, *args: str) -> Run:
    """One script-mode run through the CLI with a fresh Inductor cache (a planted bug compiled once
    would be served from the cache to the next compile of the same graph)."""
    return _run(tmp_path, "run", _tool(str(SCRIPTS / script), *args),
                TORCHINDUCTOR_CACHE_DIR=str(seeded_cache_dir(tmp_path / "cache")))


# The issue-35 runs make test reads, by name: script and arguments, and the planted config key its
# repro is run without (in the same job: both are runs in fresh processes).
OWN_RUNS: dict[str, tuple[str, tuple[str, ...], str | None]] = {
    "autograd_clean": ("compiled_autograd_tanh.py", (), None),
    "autograd_bug": ("compiled_autograd_tanh.py", ("--bug", "--level", "3"), None),
    "crash": ("inductor_crash.py", ("--planted",), "cpp.inject_relu_bug_TESTING_ONLY"),
}


def _own_and_without(base: Path, script: str, args: tuple[str, ...], key: str | None
                     ) -> tuple[Run, subprocess.CompletedProcess[str] | None]:
    run = _own_run(base, script, *args)
    return run, (_repro_without(run, key) if key and run.report and run.report.get("repro") else None)


def _own_jobs(factory: pytest.TempPathFactory) -> dict[str, Callable[[], Any]]:
    """Each an argument-free callable: in the background pool (tests/conftest.py) beside the in-process
    tests, as the other script runs of this file are."""
    return {name: (lambda name=name, script=script, args=args, key=key:
                   _own_and_without(factory.mktemp(f"own-{name}"), script, args, key))
            for name, (script, args, key) in OWN_RUNS.items()}


@pytest.fixture(scope="module")
def own_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Any]:
    """``own_runs(name)``: the named run of :data:`OWN_RUNS` and its repro without the plant, waited for."""
    return lambda name: background_result(f"script:{name}", lambda: _own_jobs(tmp_path_factory)[name]())


def _repro_without(run: Run, key: str) -> subprocess.CompletedProcess[str]:
    """The run's repro in a fresh process with the planted config key taken out of it."""
    repro = Path(run.report["repro"]["path"])
    script, removed = re.subn(rf"^    {re.escape(repr(key))}: .*,\n", "", repro.read_text(), flags=re.M)
    assert removed == 1, f"{key} not in the repro's INDUCTOR_CONFIG"
    fixed = repro.with_name("repro_without_bug.py")
    fixed.write_text(script)
    return subprocess.run([sys.executable, fixed.name], cwd=fixed.parent, env=_environment(), capture_output=True,
                          text=True, timeout=600)


@pytest.mark.e2e
@pytest.mark.skipif(not ALL_CORPUS, reason="BISECT_CORPUS=all (make test's time): a hook's graph is judged in process "
                                           "(test_a_graph_that_registers_a_tensor_hook_is_checked), localisation and "
                                           "the repro through the CLI by cli_relu")
def test_a_bug_beside_a_tensor_hook_is_found_with_its_repro(tmp_path: Path) -> None:
    run = _own_run(tmp_path, "hooks_relu.py", "--bug")
    assert run.exit_code == 1, run.stderr
    report = run.report
    assert (report["verdict"], report["culprit"]["op"]) == ("divergent", "aten.relu.default"), run.stderr
    assert report["repro"]["status"] == "REPRODUCED" and [r["exit"] for r in report["repro"]["runs"]] == [1]
    assert _repro_without(run, "cpp.inject_relu_bug_TESTING_ONLY").returncode == 0


@pytest.mark.e2e
@pytest.mark.skipif(not ALL_CORPUS, reason="the clean twin: the hook path is covered in process (aot_eager)")
def test_a_clean_program_with_hooks_is_clean(tmp_path: Path) -> None:
    run = _own_run(tmp_path, "hooks_relu.py")
    assert run.exit_code == 0 and run.report["verdict"] == "clean", run.stderr
    assert all(graph["checked"] for graph in run.report["script"]["graphs"])


@pytest.mark.e2e
def test_a_clean_program_under_compiled_autograd_is_clean_with_its_backward_graphs_judged(own_runs: Any) -> None:
    run, _ = own_runs("autograd_clean")
    assert run.exit_code == 0, run.stderr
    report = run.report
    assert report["verdict"] == "clean", run.stderr
    graphs = report["script"]["graphs"]
    assert len(graphs) == 2 and all(g["checked"] and g["outcome"] == "match" for g in graphs), graphs
    assert not report["script"]["graphs_unseen"]


def test_a_list_input_is_made_flat_only_where_read_item_by_item() -> None:
    """Compiled autograd's graphs take a list; one read only by constant index becomes one
    placeholder per item, one read otherwise (here stacked whole) stays as it is (named not checked)."""
    import operator

    from bisect_engine.script.flat_inputs import flat_graph

    graph = torch.fx.Graph()
    items, scale = graph.placeholder("items"), graph.placeholder("scale")
    first, second = (graph.call_function(operator.getitem, (items, i)) for i in (0, 1))
    graph.output((graph.call_function(torch.sub, (second, first)), graph.call_function(torch.mul, (first, scale))))
    module = torch.fx.GraphModule(torch.nn.Module(), graph)
    a, b, c = torch.randn(3), torch.randn(3), torch.randn(3)
    flat = flat_graph(module, [[a, b], c])
    assert flat is not None and flat.flatten([[a, b], c]) == [a, b, c]
    assert [n.op for n in flat.graph_module.graph.nodes].count("placeholder") == 3
    assert all(torch.equal(x, y) for x, y in zip(flat.graph_module(a, b, c), module([a, b], c)))
    assert flat.regroup([a, b, c]) == [[a, b], c]
    graph.output((graph.call_function(torch.stack, (items,)),))  # the list read whole as well
    graph.erase_node(next(n for n in graph.nodes if n.op == "output"))
    assert flat_graph(torch.fx.GraphModule(torch.nn.Module(), graph), [[a, b], c]) is None
    assert flat_graph(module, [a, c]) is None  # no list input: nothing to make flat


@pytest.mark.e2e
def test_a_backward_bug_under_compiled_autograd_is_localised(own_runs: Any) -> None:
    """The planted tanh_backward decomposition: found through the forward graph's gradients, checked
    with compiled autograd off, and localised in its captured backward (level 3: the decomposition is
    planted in the program's process, so a repro in a fresh process would not hold it)."""
    run, _ = own_runs("autograd_bug")
    assert run.exit_code == 1, run.stderr
    report = run.report
    assert (report["verdict"], report["culprit"]["op"]) == ("divergent", "aten.tanh_backward.default"), run.stderr


@pytest.mark.e2e
@pytest.mark.skipif(not ALL_CORPUS, reason="BISECT_CORPUS=all (make test's time): the tanh_backward case covers "
                                           "localisation under compiled autograd")
def test_a_backward_relu_bug_under_compiled_autograd_is_named_and_its_repro_carries_it(tmp_path: Path) -> None:
    """A straight-through estimator whose backward is relu(grad): the planted relu codegen is a config
    the repro carries, so it exits 1 with the bug and 0 without."""
    run = _own_run(tmp_path, "compiled_autograd_ste.py", "--bug")
    assert run.exit_code == 1, run.stderr
    report = run.report
    assert (report["verdict"], report["culprit"]["op"]) == ("divergent", "aten.relu.default"), run.stderr
    assert report["repro"]["status"] == "REPRODUCED"
    assert _repro_without(run, "cpp.inject_relu_bug_TESTING_ONLY").returncode == 0


@pytest.mark.e2e
def test_an_inductor_crash_in_a_script_is_localised_and_the_program_sees_it(own_runs: Any) -> None:
    run, without = own_runs("crash")
    assert run.exit_code == 1, run.stderr
    report = run.report
    assert (report["verdict"], report["culprit"]["op"]) == ("crash", "aten.relu.default"), run.stderr
    assert report["culprit"]["crash"]["exception"] == "InductorError"
    assert "InductorError" in run.stderr.split("bisect-accuracy: crash")[0]  # the program's own traceback, first
    assert report["script"]["exit_code"] == 1 and report["script"]["graphs"][0]["outcome"] == "crash"
    assert report["repro"]["status"] == "REPRODUCED" and [r["exit"] for r in report["repro"]["runs"]] == [1]
    assert without is not None and without.returncode == 0, without


@pytest.mark.e2e
@pytest.mark.skipif(not ALL_CORPUS, reason="a real torch 2.13 crash (30 compiles); the planted one covers the path")
def test_a_real_inductor_crash_in_a_script_is_a_crash_window_with_a_repro_raising_it(tmp_path: Path) -> None:
    run = _own_run(tmp_path, "inductor_crash.py")
    assert run.exit_code == 1, run.stderr
    report = run.report
    assert (report["verdict"], report["culprit"]["kind"]) == ("crash", "window"), run.stderr
    assert report["culprit"]["crash"] == {"exception": "InductorError", "message": "KeyError: 'buf1'"}
    assert report["repro"]["status"] == "REPRODUCED"


# What users wrap around their models (issue 35's corpus): a clean run and its planted twin each.
CORPUS_SCRIPTS = ["separate_loss.py", "channels_last_freezing.py", "padded_dynamic.py", "hf_generate_static.py",
                  "amp_bf16_gradscaler.py"]


@pytest.mark.e2e
@pytest.mark.skipif(not ALL_CORPUS, reason="BISECT_CORPUS=all: the paths are those of the relu cases above")
@pytest.mark.parametrize("script", CORPUS_SCRIPTS)
def test_what_users_wrap_around_models_is_clean_and_its_planted_twin_is_found(tmp_path: Path, script: str) -> None:
    clean = _own_run(tmp_path / "clean", script)
    assert clean.exit_code == 0 and clean.report["verdict"] == "clean", clean.stderr
    assert all(graph["checked"] for graph in clean.report["script"]["graphs"]), clean.report["script"]
    planted = _own_run(tmp_path / "planted", script, "--bug")
    assert planted.exit_code == 1, planted.stderr
    expected = _expected(SCRIPTS / script)
    assert (planted.report["verdict"], planted.report["culprit"]["op"]) == (expected["verdict"], expected["op"])
    assert [r["exit"] for r in planted.report["repro"]["runs"]] == [1]
    assert _repro_without(planted, "cpp.inject_relu_bug_TESTING_ONLY").returncode == 0


# Issue 36's graph-break case: ~40 s clean, ~75 s planted on 2 loaded cores; make test covers the path in
# process (test_script_calls_are_judged_end_to_end_and_never_stricter_than_upstream, and the relu scripts).
NOISE_SCRIPTS = ["script_graph_breaks_erf.py", "script_graph_breaks_erf_planted.py"]


@pytest.mark.e2e
@pytest.mark.skipif(not ALL_CORPUS, reason="BISECT_CORPUS=all: the in-process graph-break test covers the path")
@pytest.mark.parametrize("script", NOISE_SCRIPTS)
def test_graph_breaks_feeding_item_are_clean_and_the_planted_erf_is_named(tmp_path: Path, script: str) -> None:
    case = ROOT / "repro_cases" / script
    run = _run(tmp_path, "run", _tool(str(case)), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    expected = _expected(case)
    assert run.report["verdict"] == expected["verdict"], run.stderr
    if expected["verdict"] == "clean":
        assert run.exit_code == 0 and all(graph["checked"] for graph in run.report["script"]["graphs"])
        assert run.report["findings"] == [] and run.report.get("differences") in (None, [])
        listed = {op for graph in run.report["script"]["graphs"] for item in graph["within_upstream"]
                  for op in item.get("ops") or []}
        assert sorted(listed) == expected.get("listed", []), run.report["script"]["graphs"]
        return
    assert run.exit_code == 1, run.stderr
    culprit = run.report["culprit"]
    assert {k: culprit[k] for k in ("op", "graph", "kind")} == {k: expected[k] for k in ("op", "graph", "kind")}


@pytest.mark.e2e
@pytest.mark.skipif(not ALL_CORPUS, reason="BISECT_CORPUS=all: the in-process interior-error test covers the path")
@pytest.mark.parametrize("reach", [False, True], ids=["absorbed", "reaches"])
def test_an_interior_error_absorbed_is_listed_with_its_op_and_one_that_reaches_is_named(tmp_path: Path,
                                                                                        reach: bool) -> None:
    run = _own_run(tmp_path, "graph_break_absorbed.py", "--level", "3", *(["--reach"] if reach else []))
    report = run.report
    if reach:
        assert (run.exit_code, report["verdict"], report["culprit"]["op"]) == (1, "divergent", "aten.sigmoid.default")
        assert report["script"]["first_divergence_call"]["graph"] == "graph_0", report["script"]
        return
    assert (run.exit_code, report["verdict"]) == (0, "clean"), run.stderr
    absorbed = report["script"]["graphs"][0]["absorbed"]
    assert len(absorbed) == 1 and absorbed[0]["read_by"] == ["graph_1"], report["script"]
    assert absorbed[0]["ops"] == ["aten.sigmoid.default"], absorbed


@pytest.mark.e2e
@pytest.mark.skipif(not ALL_CORPUS, reason="two torchrun runs (about 60 s and 90 s); the default run covers torchrun "
                                           "(test_torchrun_gives_per_rank_reports_and_a_summary), the merged verdict "
                                           "and fake calls in process")
def test_ddp_on_gloo_under_torchrun_is_clean_and_its_planted_twin_is_found_on_every_rank(tmp_path: Path) -> None:
    """DistributedDataParallel(torch.compile(model)), 2 ranks, gloo: DDPOptimizer splits the graph at
    the buckets; every piece is checked on every rank, each rank has its verdict, the summary one."""
    script = SCRIPTS / "ddp_gloo.py"
    command = [str(BIN / "torchrun"), "--standalone", "--nproc_per_node", "2", str(script)]
    env = {LEVEL_VARIABLE: "4", "BISECT_ACCURACY_OUT": "{out}", "BISECT_ACCURACY_VERIFY_RUNS": "1",
           "OMP_NUM_THREADS": "1"}
    for name, args, verdict in (("clean", [], "clean"), ("planted", ["--bug"], "divergent")):
        run = _run(tmp_path, name, command + args, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / name / "cache"), **env)
        assert run.exit_code == 0, run.stderr  # the hook keeps the program's status
        summary = json.loads((run.out_dir / "summary.json").read_text())
        assert (summary["verdict"], summary["verdicts"]) == (verdict, {"0": verdict, "1": verdict}), summary
        for rank in (0, 1):
            report = json.loads((run.out_dir / f"rank{rank}" / "report.json").read_text())
            graphs = report["script"]["graphs"]
            assert len(graphs) >= 2 and all(g["checked"] for g in graphs), graphs  # the pieces of the split
            if verdict == "divergent":
                assert report["culprit"]["op"] == _expected(script)["op"]
                assert [r["exit"] for r in report["repro"]["runs"]] == [1]
    fixed = Run(0, "", "", run.out_dir / "rank1", run.cwd)
    assert _repro_without(fixed, "cpp.inject_relu_bug_TESTING_ONLY").returncode == 0


def test_a_stale_artifact_is_named_only_with_a_cache_hit_behind_it(tmp_path, monkeypatch) -> None:
    """Issue 37: a not-reproducible divergence got the stale-cache note even where every compile was
    fresh. The note now needs evidence: the program's compile of that graph hit Inductor's cache."""
    import types

    import torch

    from bisect_engine.script.session import GraphRecord, Session, _cache_hits

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))

    def f(x):
        return torch.sin(x) * 2

    x = torch.randn(8)
    with torch._inductor.config.patch(fx_graph_cache=True, force_disable_caches=False):
        torch._dynamo.reset()
        torch.compile(f)(x)
        before = _cache_hits()
        torch._dynamo.reset()
        torch.compile(f)(x)  # the same graph again: served from the FX-graph cache
        assert _cache_hits() > before
    torch._dynamo.reset()

    fresh = GraphRecord(0, torch.fx.symbolic_trace(f), "inductor", {})
    served = GraphRecord(1, torch.fx.symbolic_trace(f), "inductor", {}, cache_hits=1)
    session = types.SimpleNamespace(graphs=[fresh, served])
    assert not Session._served_from_cache(session, "graph_0")  # type: ignore[arg-type]
    assert Session._served_from_cache(session, "graph_1")  # type: ignore[arg-type]


# -- issue 37: a kernel that kills its process ---------------------------------------------------

@pytest.mark.e2e
@pytest.mark.skipif(not ALL_CORPUS, reason="two runs (the one that dies, the isolated rerun: ~2-4 min); "
                                           "tests/test_isolate.py covers the child process")
def test_a_kernel_that_aborts_the_program_is_a_crash_on_its_op_with_a_report(tmp_path: Path) -> None:
    run = _own_run(tmp_path, "native_crash.py")
    assert run.exit_code == 1, run.stderr
    report = run.report
    assert (report["verdict"], report["culprit"]["op"]) == ("crash", "aten.relu.default"), run.stderr
    assert report["culprit"]["crash"]["exception"] == "NativeCrash" and "SIGABRT" in report["culprit"]["crash"]["message"]
    assert report["native_crash"]["signal"] == "SIGABRT" and report["native_crash"]["rerun_exit"] == 1
    assert report["repro"]["status"] == "REPRODUCED" and [r["exit"] for r in report["repro"]["runs"]] == [1]
    assert _repro_without(run, "cpp.inject_relu_bug_TESTING_ONLY").returncode == 0


@pytest.mark.e2e
@pytest.mark.skipif(not ALL_CORPUS, reason="two runs (the one that dies, the isolated rerun: ~5 min); "
                                           "test_a_program_that_dies_natively_is_run_again_isolated_and_leaves_a_report "
                                           "covers the start-up supervisor")
def test_under_the_start_up_hook_a_kernel_that_aborts_is_a_crash_on_its_op_with_a_report(tmp_path: Path) -> None:
    env = {**_hook_site_at(tmp_path / "hook"), LEVEL_VARIABLE: "4", "BISECT_ACCURACY_OUT": "{out}",
           "BISECT_ACCURACY_VERIFY_RUNS": "1", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    run = _run(tmp_path, "hooked", _python_script(str(SCRIPTS / "native_crash.py")), **env)
    report = run.report
    assert (report["verdict"], report["culprit"]["op"]) == ("crash", "aten.relu.default"), run.stderr
    assert report["native_crash"]["signal"] == "SIGABRT" and report["native_crash"]["isolated_rerun"], run.stderr
    assert run.exit_code == report["native_crash"]["rerun_exit"] != 0
    assert report["repro"]["status"] == "REPRODUCED"


@pytest.mark.e2e
@pytest.mark.skipif(not ALL_CORPUS, reason="issue 37's misses, as scripts (about a minute each on 2 loaded cores)")
@pytest.mark.parametrize(("script", "op", "window"), [
    # a window is named by the op whose lowering the subsystem's fallback names (arange, lowered as
    # prims.iota: pytorch#175966's thread), listed whole; the mul shows the wrap
    ("int64_arange_wrap.py", "aten.arange.default", ["aten.arange.default", "aten.mul.Tensor"]),
    # signbit reads minimum's zero: the sign counts under every oracle, so minimum is named alone (no window)
    ("zero_sign_minimum.py", "aten.minimum.default", ["aten.minimum.default"]),
])
def test_issue_37_misses_written_from_their_descriptions_are_named(tmp_path: Path, script: str, op: str,
                                                                   window: list[str]) -> None:
    run = _own_run(tmp_path, script)
    assert run.exit_code == 1, run.stderr
    report = run.report
    assert (report["verdict"], report["culprit"]["op"]) == ("divergent", op), run.stderr
    assert report["culprit"]["ops"] == window
    assert report["repro"]["status"] == "REPRODUCED"


@pytest.mark.e2e
@pytest.mark.skipif(not ALL_CORPUS, reason="issue 37 miss (a), as pytorch#198201 wrote it (about two minutes; "
                                            "test_strategies covers localise_capture_decomposition in process)")
def test_a_call_decomposed_wrong_at_capture_is_named_with_a_repro_of_the_op_against_its_decomposition(tmp_path: Path) -> None:
    run = _own_run(tmp_path, "nearest_same_size_dim.py")
    assert run.exit_code == 1, run.stderr
    report = run.report
    culprit = report["culprit"]
    assert (report["verdict"], culprit["op"], culprit["kind"]) == ("divergent", "aten.upsample_nearest2d.vec",
                                                                  "capture_decomposition")
    assert culprit["pass"] == "decomposition at capture" and culprit["node"] == "interpolate", culprit
    assert report["repro"]["status"] == "REPRODUCED"


@pytest.mark.e2e
@pytest.mark.skipif(not ALL_CORPUS, reason="issue 37's cast elision, as scripts (about a minute each; "
                                            "tests/test_cast_elision.py covers the rule cheaply)")
@pytest.mark.parametrize(("script", "dtype"), [
    ("cast_elision_bf16_sum.py", "torch.bfloat16"),
    ("cast_elision_bf16_compare.py", "torch.bfloat16"),
    ("cast_elision_fp16_overflow.py", "torch.float16"),
])
def test_a_skipped_cast_is_named_beside_clean_with_its_switch_checked(tmp_path: Path, script: str, dtype: str) -> None:
    run = _own_run(tmp_path, script)
    assert run.exit_code == 0, run.stderr
    report = run.report
    assert report["verdict"] == "clean" and report.get("stale_artifact") is None, run.stderr
    (entry,) = report["differences"]  # one story: the cast, not the ops after it
    assert (entry["op"], entry["cast_elided"]["dtype"]) == ("aten._to_copy.default", dtype), entry
    assert entry["setting"] == {"name": "emulate_precision_casts", "value": True, "follows_eager": True}
    assert "cast elided" in run.stderr and "(checked)" in run.stderr


@pytest.mark.e2e
@pytest.mark.skipif(not ALL_CORPUS, reason="issue 37: --oracle bitwise in script mode (about two minutes; "
                                            "test_cli and test_processes cover the option's path cheaply)")
def test_a_returned_zero_of_the_other_sign_is_named_under_oracle_bitwise(tmp_path: Path) -> None:
    run = _run(tmp_path, "run", _tool("--oracle", "bitwise", str(SCRIPTS / "zero_sign_minimum_returned.py")),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))  # the option before the script
    assert run.exit_code == 1, run.stderr
    report = run.report
    assert (report["verdict"], report["culprit"]["op"]) == ("divergent", "aten.minimum.default"), run.stderr
    assert report["repro"]["status"] == "REPRODUCED"
