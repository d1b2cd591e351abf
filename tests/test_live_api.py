"""The Python API over live objects (``bisect_engine.check``), what it leaves as it found it
(``caller_state``), and its notebook view.

Cheap tests first (no Inductor compile): the caller's state put back bit for bit, the caller's
compiled code kept; then one notebook-style session (a plain Python process) on a planted model
object: the op named, every piece of state unchanged, the repro standalone in a fresh process, the
``_repr_html_`` view rendered in headless Chromium.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from bisect_engine.caller_state import caller_state_kept
from bisect_engine.errors import UsageError
from conftest import Job, background_result, fixtures_read, seeded_cache_dir

ROOT = Path(__file__).resolve().parents[1]


def _model() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU()).train()
    model(torch.randn(3, 4)).sum().backward()
    return model


def _bits(tensor: torch.Tensor) -> bytes:
    return tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def test_the_callers_tensors_flags_and_random_states_are_put_back_bit_for_bit() -> None:
    model, inputs = _model(), torch.randn(3, 4)
    weight, grad = model[0].weight, model[0].weight.grad
    before = {name: _bits(t) for name, t in [*model.state_dict().items(), ("grad", grad), ("inputs", inputs)]}
    version = weight._version
    torch_state, python_state = torch.get_rng_state(), random.getstate()
    precision, default_dtype = torch.get_float32_matmul_precision(), torch.get_default_dtype()
    with caller_state_kept(model, (inputs,)):
        model(inputs)  # BatchNorm's running statistics move
        with torch.no_grad():
            weight.add_(1.0)
            inputs.mul_(2.0)
        grad.zero_()
        weight.grad = None
        model.eval()
        model[1].train()
        torch.rand(3), random.random()
        torch.set_float32_matmul_precision("medium" if precision != "medium" else "high")
        torch.set_default_dtype(torch.float64)
        torch._inductor.config.max_autotune = not torch._inductor.config.max_autotune
        os.environ["BISECT_API_TEST"] = "1"
    after = {name: _bits(t) for name, t in [*model.state_dict().items(), ("grad", grad), ("inputs", inputs)]}
    assert after == before
    assert weight.grad is grad and weight._version > version  # the same gradient object, its bits restored
    assert model.training and all(m.training for m in model.modules())
    assert torch.equal(torch.get_rng_state(), torch_state) and random.getstate() == python_state
    assert (torch.get_float32_matmul_precision(), torch.get_default_dtype()) == (precision, default_dtype)
    assert torch._inductor.config.max_autotune is False and "BISECT_API_TEST" not in os.environ


def test_a_tensor_the_run_did_not_change_is_not_written_back() -> None:
    model = _model()
    versions = [p._version for p in model.parameters()]
    with caller_state_kept(model):
        torch.rand(2)
    assert [p._version for p in model.parameters()] == versions  # an autograd graph the caller holds stays valid


def _compiled_graphs() -> int:
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def test_the_callers_compiled_code_survives_the_runs_dynamo_resets() -> None:
    """The engine resets Dynamo; inside ``caller_state_kept`` the caller's compiled function keeps
    its code (no new graph on its next call), where a plain reset drops it (one new graph)."""
    def doubled(t: torch.Tensor) -> torch.Tensor:
        return torch.sin(t) * 2

    compiled, x = torch.compile(doubled, backend="eager"), torch.randn(4)
    compiled(x)
    with caller_state_kept():
        torch._dynamo.reset()
        torch.compile(lambda t: t.cos(), backend="eager")(x)
        torch._dynamo.reset()
    graphs = _compiled_graphs()
    compiled(x)
    assert _compiled_graphs() == graphs
    torch._dynamo.reset()
    compiled(x)
    assert _compiled_graphs() == graphs + 1


def test_the_spec_of_live_objects_reads_them_as_a_model_file_would(tmp_path: Path) -> None:
    from bisect_engine.live import fresh_folder, live_spec

    torch.manual_seed(0)
    model, x = nn.Linear(3, 3), torch.randn(2, 3)
    spec = live_spec(torch.compile(model, mode="max-autotune-no-cudagraphs", dynamic=False), (x,), {}, None)
    assert spec.model is model and spec.compiled is not None and spec.backend == "inductor"
    assert spec.compile_options.get("max_autotune") is True and spec.dynamic is False
    assert spec.path.name == "linear.py"  # where the model class is defined: the report's model

    def scaled(t: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return t * scale

    keyworded = live_spec(scaled, (x,), {"scale": 3.0}, None)  # the engine passes positional inputs only
    assert torch.equal(keyworded.model(*keyworded.inputs), x * 3.0) and keyworded.inputs == (x,)
    with pytest.raises(UsageError, match="the model is a int, not a module or callable"):
        live_spec(3, (x,), {}, None)
    first = fresh_folder(tmp_path, "Linear")
    first.mkdir()
    assert fresh_folder(tmp_path, "Linear") != first and not fresh_folder(tmp_path, "Linear").exists()


# --- one notebook-style session on a planted model object (real Inductor compiles) ----------------

def _notebook_session(factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, Path,
                                                                 subprocess.CompletedProcess[str] | None]:
    """The session, then (in the same background job) the repro it wrote, alone in a fresh process."""
    from conftest import seeded_cache_dir

    out, cwd = factory.mktemp("notebook") / "out", factory.mktemp("cwd")
    environment = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(seeded_cache_dir(factory.mktemp("cache")))}
    run = subprocess.run([sys.executable, str(ROOT / "tests" / "fixtures" / "notebook_session.py"),
                          str(ROOT / "repro_cases" / "relu_bug.py"), str(out)],
                         capture_output=True, text=True, timeout=900, env=environment, cwd=cwd)
    repro = out / "repro.py"
    return run, out, cwd, (_repro_alone(repro, factory.mktemp("repro-alone")) if run.returncode == 0 and repro.exists()
                           else None)


def _repro_alone(written: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    """``written`` copied to ``folder`` and run there with ``python -P`` and no PYTHONPATH (no plant)."""
    repro = folder / "repro.py"
    shutil.copy(written, repro)
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    environment["TORCHINDUCTOR_CACHE_DIR"] = str(seeded_cache_dir(folder / "cache"))
    return subprocess.run([sys.executable, "-P", str(repro)], capture_output=True, text=True, timeout=600,
                          cwd=folder, env=environment)


def background_jobs(session: pytest.Session) -> list[Job]:
    """The notebook session, started when collection ends where a test of this file reads it
    (tests/conftest.py): it runs beside the in-process tests."""
    if "notebook" not in fixtures_read(session, sys.modules[__name__]):
        return []
    factory = session.config._tmp_path_factory  # type: ignore[attr-defined]
    return [Job("api:notebook", 90.0, lambda: _notebook_session(factory))]


@pytest.fixture(scope="module")
def notebook(tmp_path_factory: pytest.TempPathFactory) -> dict:
    run, out, cwd, alone = background_result("api:notebook", lambda: _notebook_session(tmp_path_factory))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return {**json.loads(run.stdout.strip().splitlines()[-1]), "out": out, "cwd": cwd, "repro_alone": alone}


@pytest.mark.e2e
def test_check_names_the_planted_op_on_a_live_model(notebook: dict) -> None:
    assert (notebook["verdict"], notebook["op"], notebook["source"]) == ("divergent", "aten.relu.default",
                                                                        "relu_bug.py:33")
    assert notebook["exit_status"] == 1 and notebook["found"] and notebook["error_ulps"] > 1e6
    assert notebook["str"].startswith("bisect-accuracy: divergent\n  culprit: aten.relu.default")
    assert sorted(p.name for p in notebook["out"].iterdir()) == sorted(
        [".bisect-accuracy.json", ".bisect-accuracy.lock", "bug_report.md", "notebook.html", "report.html",
         "report.json", "repro.py"])  # as a CLI run leaves its folder (and the session's page)
    assert list(notebook["cwd"].iterdir()) == []  # nothing written outside the output folder


@pytest.mark.e2e
def test_check_leaves_the_model_the_random_states_and_torch_as_they_were(notebook: dict) -> None:
    assert notebook["unchanged"] == {key: True for key in notebook["unchanged"]}
    assert set(notebook["unchanged"]) >= {"parameters", "grads", "buffers", "training", "torch_rng", "numpy_rng",
                                          "python_rng", "flags", "inductor_config", "dynamo_config"}
    assert notebook["graphs_compiled_by_the_check_left_behind"] == 0


@pytest.mark.e2e
def test_the_repro_check_wrote_runs_alone_in_a_fresh_process(notebook: dict, tmp_path: Path) -> None:
    run = notebook["repro_alone"] or _repro_alone(Path(notebook["repro"]), tmp_path)
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert "REPRODUCED" in run.stdout


# Run in the page that shows the view: what the frame rendered, and whether the report's own script ran there.
FRAME_PROBE = """<script>window.addEventListener("load", function () {
  var frame = document.querySelector("iframe").contentDocument;
  document.body.setAttribute("data-probe", (frame.querySelector("h1") || {}).textContent + "|"
                             + frame.documentElement.getAttribute("data-js"));
});</script></body>"""


@pytest.mark.e2e
def test_the_notebook_view_renders_in_chromium(notebook: dict, tmp_path: Path) -> None:
    """The session wrote ``result._repr_html_()`` into a page as Jupyter embeds it; Chromium opens it
    from file:// with networking off: the frame holds the report, and the report's script ran in it."""
    chromium = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
    if chromium is None:
        pytest.skip("headless Chromium is not installed (`make browser` installs it where it can)")
    from test_html_browser import OFFLINE

    page = tmp_path / "notebook.html"
    page.write_text((notebook["out"] / "notebook.html").read_text().replace("</body>", FRAME_PROBE))
    dom = subprocess.run([chromium, *OFFLINE, f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
                          "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120).stdout
    assert "<b>bisect-accuracy: divergent</b> aten.relu.default at relu_bug.py:33" in dom
    assert 'data-probe="Inductor computes aten.relu.default wrong at relu_bug.py:33|ready"' in dom
