"""``report.html`` rendered from reports of real runs and a synthetic 2,000-node one: the answer
first, the profile, escaping, size, determinism, self-containment."""
from __future__ import annotations

import copy
import json
import re

import pytest

from bisect_engine.output.html import render_html
from bisect_engine.output.profile import node_rows, profile_svg
from bisect_engine.output.svg import LogAxis, nice_step
from report_fixtures import HOSTILE, load, synthetic_report

TWO_MB = 2 * 1024 * 1024


def _rows_of(page: str, table: str = "nodes-0") -> int:
    body = page.split(f'<table id="{table}">', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return body.count("<tr")


def test_a_divergent_report_puts_the_answer_and_the_culprit_before_anything_else() -> None:
    page = render_html(load("divergent"))
    answer = page.index('id="verdict"')
    for fact in ("DIVERGENT", "Inductor computes aten.relu.default wrong at relu_bug.py:33", "blocks.0",
                 "1.21e+07", "still fails (confirmed)", "lowering", "make_fallback", "REPRODUCED"):
        assert page.index(fact, answer) < page.index('id="profile"'), fact
    assert "max abs diff 1, max rel 317" in page


def test_the_profile_marks_the_culprit_shades_its_spread_and_titles_every_node() -> None:
    report = load("divergent")
    page = render_html(report)
    svg = page[page.index("<svg class=\"profile\""):page.index("</svg>", page.index("<svg class=\"profile\""))]
    values = len(report["graphs"][0]["digests"])
    assert svg.count('class="mark-culprit"') == 1 and "culprit: relu" in svg
    assert 'class="spread"' in svg
    assert svg.count("<title>") == values + 1  # one per value, one for the plot
    assert "#5 relu = aten.relu.default  (culprit)\nrelu_bug.py:33\ncompiled 1.21e+07 ulps RMS" in svg
    assert _rows_of(page) == values
    assert 'class="r-culprit" data-failing="1"' in page


def test_node_rows_read_roles_errors_and_non_finite_outputs() -> None:
    report = load("nan_model")
    rows = node_rows(report["graphs"][0], report)
    log = next(r for r in rows if r.node == "log")
    assert log.role == "culprit" and log.compiled_nonfinite == 269 and log.eager_nonfinite == 269
    assert log.failing and not next(r for r in rows if r.node == "convolution").failing
    svg = profile_svg(rows, "profile")
    assert svg.count('class="nonfinite-compiled"') == sum(1 for r in rows if r.compiled_nonfinite)
    assert svg.count('class="nonfinite-eager"') == sum(1 for r in rows if r.eager_nonfinite)


def test_a_model_made_nan_is_called_a_model_issue() -> None:
    page = render_html(load("nan_model"))
    assert "The model itself makes NaN/Inf in aten.log.default" in page
    assert "a model issue, not a compiler bug" in page and "log of a negative number" in page
    assert 'id="nan"' in page and "not searched: the finding is the model" in page


def test_a_crash_shows_the_exception_and_its_message() -> None:
    page = render_html(load("crash"))
    assert "CRASH" in page and "Inductor fails on aten.relu.default" in page
    assert "raised RuntimeError" in page and "planted compile error\nsecond line of the message" in page
    assert "relu crashes alone: RuntimeError: planted compile error" in page


def test_a_clean_run_gets_the_profile_of_its_judged_outputs_and_no_culprit() -> None:
    report = load("clean")
    page = render_html(report)
    assert "CLEAN" in page and "torch.compile agrees with eager" in page and "Culprit" not in page
    assert "<svg class=\"profile\"" in page and "How it was checked" in page
    judged = sum(1 for d in report["graphs"][0]["digests"] if "error" in d)
    assert f"Only the graph's {judged} output value(s) were judged" in page
    assert 'href="#bug-report"' not in page


def test_a_kernel_section_appears_when_the_culprit_has_kernels() -> None:
    report = load("divergent")
    report["culprit"]["kernels"] = [{"name": "cpp_fused_relu_0", "nodes": ["relu"],
                                     "source": 'extern "C" void kernel(float* out) { out[0] = x < 0 ? 1 : x + 1; }'}]
    page = render_html(report)
    assert 'id="kernels"' in page and "cpp_fused_relu_0" in page
    assert "out[0] = x &lt; 0 ? 1 : x + 1;" in page
    assert 'id="kernels"' not in render_html(load("divergent"))


def test_the_repro_and_the_bug_report_are_embedded_with_copy_buttons() -> None:
    page = render_html(load("divergent"), repro_text="print('</pre><b>x</b>')\n", bug_report="### body <img src=x>")
    assert 'data-copy="repro-text"' in page and "print(&#x27;&lt;/pre&gt;&lt;b&gt;x&lt;/b&gt;&#x27;)" in page
    assert 'data-copy="bug-report-text"' in page and "### body &lt;img src=x&gt;" in page
    too_long = render_html(load("divergent"), repro_text="x = 1\n" * 30_000)
    assert 'data-copy="repro-text"' not in too_long and "too large to embed" in too_long


def test_everything_from_the_report_is_escaped() -> None:
    report = synthetic_report(50, hostile=True)
    report["culprit"]["crash"] = {"exception": f"{HOSTILE}Error", "message": f"</pre>{HOSTILE}"}
    report["graphs"][0]["digests"][3]["op"] = f"aten.{HOSTILE}"
    report["environment"]["platform"] = HOSTILE
    report["subsystem"]["workaround"] = f'"><img src=x onerror=alert(1)>{HOSTILE}'
    page = render_html(report)
    assert HOSTILE not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;.py" in page
    assert page.count("<script") == 1  # the page's own script, nothing else


def test_a_2000_node_graph_renders_under_2_mb_with_every_node_in_plot_and_table() -> None:
    report = synthetic_report(2000)
    page = render_html(report)
    assert len(page.encode()) < TWO_MB
    assert _rows_of(page) == 2000 and page.count("<title>") == 2002  # the page, the plot, each node
    assert 'class="nonfinite-compiled"' in page and "culprit: node_666" in page


def test_rendering_is_deterministic_and_does_not_touch_the_report() -> None:
    report = synthetic_report(300)
    before = copy.deepcopy(report)
    first = render_html(report)
    assert render_html(json.loads(json.dumps(report))) == first
    assert report == before


def test_the_page_is_self_contained() -> None:
    page = render_html(load("divergent"), repro_text="x = 1\n", bug_report="body")
    assert not re.search(r"\b(src|href)\s*=\s*\"(https?:)?//", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert page.startswith("<!DOCTYPE html>") and page.count("<style>") == 1


@pytest.mark.parametrize("name", ["divergent", "crash", "clean", "nan_model", "nan_compiled"])
def test_every_fixture_renders_with_keys_missing(name: str) -> None:
    """Reports from older runs, script mode or a cut budget lack keys: never a KeyError."""
    report = load(name)
    for key in ("stats", "environment", "repro", "subsystem", "culprit", "nan", "schema"):
        report.pop(key, None)
    for graph in report["graphs"]:
        for entry in graph["digests"]:
            entry.pop("error", None)
            entry.pop("source", None)
    assert "<svg class=\"profile\"" in render_html(report)


def test_log_axis_and_ticks() -> None:
    axis = LogAxis.spanning([0.0, 0.5, 3e7], top=0.0, bottom=100.0)
    assert (axis.low, axis.high) == (-1, 8)
    assert axis.y(10.0 ** 8) == 0.0 and axis.y(0.1) == 100.0 and axis.y(0.0) == 100.0
    assert LogAxis.spanning([], 0.0, 1.0).decades() == [-1, 0, 1, 2]
    assert [nice_step(n) for n in (7, 26, 200, 2000)] == [1, 5, 20, 200]


LISTED = {"op": "aten.erf.default", "node": "erf", "graph": "forward_1", "source": "model.py:12", "kind": "node",
          "reason": "upstream_same", "error": {"outcome": "mismatch", "compiled_rms_ulps": 10.5, "eager_rms_ulps": 0.48,
                                               "reason": "rms"}, "program_outputs": []}


def test_a_finding_the_upstream_gate_listed_is_shown_beside_the_verdict() -> None:
    """``within_upstream`` (model files) and a script's graphs' listings: visible in the page, after
    the cards and before the profile; a report without any has no such section."""
    assert 'id="within-upstream"' not in render_html(load("clean"))
    report = {**load("clean"), "within_upstream": [LISTED],
              "script": {"graphs": [{"graph": "graph_3", "within_upstream": [
                  {"call": 2, "output": "output 0", "compiled_rms_ulps": 96.0, "eager_rms_ulps": 1.5}]}]}}
    page = render_html(report)
    section = page.index('id="within-upstream"')
    assert page.index('id="verdict"') < section < page.index('id="profile"')
    assert "aten.erf.default (node erf, graph forward_1, model.py:12) is wrong on its own (10.5 ulps RMS" in page
    assert "within torch._dynamo.utils.same&#x27;s tolerance: listed, not a divergence" in page
    assert "graph_3 call 2, output 0: 96 ulps RMS (eager 1.5)" in page
    assert '<a href="#within-upstream">' in page
    hostile = render_html({**report, "within_upstream": [{**LISTED, "op": HOSTILE}]})
    assert HOSTILE not in hostile


def test_a_scripts_listing_names_the_op_its_graph_gets_wrong_alone() -> None:
    """pytorch#198183: a script's call upstream's ``same`` passes, with the op the per-node check
    found wrong alone (``ops``), is shown with that op in the page and the summary."""
    from bisect_engine.script.session import within_upstream_lines

    script = {"graphs": [{"graph": "graph_1", "within_upstream": [
        {"call": 1, "output": "output 0", "compiled_rms_ulps": 5076.063, "eager_rms_ulps": 0.81,
         "ops": ["aten.erf.default"]}]}]}
    page = render_html({**load("clean"), "script": script})
    assert "graph_1 call 1, output 0 (aten.erf.default wrong on its own): 5.08e+03 ulps RMS (eager 0.81)" in page
    (line,) = within_upstream_lines(script)
    assert line.startswith("  listed:  graph_1 call 1 output 0 (aten.erf.default): 5076.063 ulps RMS"), line
