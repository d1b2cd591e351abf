"""Every dotted ``bisect_engine.…`` name the package's docstrings and comments cite resolves to a
module (and, when it names one, a class, function or module-level name there): a moved module
leaves no stale pointer for a reader to chase."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = re.compile(r"(?<![\w.])(bisect_engine(?:\.\w+)+)")


def _resolves(reference: str) -> bool:
    parts = reference.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        source = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if source.is_file():
            rest = parts[cut:]
            if not rest:
                return True
            name = re.escape(rest[0])
            # defined there, or a lazy export the module lists in its __all__ (the package's top level)
            return re.search(rf"^\s*(?:class|def)\s+{name}\b|^{name}\s*[:=]|^__all__\s*=.*[\"']{name}[\"']",
                             source.read_text(), re.M) is not None
    return False


def _references() -> list[tuple[str, str]]:
    found = []
    for path in sorted(ROOT.glob("bisect_engine/**/*.py")):
        for match in REFERENCE.finditer(path.read_text()):
            found.append((str(path.relative_to(ROOT)), match.group(1)))
    return found


def test_the_package_cites_itself() -> None:
    assert len(_references()) > 20  # the scan sees the references it is meant to check


@pytest.mark.parametrize(("where", "reference"), sorted(set(_references())))
def test_a_cited_name_exists(where: str, reference: str) -> None:
    assert _resolves(reference), f"{where} cites {reference}, which does not exist"


def test_a_moved_name_is_caught() -> None:
    assert not _resolves("bisect_engine.pipeline.run_captured")
    assert _resolves("bisect_engine.localise.pipeline.run_captured")
    assert _resolves("bisect_engine.check")  # a lazy export of the top level, listed in its __all__
    assert not _resolves("bisect_engine.check_everything")
