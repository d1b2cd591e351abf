"""What changed between two environments (``record`` / ``compare``), hermetic on one torch:
environment B is a second interpreter whose start-up (a ``sitecustomize``) plants three changes
(tests/env_cases): Inductor's tanh lowering (compiled side), the ATen CPU kernel of exp (eager
side), and F.silu written out (another graph). Each is named with its side and direction; the same
environment reports no change; each changed op's bisection repro exits 1 under B and 0 under A in
fresh processes; bad bundles are one line and exit 2. A plain script (tests/env_cases/script.py,
one tiny graph) is recorded and compared the same way, run exactly once per command."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest

from conftest import Job, background_result, fixtures_read, seeded_cache_dir, suite_tempdir, unless_isa_probe

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "env_cases"
MODEL = CASES / "model.py"


# One Inductor cache per side for this module's processes (a fresh one costs each process its C++
# set-up again, about half of a tiny compile): B's (the planted lowering) is never A's, so a planted
# kernel is never served to A, nor A's to B.
_CACHES: dict[bool, str] = {}


def _environment(plant: bool, site: Path) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("BISECT_ACCURACY_")}
    environ["TORCHINDUCTOR_CACHE_DIR"] = _CACHES.setdefault(plant, str(seeded_cache_dir(suite_tempdir(f"envs-cache-{'b' if plant else 'a'}-"))))
    if plant:
        environ["PYTHONPATH"] = os.pathsep.join([str(site), environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return environ


def _cli(args: list[str], *, plant: bool = False, site: Path = Path()) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bisect_engine.cli", *args], capture_output=True, text=True,
                          env=_environment(plant, site), timeout=900)


def _site(factory: pytest.TempPathFactory) -> Path:
    folder = factory.mktemp("site_b")
    (folder / "sitecustomize.py").write_text(unless_isa_probe(f"import runpy\nrunpy.run_path({str(CASES / 'plant_all.py')!r})\n"))
    return folder


def _repro_under_b_and_a(out: Path, op: str, site: Path) -> "list[tuple[int, str]] | None":
    """The bisection repro of ``op``'s change in ``out`` (a compare's folder), copied away from the
    tool's tree and run under B (planted) and under A, side by side: (exit status, output) each.
    Run in the background job that made ``out``, so it overlaps the in-process tests."""
    comparison = out / "comparison.json"
    change = _changes(json.loads(comparison.read_text())).get(op) if comparison.is_file() else None
    if change is None:
        return None
    copy = suite_tempdir("bisect-repro-")
    shutil.copytree(out / "bisect" / f"{change['graph']}_{change['node']}", copy, dirs_exist_ok=True)
    runs = [subprocess.Popen([sys.executable, "bisect_repro.py"], cwd=copy, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, env=_environment(plant, site))
            for plant in (True, False)]
    return [(run.returncode, said) for run, said in ((run, run.communicate(timeout=300)[0]) for run in runs)]


@dataclass
class ModelRuns:
    """The model's record in A, its compare in B (planted) and in A again: one chain of processes,
    started when collection ends (tests/conftest.py) beside the in-process tests."""
    site: Path
    bundle: Path
    recorded: subprocess.CompletedProcess[str]
    changed: "subprocess.CompletedProcess[str] | None" = None
    same: "subprocess.CompletedProcess[str] | None" = None
    repros: "dict[str, list[tuple[int, str]] | None]" = field(default_factory=dict)  # op: under B, under A


# The eager side's bisection repro (a changed aten kernel) is run here; the compiled side's (the planted
# tanh lowering) by the script runs below (the same renderer).
MODEL_REPRO_OPS = ("aten.exp.default",)


def _model_runs(factory: pytest.TempPathFactory) -> ModelRuns:
    folder = factory.mktemp("envs_model")
    runs = ModelRuns(_site(factory), folder / "A", _cli(["record", str(MODEL), "--out", str(folder / "A")]))
    if runs.recorded.returncode == 0:
        runs.changed = _cli(["compare", str(runs.bundle), "--out", str(folder / "B")], plant=True, site=runs.site)
        runs.same = _cli(["compare", str(runs.bundle), "--out", str(folder / "same")])
        runs.repros = {op: _repro_under_b_and_a(folder / "B", op, runs.site) for op in MODEL_REPRO_OPS}
    return runs


def background_jobs(session: pytest.Session) -> list[Job]:
    factory = session.config._tmp_path_factory  # type: ignore[attr-defined]
    wanted = fixtures_read(session, sys.modules[__name__])
    jobs = [Job("envs:model", 120.0, lambda: _model_runs(factory))] if "model_runs" in wanted else []
    return jobs + ([Job("envs:script", 150.0, lambda: _script_runs(factory))] if "script_runs" in wanted else [])


@pytest.fixture(scope="module")
def model_runs(tmp_path_factory: pytest.TempPathFactory) -> ModelRuns:
    return background_result("envs:model", lambda: _model_runs(tmp_path_factory))


@pytest.fixture(scope="module")
def site(model_runs: ModelRuns) -> Path:
    return model_runs.site


@pytest.fixture(scope="module")
def bundle(model_runs: ModelRuns) -> Path:
    assert model_runs.recorded.returncode == 0, model_runs.recorded.stderr[-3000:]
    out = model_runs.bundle
    assert (out / "manifest.json").is_file() and (out / "values.pt").is_file()
    return out


@pytest.fixture(scope="module")
def changed(bundle: Path, model_runs: ModelRuns) -> tuple[Any, Path]:
    run = model_runs.changed
    assert run is not None and run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:] if run else None
    return json.loads((bundle.parent / "B" / "comparison.json").read_text()), bundle.parent / "B"


def _changes(comparison: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["op"]: c for g in comparison["graphs"] for c in g["changes"]}


def test_the_same_environment_reports_no_change(bundle: Path, model_runs: ModelRuns) -> None:
    run = model_runs.same
    assert run is not None and run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:] if run else None
    comparison = json.loads((bundle.parent / "same" / "comparison.json").read_text())
    assert comparison["changed"] is False and not _changes(comparison)
    assert not any(g["structure"] for g in comparison["graphs"])


def test_a_changed_lowering_is_named_on_the_compiled_side(changed: tuple[Any, Path]) -> None:
    change = _changes(changed[0])["aten.tanh.default"]
    assert change["side"] == "compiled" and change["direction"] == "farther"
    # B's compiled tanh left B's eager one (unchanged): no longer equal to eager, moved away from it
    assert change["eager_gap"]["matches_eager"] is False and change["eager_gap"]["toward"] == "away"
    assert (changed[1] / "bisect" / f"{change['graph']}_{change['node']}" / "bisect_repro.py").is_file()


def test_a_changed_aten_kernel_is_named_on_the_eager_side(changed: tuple[Any, Path]) -> None:
    change = _changes(changed[0])["aten.exp.default"]
    assert change["side"] == "eager" and change["direction"] == "farther"


def test_a_changed_graph_is_said_before_values_are_judged(changed: tuple[Any, Path]) -> None:
    structure = [line for g in changed[0]["graphs"] for line in g["structure"]]
    assert any("silu" in line and "sigmoid" in line for line in structure), structure
    assert set(_changes(changed[0])) <= {"aten.tanh.default", "aten.exp.default", "aten.sigmoid.default",
                                         "aten.mul.Tensor"}  # nothing unplanted is called changed


@pytest.mark.parametrize("op", MODEL_REPRO_OPS)
def test_the_bisection_repro_exits_1_under_b_and_0_under_a(changed: tuple[Any, Path], model_runs: ModelRuns,
                                                          op: str) -> None:
    assert (changed[1] / "bisect" / f"{_changes(changed[0])[op]['graph']}_{_changes(changed[0])[op]['node']}"
            / "bisect_repro.py").is_file()
    runs = model_runs.repros[op]
    assert runs is not None and [status for status, _ in runs] == [1, 0], runs


def _bad(bundle: Path, tmp_path: Path, how: str) -> Path:
    broken = tmp_path / how
    shutil.copytree(bundle, broken)
    manifest = broken / "manifest.json"
    if how == "missing":
        (broken / "values.pt").unlink()
    elif how == "truncated":
        manifest.write_text(manifest.read_text()[:200])
    elif how == "newer":
        data = json.loads(manifest.read_text())
        data["format_version"] = data.get("format_version", 1) + 100
        manifest.write_text(json.dumps(data))
    return broken


def _in_process(args: list[str]) -> Any:
    """The CLI in this process: refusals that end before any compile need no interpreter of their own."""
    from click.testing import CliRunner

    from bisect_engine.cli import main

    return CliRunner().invoke(main, args)


@pytest.mark.parametrize("how", ["missing", "truncated", "newer", "nowhere"])
def test_a_bad_bundle_is_one_line_and_exit_2(bundle: Path, tmp_path: Path, how: str) -> None:
    target = tmp_path / "nowhere" if how == "nowhere" else _bad(bundle, tmp_path, how)
    run = _in_process(["compare", str(target)])
    assert run.exit_code == 2, run.output[-2000:]
    assert "Traceback" not in run.output and run.output.strip().count("\n") == 0, run.output


def test_a_bundle_from_another_model_is_refused(bundle: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.py"
    other.write_text(MODEL.read_text().replace("nn.Linear(16, 4)", "nn.Linear(16, 5)"))
    run = _in_process(["compare", str(bundle), "--model", str(other)])
    assert run.exit_code == 2 and "Traceback" not in run.output, run.output[-2000:]


# -- a plain script (script mode): recorded in A, compared in B; run once per command ------------

SCRIPT = CASES / "script.py"


@dataclass
class ScriptRuns:
    """The script's record in A, its compare in A again and in B (planted): one chain of processes
    started when collection ends; ``counts`` is how many times the script had run after each."""
    folder: Path
    site: Path
    recorded: subprocess.CompletedProcess[str]
    counts: list[int]
    same: "subprocess.CompletedProcess[str] | None" = None
    changed: "subprocess.CompletedProcess[str] | None" = None
    repro: "list[tuple[int, str]] | None" = None  # the tanh change's bisection repro: under B, under A


def _script_runs(factory: pytest.TempPathFactory) -> ScriptRuns:
    folder, site = factory.mktemp("script"), _site(factory)
    runs_file = folder / "runs.txt"  # the script appends a line per run
    count = lambda: runs_file.read_text().count("ran") if runs_file.exists() else 0  # noqa: E731
    runs = ScriptRuns(folder, site, _cli(["record", str(SCRIPT), str(runs_file), "--out", str(folder / "A")]), [])
    runs.counts.append(count())
    if runs.recorded.returncode == 0:
        runs.same = _cli(["compare", str(folder / "A"), "--out", str(folder / "same")])
        runs.counts.append(count())
        runs.changed = _cli(["compare", str(folder / "A"), "--out", str(folder / "B")], plant=True, site=site)
        runs.counts.append(count())
        runs.repro = _repro_under_b_and_a(folder / "B", "aten.tanh.default", site)
    return runs


@pytest.fixture(scope="module")
def script_runs(tmp_path_factory: pytest.TempPathFactory) -> ScriptRuns:
    runs = background_result("envs:script", lambda: _script_runs(tmp_path_factory))
    assert runs.recorded.returncode == 0, runs.recorded.stderr[-3000:]
    assert runs.counts[0] == 1  # the script ran exactly once
    manifest = json.loads((runs.folder / "A" / "manifest.json").read_text())
    assert manifest["model"]["kind"] == "script" and [g["name"] for g in manifest["graphs"]] == ["forward_0"]
    assert [c["name"] for c in manifest["graphs"][0]["constants"]] == ["_tensor_constant0"]
    return runs


def test_a_script_compared_in_the_same_environment_reports_no_change(script_runs: ScriptRuns) -> None:
    run = script_runs.same
    assert run is not None and run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:] if run else None
    assert "no change" in run.stdout and script_runs.counts[1] == script_runs.counts[0] + 1
    comparison = json.loads((script_runs.folder / "same" / "comparison.json").read_text())
    assert comparison["changed"] is False and not _changes(comparison)
    assert comparison["graphs"][0]["aligned"] == 3 and not comparison["graphs"][0]["not_checked"]


def test_a_script_with_a_changed_lowering_names_the_op_and_its_repro_bisects(script_runs: ScriptRuns) -> None:
    run, out = script_runs.changed, script_runs.folder / "B"
    assert run is not None and run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:] if run else None
    assert script_runs.counts[2] == script_runs.counts[1] + 1  # re-run once, in B
    comparison = json.loads((out / "comparison.json").read_text())
    changes = _changes(comparison)
    assert set(changes) == {"aten.tanh.default"}, changes  # the op reading the graph constant is judged, unchanged
    assert changes["aten.tanh.default"]["side"] == "compiled" and changes["aten.tanh.default"]["direction"] == "farther"
    assert not comparison["graphs"][0]["not_checked"]
    assert (out / "bisect" / "forward_0_tanh" / "bisect_repro.py").is_file()
    runs = script_runs.repro  # run under B and under A, side by side, in the background job
    assert runs is not None and [status for status, _ in runs] == [1, 0], runs
