"""The pipeline on live objects, in the caller's process: ``bisect_engine.check(model, *inputs)``.

A notebook or a test holds a model object and its inputs, not a model file. :func:`check` makes
the :class:`~bisect_engine.load.model_file.ModelSpec` a model file would give (the Inductor config
the caller set, a ``torch.compile``d model unwrapped with its backend, mode and ``dynamic=``) from
the objects, runs :func:`bisect_engine.api.bisect_spec` on it (the same search, report and repro as
``bisect-accuracy run``) inside :func:`~bisect_engine.caller_state.caller_state_kept`, and returns a
frozen :class:`CheckResult`, which a notebook shows as the report (``_repr_html_``). Only the output
folder is written. Problems with the call itself raise (``UsageError`` / ``ModelError``, as the
CLI's exit 2); a budget cut is a result with ``verdict == "incomplete"`` (exit status 4), never clean.
"""
from __future__ import annotations

import datetime
import html
import inspect
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable, Mapping

from .verdicts import FINDINGS

DEFAULT_ROOT = Path("bisect-accuracy-out")  # the CLI's --out default: each check gets a fresh folder inside


@dataclass(frozen=True)
class CheckResult:
    """What :func:`check` found, read from the report it wrote (``report`` holds all of it)."""

    verdict: str
    op: str | None
    source: str | None  # "file.py:LINE" of the culprit's code
    graph: str | None
    node: str | None
    error_ulps: float | None  # the culprit's compiled error, RMS in ulps against fp64
    eager_error_ulps: float | None  # eager's own error there
    findings: tuple[Mapping[str, Any], ...]
    exit_status: int  # what `bisect-accuracy run` would exit with: 0 clean, 1 finding, 2, 4 incomplete
    out_dir: Path
    report_path: Path | None
    repro_path: Path | None
    html_path: Path | None
    summary: str  # the lines the CLI prints
    report: Mapping[str, Any] = field(repr=False)

    @property
    def found(self) -> bool:
        """Compiled and eager disagree (a divergence, NaN, a crash, or a model-level difference)."""
        return self.verdict in FINDINGS

    def __str__(self) -> str:
        return self.summary

    def _repr_html_(self) -> str:
        """The report page (``report.html``) inline, in a frame of its own (its style and script
        stay inside it), under a one-line answer with the folder's paths."""
        page = _page(self)
        paths = " · ".join(f"<code>{html.escape(str(path))}</code>"
                           for path in (self.repro_path, self.report_path) if path is not None)
        return (f'<div class="bisect-accuracy"><p><b>bisect-accuracy: {html.escape(self.verdict)}</b>'
                f"{' ' + html.escape(self.op) if self.op else ''}"
                f"{' at ' + html.escape(self.source) if self.source else ''}<br>{paths}</p>"
                f'<iframe srcdoc="{html.escape(page, quote=True)}" title="bisect-accuracy report" '
                f'style="width:100%;height:640px;border:1px solid #ccc"></iframe></div>')


def _page(result: CheckResult) -> str:
    if result.html_path is not None and result.html_path.is_file():
        return result.html_path.read_text()
    from .output.html import render_html

    return render_html(dict(result.report))


def result_of(report: dict[str, Any], out_dir: Path) -> CheckResult:
    """The frozen result of a finished run, from its report."""
    from .cli import EXIT_USAGE, exit_status
    from .output.bug_report import is_input_problem
    from .output.summary import summary

    culprit = report.get("culprit") or {}
    error = culprit.get("error") or {}
    repro = (report.get("repro") or {}).get("path")
    status = EXIT_USAGE if is_input_problem(report) else exit_status(report["verdict"])
    return CheckResult(
        verdict=str(report["verdict"]), op=culprit.get("op"), source=culprit.get("source"),
        graph=culprit.get("graph"), node=culprit.get("node"), error_ulps=error.get("compiled_rms_ulps"),
        eager_error_ulps=error.get("eager_rms_ulps"),
        findings=tuple(MappingProxyType(dict(finding)) for finding in report.get("findings") or ()),
        exit_status=status, out_dir=out_dir, report_path=_path(report.get("report_path")),
        repro_path=_path(repro), html_path=_path(report.get("html_path")), summary=summary(report),
        report=MappingProxyType(report))


