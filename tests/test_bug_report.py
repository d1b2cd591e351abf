"""``bug_report.md``: PyTorch's bug template filled from a report; model issues said to be so;
the repro inline or attached; within GitHub's size limit; ``collect_env`` failures noted."""
from __future__ import annotations

import sys

import pytest

from bisect_engine.output.bug_report import GITHUB_BODY_LIMIT, Versions, collect_versions, render_bug_report, title
from report_fixtures import load

SHORT_REPRO = "import torch\nprint('repro')\n"


def test_a_divergence_gets_a_title_numbers_the_subsystem_and_versions() -> None:
    report = load("divergent")
    body = render_bug_report(report, "PyTorch version: 2.13.0+cpu", SHORT_REPRO)
    assert title(report) == "[inductor] aten.relu.default gives wrong results on CPU/float32 (lowering)"
    assert body.startswith(f"<!-- Suggested title: {title(report)} -->")
    assert "### 🐛 Describe the bug" in body and "### Versions" in body and "PyTorch version: 2.13.0+cpu" in body
    assert "compiled **1.21e+07** / 1.46e+07; eager's own 0 / 0" in body
    assert "max abs diff 1, max rel diff 317" in body and "ulps of float32" in body
    assert f"```python\n{SHORT_REPRO.rstrip()}\n```" in body and "REPRODUCED 1/1" in body
    assert "make_fallback(torch.ops.aten.relu.default" in body and "model issue" not in body


def test_a_long_repro_is_attached_with_its_failing_subgraph_quoted() -> None:
    repro = ("# header\n" * 10 + "# The non-default Inductor config the failing compile ran with.\nINDUCTOR_CONFIG = {}\n"
             "class Repro(torch.nn.Module):\n    pass\nOUTPUT_NAMES = ['relu']\n" + "# runtime\n" * 5000)
    body = render_bug_report(load("divergent"), "v", repro)
    assert "**please attach `repro.py`**" in body and "repro_inputs.bin" not in body
    assert "class Repro(torch.nn.Module)" in body and "# runtime" not in body
    with_data = repro.replace("OUTPUT_NAMES", "INPUTS_FILE = 'repro_inputs.bin'\nOUTPUT_NAMES")
    assert "and its data file `repro_inputs.bin`" in render_bug_report(load("divergent"), "v", with_data)


def test_a_model_made_nan_is_a_model_issue_not_a_compiler_bug() -> None:
    report = load("nan_model")
    body = render_bug_report(report, "v", None)
    assert title(report).startswith("[model, not a compiler bug] aten.log.default makes NaN/Inf in eager too")
    assert "**This is a model issue, not a compiler bug**" in body and "do not file this against PyTorch" in body
    assert "first NaN/Inf in eager: `aten.log.default` at `nan_in_model.py:33`: log of a negative number" in body
    assert "**What differs**" not in body


def test_a_compiled_nan_and_a_crash_have_their_own_titles() -> None:
    nan = load("nan_compiled")
    assert title(nan) == "[inductor] aten.softplus.default gives wrong results on CPU/float32 (decomposition)"
    assert "first NaN/Inf in eager: none (stays finite)" in render_bug_report(nan, "v", None)
    crash = load("crash")
    assert title(crash) == "[inductor] aten.relu.default fails to compile on CPU/float32: RuntimeError"
    body = render_bug_report(crash, "v", None)
    assert "raises `RuntimeError`" in body and "planted compile error\nsecond line of the message" in body
    assert "none was written" in body


def test_a_clean_run_has_no_bug_report() -> None:
    assert render_bug_report(load("clean"), "v", None) is None


def test_the_body_fits_in_a_github_issue_whatever_the_kernels_and_versions() -> None:
    report = load("divergent")
    report["culprit"]["kernels"] = [{"name": f"k{i}", "nodes": ["relu"], "source": "x = 1\n" * 20_000} for i in range(5)]
    body = render_bug_report(report, "pip list\n" * 50_000, "y = 2\n" * 3000)
    assert len(body) <= GITHUB_BODY_LIMIT
    assert "**Generated kernel**" in body and "(2 more kernel(s) in report.json)" in body
    assert "more characters)" in body


def test_a_kernel_fence_survives_backticks_in_the_source() -> None:
    report = load("divergent")
    report["culprit"]["kernels"] = [{"name": "k", "nodes": [], "source": 'extern "C" {}\n// ``` not the end'}]
    body = render_bug_report(report, "v", None)
    assert "````cpp\nextern" in body and "// ``` not the end\n````" in body


