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