def _path(value: Any) -> Path | None:
    return Path(value) if value else None


def check(model: Callable[..., Any], *args: Any, loss_fn: Callable[[Any], Any] | None = None,
          out: str | Path | None = None, oracle: str = "outputs", stage: str = "repro", verify_runs: int = 3,
          max_compiles: int | None = None, timeout: float | None = None, seed: int = 0,
          random_inputs: bool = False, progress: bool = False, **kwargs: Any) -> CheckResult:
    """Find the op that makes ``torch.compile(model)`` disagree with eager on ``model(*args, **kwargs)``.

    ``model``: an ``nn.Module``, a function, a ``torch.compile``d one (its backend, ``mode=``,
    ``options=`` and ``dynamic=`` are the compile checked) or an ``ExportedProgram``. ``loss_fn``:
    ``loss_fn(output)`` returning a scalar: gradients are checked too. ``out``: the output folder
    (default: a fresh one under ``./bisect-accuracy-out/``); nothing is written outside it. The other
    options are the CLI's (``--oracle``, ``--stage``, ``--verify-runs``, ``--max-compiles``,
    ``--timeout``, ``--seed``, ``--random-inputs``); every other keyword goes to the model.
    The model, its parameters, gradients and buffers, the inputs, the random states, torch's flags
    and config are as they were when this returns (see :mod:`bisect_engine.caller_state`).
    """
    from .api import bisect_spec
    from .caller_state import caller_state_kept
    from .localise.options import EngineOptions
    from .output.writer import OutputOptions
    from .progress import Progress

    options = EngineOptions(seed=seed, oracle=oracle, stop_after=stage, max_compiles=max_compiles,  # type: ignore[arg-type]
                            timeout_s=timeout, workers=1)  # workers import a model file: a live model has none
    out_dir = Path(out) if out is not None else fresh_folder(DEFAULT_ROOT, _name(model))
    output = OutputOptions(out_dir=out_dir, verify_runs=verify_runs, random_inputs=random_inputs)
    with caller_state_kept(model, args, kwargs, loss_fn):
        spec = live_spec(model, args, kwargs, loss_fn)
        report = bisect_spec(spec, options, output, Progress(enabled=progress))
    return result_of(report, out_dir)


def live_spec(model: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
              loss_fn: Callable[[Any], Any] | None) -> Any:
    """The :class:`ModelSpec` a model file returning these objects would give, read as
    ``load_model_spec`` reads one (the caller's Inductor config now, the compiled object unwrapped)."""
    from .load.model_file import spec_of_objects

    return spec_of_objects(_source_path(model), with_keywords(model, kwargs) if kwargs else model, tuple(args),
                           loss_fn)


def with_keywords(model: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """A module calling ``model(*args, **kwargs)``: the engine passes positional inputs only. The
    model is its submodule ``model`` (its parameters are checked; module paths read ``model.…``)."""
    import torch

    class WithKeywords(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model
            self.keywords = kwargs

        def forward(self, *args: Any) -> Any:
            return self.model(*args, **self.keywords)

    return WithKeywords()


def _name(model: Any) -> str:
    target = model if inspect.isfunction(model) else type(model)
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in getattr(target, "__name__", "model"))[:40]


def _source_path(model: Any) -> Path:
    """Where the model's code lives (the report's ``model``); a notebook cell's file, or ``<name>``."""
    target = getattr(model, "_orig_mod", model)
    target = target if inspect.isfunction(target) or inspect.ismethod(target) else type(target)
    try:
        source = inspect.getsourcefile(target)
    except TypeError:
        source = None
    return Path(source).resolve() if source else Path(f"<{_name(model)}>")


def fresh_folder(root: Path, name: str) -> Path:
    """A folder under ``root`` that does not exist yet: ``NAME-YYYYmmdd-HHMMSS[-N]``."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    for count in itertools.count():
        candidate = root / (f"{name}-{stamp}" + (f"-{count}" if count else ""))
        if not candidate.exists():
            return candidate
    raise AssertionError("unreachable")
