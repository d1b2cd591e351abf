"""``report.html`` in a real browser: the tool's run on ``repro_cases/relu_bug.py`` (test_e2e's), and headless
Chromium opens the page from ``file://`` with networking off; the DOM after the page's scripts
ran must show the verdict, the culprit op and the profile, and a 1280x800 screenshot is taken
(``BISECT_SCREENSHOT=docs/report.png`` keeps it).

Needs the Debian package ``chromium`` (``apt-get install -y chromium``; ``make browser``, which
``make test`` runs, installs it when run as root); without it the test is skipped, saying so.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import background_result

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.e2e
OFFLINE = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-extensions",
           "--disable-default-apps", "--hide-scrollbars",
           # networking off: every host resolves nowhere, and no proxy is looked up
           "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9"]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("headless Chromium is not installed: install the Debian package `chromium` "
                "(apt-get install -y chromium) to run the browser test")


def _browser(chromium: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([chromium, *OFFLINE, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)


def background_jobs(session: pytest.Session) -> list[Any]:
    """None of its own: the page is the one test_e2e's relu_bug run wrote (a background job), so the
    tests here read it last, as the other readers of background runs do (tests/conftest.py)."""
    return []


@pytest.fixture(scope="module")
def relu_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``report.html`` of the real CLI run on relu_bug: test_e2e's (one run fewer in make test), or
    run here when that suite is not selected."""
    _chromium()
    from test_e2e import CASES, _run_case

    case = next(case for case in CASES if case.stem == "relu_bug")
    run = background_result("e2e:relu_bug", lambda: _run_case(case, tmp_path_factory.mktemp("browser")))
    assert run.exit_code == 1 and run.report is not None, run.output
    assert run.report["html_path"] == str(run.out_dir / "report.html"), run.report["html_path"]
    return run.out_dir / "report.html"


def test_the_page_renders_its_answer_and_profile_in_chromium_from_file_url(relu_report: Path, tmp_path: Path) -> None:
    result = _browser(_chromium(), tmp_path / "profile", "--virtual-time-budget=5000", "--dump-dom",
                      relu_report.as_uri())
    dom = result.stdout
    assert result.returncode == 0 and dom, result.stderr[-2000:]
    assert 'data-js="ready"' in dom  # the page's script ran to its end
    assert re.search(r'<span class="badge">DIVERGENT</span>', dom)
    assert "<h1>Inductor computes aten.relu.default wrong at relu_bug.py:33</h1>" in dom
    assert re.search(r'<svg class="profile"[^>]*viewBox', dom) and "culprit: relu" in dom
    values = len(json.loads((relu_report.parent / "report.json").read_text())["graphs"][0]["digests"])
    assert f'<span class="count">{values} of {values} values</span>' in dom  # written by the filter script


def test_a_screenshot_at_1280x800(relu_report: Path, tmp_path: Path) -> None:
    target = Path(os.environ.get("BISECT_SCREENSHOT") or tmp_path / "report.png")
    result = _browser(_chromium(), tmp_path / "profile", "--window-size=1280,800", "--virtual-time-budget=3000",
                      f"--screenshot={target}",
                      relu_report.as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    png = target.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(png[16:20], "big") == 1280


PROBE = """<script>
var header = document.querySelectorAll('#nodes-0 th')[4]; header.click();
var first = document.querySelector('#nodes-0 tbody tr').cells[1].textContent;
var tools = document.querySelector('.table-tools'), search = tools.querySelector('input[type=search]');
search.value = 'aten.relu'; search.dispatchEvent(new Event('input'));
var found = tools.querySelector('.count').textContent;
search.value = ''; search.dispatchEvent(new Event('input'));
var box = tools.querySelector('input[type=checkbox]'); box.checked = true; box.dispatchEvent(new Event('input'));
document.body.setAttribute('data-probe', [first, header.getAttribute('data-dir'), found,
                                          tools.querySelector('.count').textContent].join('|'));
</script></body>"""


def test_the_node_table_sorts_and_filters(relu_report: Path, tmp_path: Path) -> None:
    """Clicks the compiled-error header and types filters, in the page itself (a copy with a probe)."""
    probed = tmp_path / "probed.html"
    probed.write_text(relu_report.read_text().replace("</body>", PROBE))
    dom = _browser(_chromium(), tmp_path / "profile", "--virtual-time-budget=5000", "--dump-dom",
                   probed.as_uri()).stdout
    first, direction, found, failing = re.search(r'data-probe="([^"]*)"', dom).group(1).split("|")
    assert first.startswith("relu") and "culprit" in first and direction == "desc"  # the largest error first
    assert found.startswith("2 of ") and failing.startswith("2 of ")  # relu and relu_1; the two that fail
