"""The package layout is the pipeline: imports point down the stage order, never up, and the
modules every Python start or plain script may load stay torch-free."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import parse_python

ROOT = Path(__file__).resolve().parents[1]
# Lower layers first; a module may import its own layer and the ones before it.
LAYERS = [
    {"bisect_engine.errors", "bisect_engine.search", "bisect_engine.progress", "bisect_engine.verdicts",
     "bisect_engine.environ"},
    {"bisect_engine.verdict"},
    {"bisect_engine.load"},
    {"bisect_engine.strategies"},
    {"bisect_engine.localise"},
    {"bisect_engine.output"},
    {"bisect_engine.script"},
    {"bisect_engine.api", "bisect_engine.cli", "bisect_engine.autostart", "bisect_engine.interrupts",
     "bisect_engine.many", "bisect_engine.live", "bisect_engine.caller_state", "bisect_engine.assertion",
     "bisect_engine.pytest_plugin", "bisect_engine.supervise"},
]
TORCH_FREE = ["bisect_engine.autostart", "bisect_engine.supervise", "bisect_engine.verdicts", "bisect_engine.environ", "bisect_engine.search", "bisect_engine.errors", "bisect_engine.load.contract",
              "bisect_engine.script.watch", "bisect_engine.script.messages", "bisect_engine.script.levels",
              "bisect_engine.script.ranks", "bisect_engine.script.hook", "bisect_engine.script.runner",
              "bisect_engine.interrupts", "bisect_engine.output.folder", "bisect_engine.many",
              # the package's top level (the API loads on first use), and the pytest plugin every
              # pytest session of an environment with us installed loads
              "bisect_engine", "bisect_engine.live", "bisect_engine.assertion", "bisect_engine.pytest_plugin",
              # the report's views: `bisect-accuracy report OUT` re-renders without torch
              "bisect_engine.output.views", "bisect_engine.output.html", "bisect_engine.output.bug_report",
              "bisect_engine.output.profile", "bisect_engine.output.svg", "bisect_engine.output.wording"]


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.glob("bisect_engine/**/*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _layer(module: str) -> int:
    for index, layer in enumerate(LAYERS):
        if any(module == name or module.startswith(name + ".") for name in layer):
            return index
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def _imports(module: str, path: Path) -> set[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    targets = set()
    for node in ast.walk(parse_python(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            targets.add(".".join(base + ([node.module] if node.module else [])))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bisect_engine"):
            targets.add(node.module)
        elif isinstance(node, ast.Import):
            targets |= {a.name for a in node.names if a.name.startswith("bisect_engine")}
    return {t for t in targets if t != "bisect_engine"}


@pytest.mark.parametrize("module", sorted(m for m in _modules() if m != "bisect_engine"))
def test_imports_point_down_the_pipeline(module: str) -> None:
    modules = _modules()
    own = _layer(module)
    upward = [t for t in _imports(module, modules[module]) if _layer(t) > own]
    assert not upward, f"{module} (layer {own}) imports {upward}"


def test_modules_loaded_at_every_start_import_no_torch() -> None:
    code = ("import sys\n" + "".join(f"import {m}\n" for m in TORCH_FREE)
            + "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout


def test_the_session_module_imports_nothing_of_inductor() -> None:
    """The start-up hook starts a session the moment ``torch._dynamo`` is imported, maybe from inside
    an Inductor module still being imported: the session's own imports must not reach Inductor
    (they did once, and a circular import broke the hook). Nor do the report's: a script that
    compiles nothing never loads Dynamo or Inductor (about half of such a run's CPU-seconds)."""
    code = ("import sys, bisect_engine.script.session\n"
            "print(sorted(m for m in sys.modules if m.startswith('torch._inductor')))\n"
            "import bisect_engine.output.writer, bisect_engine.output.report, bisect_engine.output.summary\n"
            "print(sorted(m for m in sys.modules if m.startswith(('torch._inductor', 'torch._dynamo'))))")
    result = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["[]", "[]"], result.stdout


def test_one_list_of_verdicts() -> None:
    """Every view reads the verdicts from ``bisect_engine.verdicts``: no module keeps its own copy
    of the list (four copies had drifted apart)."""
    copies = [str(path.relative_to(ROOT)) for module, path in _modules().items()
              if module != "bisect_engine.verdicts"
              and any(isinstance(node, ast.Assign) and any(getattr(t, "id", "") in ("FINDINGS", "VERDICTS")
                                                            for t in node.targets)
                      for node in parse_python(path.read_text()).body)]
    assert not copies, copies


def test_the_package_type_checks() -> None:
    """mypy (configured in pyproject.toml) finds no error in the package."""
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


# The one judgement (issue 23): outputs are judged through bisect_engine.verdict.judgement, never by
# calling the comparison rule directly. The rule's own module, the judgement, and the sites listed
# here (each with why it is not a judgement of compiled against eager) may call it.
JUDGEMENT_FUNCTIONS = {"compare_values", "compare_tensor"}
JUDGEMENT_CALLERS = {
    "bisect_engine.verdict.compare",  # the rule itself (closer_to_fp64, compare_random_draw)
    "bisect_engine.verdict.judgement",  # the one judgement
    "bisect_engine.verdict.drift",  # environments: a recorded value against a new one, not compiled vs eager
}


def _calls(path: Path, names: set[str]) -> list[int]:
    """Lines where ``path`` calls or imports one of ``names``."""
    lines = []
    for node in ast.walk(parse_python(path.read_text())):
        called = node.func if isinstance(node, ast.Call) else None
        name = getattr(called, "id", None) or getattr(called, "attr", None)
        if name in names or (isinstance(node, ast.ImportFrom) and any(a.name in names for a in node.names)):
            lines.append(node.lineno)
    return lines


def test_outputs_are_judged_through_the_one_judgement() -> None:
    direct = {module: lines for module, path in _modules().items() if module not in JUDGEMENT_CALLERS
              for lines in [_calls(path, JUDGEMENT_FUNCTIONS)] if lines}
    assert not direct, f"call bisect_engine.verdict.judgement.judge_outputs instead: {direct}"
