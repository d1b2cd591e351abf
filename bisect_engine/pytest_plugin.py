"""The pytest plugin (entry point ``pytest11``: loaded in every pytest session of an environment
with bisect-accuracy installed; torch-free, and idle unless a test calls
:func:`~bisect_engine.assert_compiled_matches`).

``--bisect-accuracy-out DIR``: each test's reports and repros go to ``DIR/<test name>-<time>``
(default: ``./bisect-accuracy-out``). A test whose assertion found a disagreement carries the
finding on its report: ``user_properties`` (the junit XML's ``<property>`` elements
``bisect_accuracy_verdict``, ``_op``, ``_source``, ``_report``, ``_repro``) and a
"bisect-accuracy" section with the summary, so CI shows the op, not "Tensor-likes are not close".
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Generator, Iterator

import pytest

from .assertion import OUT_DIR, RESULTS

DEFAULT_ROOT = Path("bisect-accuracy-out")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("bisect-accuracy")
    group.addoption("--bisect-accuracy-out", metavar="DIR", default=None, type=Path,
                    help="where assert_compiled_matches writes each failing test's report and repro "
                         "[default: ./bisect-accuracy-out]")


_ROOT = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """The reports' folder, from the folder pytest started in (a test may change folders later)."""
    config.stash[_ROOT] = Path(config.getoption("bisect_accuracy_out") or DEFAULT_ROOT).absolute()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    root = item.config.stash[_ROOT]
    results: list[Any] = []
    out_token, results_token = OUT_DIR.set(root / folder_name(item.nodeid)), RESULTS.set(results)
    try:
        yield
    finally:
        OUT_DIR.reset(out_token)
        RESULTS.reset(results_token)
        item.stash[_RESULTS] = results
        for result in results:  # the item's: its reports (the junit XML reads teardown's) copy them
            if result.verdict != "clean":
                item.user_properties += properties(result)


def properties(result: Any) -> list[tuple[str, str]]:
    return [("bisect_accuracy_verdict", result.verdict), ("bisect_accuracy_op", result.op or ""),
            ("bisect_accuracy_source", result.source or ""),
            ("bisect_accuracy_report", str(result.report_path or "")),
            ("bisect_accuracy_repro", str(result.repro_path or ""))]


_RESULTS = pytest.StashKey[list]()


def folder_name(nodeid: str) -> str:
    """A folder name for a test id (``tests/test_x.py::test_y[a-1]`` -> ``test_x.py-test_y-a-1``)."""
    name = nodeid.rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")[:120] or "test"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if call.when != "call":
        return
    for result in item.stash.get(_RESULTS, []):
        if result.verdict != "clean":
            report.sections.append(("bisect-accuracy", result.summary))
