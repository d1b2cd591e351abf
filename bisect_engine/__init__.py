"""bisect-accuracy: find the op that makes torch.compile (Inductor) disagree with eager.

``import bisect_engine`` stays cheap and torch-free: the Python API is loaded on first use.
``bisect_engine.check(model, *inputs)`` runs the pipeline on live objects (:mod:`bisect_engine.live`);
``bisect_engine.assert_compiled_matches(fn, *inputs)`` is the assertion for test suites
(:mod:`bisect_engine.assertion`; its pytest plugin: :mod:`bisect_engine.pytest_plugin`).

PYTEST_DONT_REWRITE: the plugin imports this package before pytest could rewrite its asserts
(library code, which raises its own ``AssertionError`` messages), so pytest is told to leave it.
"""
from __future__ import annotations

from typing import Any

__all__ = ["CheckResult", "__version__", "assert_compiled_matches", "check"]

_LAZY = {"check": "live", "CheckResult": "live", "assert_compiled_matches": "assertion"}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("bisect-accuracy")
        except PackageNotFoundError:  # a plain checkout, not installed
            return "0+unknown"
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
