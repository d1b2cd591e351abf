"""Shared set-up: every test process gets its own Inductor cache (a patched lowering compiled
once is served from the on-disk cache to the next compile of the same graph), and nothing a test
writes lands outside its temporary folders."""
from __future__ import annotations

import os
import tempfile

import pytest

# Before anything imports torch: a private Inductor/Triton cache for this test process. Child
# processes inherit it unless a test gives them one of their own.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="bisect-tests-inductor-"))


@pytest.fixture
def fresh_inductor_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh cache folder, for a subprocess that plants a bug."""
    return str(tmp_path_factory.mktemp("inductor-cache"))


# Wall seconds of each end-to-end case (tests/test_e2e.py fills it): printed after the run, so the
# suite's time can be budgeted case by case (make test must stay under 15 minutes on 2 cores).
E2E_SECONDS: dict[str, float] = {}


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if E2E_SECONDS:
        terminalreporter.write_sep("-", "end-to-end cases, wall seconds (two at a time)")
        for stem, seconds in sorted(E2E_SECONDS.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{seconds:7.1f}  {stem}")