def test_collect_versions_runs_collect_env() -> None:
    assert "PyTorch version" in collect_versions(timeout_s=120)


@pytest.mark.parametrize(("cuda", "initialised", "here"), [
    (None, False, True),  # a CPU build: collect_env cannot initialise a GPU runtime
    ("12.8", False, False),  # CUDA built, not initialised: a fresh interpreter asks, the program's fork stays safe
    ("12.8", True, True),  # initialised already: nothing changes by asking here
])
def test_collect_env_runs_in_this_process_only_where_it_cannot_initialise_cuda(
        monkeypatch: pytest.MonkeyPatch, cuda: str | None, initialised: bool, here: bool) -> None:
    from types import SimpleNamespace

    fake = SimpleNamespace(version=SimpleNamespace(cuda=cuda, hip=None, xpu=None),
                           cuda=SimpleNamespace(is_initialized=lambda: initialised))
    monkeypatch.setitem(sys.modules, "torch", fake)
    versions = Versions()
    assert versions._in_process is here
    assert (versions.command[:2] == (sys.executable, "-c")) and not Versions(("x",))._in_process


@pytest.mark.parametrize(("command", "note"), [
    ((sys.executable, "-c", "import time; time.sleep(60)"), "did not finish within 1 s"),
    (("/nonexistent/python",), "could not start: "),
    ((sys.executable, "-c", "import sys; sys.stderr.write('Traceback\\nImportError: boom\\n'); sys.exit(1)"),
     "(collect_env failed with exit status 1: ImportError: boom)"),
])
def test_a_collect_env_that_fails_is_noted_never_raised(command: tuple[str, ...], note: str) -> None:
    versions = Versions(command)
    assert note in versions.text(timeout_s=1 if "sleep" in command[-1] else 60)
    versions.close()


def test_a_collect_env_started_early_and_never_read_is_ended() -> None:
    versions = Versions((sys.executable, "-c", "import time; time.sleep(60)"))
    versions.start()
    process = versions._process
    assert process is not None and process.poll() is None
    versions.close()
    assert process.poll() is not None


def test_a_model_that_diverges_only_as_a_whole_gets_an_issue_body_that_says_so() -> None:
    """``not_reproducible`` is a finding (exit 1): its issue body says no op was named and why,
    instead of asking for a larger budget or writing nothing."""
    report = {**load("clean"), "verdict": "not_reproducible", "model_level": "mismatch"}
    body = render_bug_report(report, "v", None)
    assert body is not None
    assert "every captured graph matches on its own" in body and "larger budget" not in body
    assert render_bug_report(load("clean"), "v", None) is None


def test_findings_the_upstream_gate_listed_are_named_as_not_divergences() -> None:
    listed = {"op": "aten.erf.default", "node": "erf", "graph": "forward_1", "source": "model.py:12",
              "reason": "end_to_end", "error": {"compiled_rms_ulps": 10.5, "eager_rms_ulps": 0.48}}
    plain = render_bug_report(load("divergent"), "", SHORT_REPRO)
    assert "Listed, not divergences" not in plain
    body = render_bug_report({**load("divergent"), "within_upstream": [listed]}, "", SHORT_REPRO)
    assert "**Listed, not divergences**" in body
    assert ("- aten.erf.default (node erf, graph forward_1, model.py:12) is wrong on its own (10.5 ulps RMS vs "
            "eager's 0.48), but the program's outputs are within the end-to-end tolerance") in body
    assert body.index("Listed, not divergences") < body.index("### Versions")


def test_the_ulps_paragraph_follows_only_a_culprit_judged_in_ulps() -> None:
    """An exact rule's culprit (integers, a zero's sign, a dtype) is judged by equality: its table
    says so and no paragraph explains ulps it does not have."""
    report = load("divergent")
    assert "Errors are in ulps" in render_bug_report(report, "v", SHORT_REPRO)
    culprit = report["culprit"]
    exact = {**report, "culprit": {**culprit, "error": {**culprit["error"], "reason": "exact: 4 of 8 elements"}}}
    body = render_bug_report(exact, "v", SHORT_REPRO)
    assert "| judged by equality | exact: 4 of 8 elements |" in body and "Errors are in ulps" not in body
