"""Findings in tlparse: the report and each finding, written into torch's structured trace.

torch's structured trace (``TORCH_TRACE=DIR``, read by ``tlparse``) files every record under the
Dynamo compile it belongs to. :func:`emit_findings` writes a ``bisect_accuracy_report`` artifact
(the report) and one ``bisect_accuracy_finding`` artifact per finding, each under the compile id
of the graph it concerns (recorded at capture), so tlparse lists them beside that compile's own
graphs. They go wherever the trace goes: ``TORCH_TRACE``'s folder, or, with ``--trace``,
``OUT/trace/torch_trace.log``: :func:`recording_trace` keeps the run's trace in memory (past
:data:`SPILL_BYTES`, in an unnamed temporary file inside ``OUT``) and writes it through the output
folder (the one way files reach ``OUT``) when the run ends. Nothing here needs tlparse; torch is
imported only when a trace is recorded or written (the report writer stays importable at exit).
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import tempfile
from typing import IO, Any, Iterator

from ..verdicts import FINDINGS
from .folder import OutputError, OutputFolder

log = logging.getLogger(__name__)

REPORT_ARTIFACT = "bisect_accuracy_report"
FINDING_ARTIFACT = "bisect_accuracy_finding"
TRACE_FILE = "trace/torch_trace.log"
SPILL_BYTES = 64 * 1024 * 1024  # a trace past this is kept in an unnamed file in OUT, not in memory
# torch's CompileId as text: "0/1", or under compiled autograd "!2" and "!2/0/1".
_COMPILE_ID = re.compile(r"^(?:!(?P<autograd>\d+))?(?:/?(?P<frame>\d+)/(?P<frame_compile>\d+))?$")


class _KeptTraceHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """``--trace``: records into ``stream``; ``kept_as`` is where the output folder puts it."""

    def __init__(self, stream: IO[str], kept_as: str):
        super().__init__(stream)
        self.kept_as = kept_as


@contextlib.contextmanager
def recording_trace(folder: OutputFolder, enabled: bool) -> Iterator[None]:
    """With ``enabled``, torch's structured trace of everything inside (the capture's Dynamo
    compiles, the engine's Inductor compiles, our artifacts) ends up in ``OUT/trace/``, also when
    the run fails (a failure to keep it then only logs: the run's own error comes first)."""
    if not enabled:
        yield
        return
    from torch._logging._internal import TorchLogsFormatter, trace_log

    with tempfile.SpooledTemporaryFile(max_size=SPILL_BYTES, mode="w+", encoding="utf-8",
                                       dir=str(folder.path)) as buffer:
        handler = _KeptTraceHandler(buffer, str(folder.path / TRACE_FILE))  # type: ignore[arg-type]
        handler.setFormatter(TorchLogsFormatter(trace=True))
        level = trace_log.level
        trace_log.setLevel(logging.DEBUG)  # torch keeps it there; a record below it would be dropped
        trace_log.addHandler(handler)
        failing = True
        try:
            yield
            failing = False
        finally:
            trace_log.removeHandler(handler)
            trace_log.setLevel(level)
            _keep_trace(folder, handler, buffer, failing)  # type: ignore[arg-type]


def _keep_trace(folder: OutputFolder, handler: _KeptTraceHandler, buffer: IO[str], failing: bool) -> None:
    try:
        handler.flush()
        buffer.seek(0)
        folder.write_text(TRACE_FILE, buffer.read())
    except (OutputError, OSError) as error:
        if not failing:
            raise
        log.warning("the trace was not kept: %s", error)
    finally:
        handler.close()


def trace_destination() -> str | None:
    """Where torch's structured trace is written now: our ``OUT/trace`` file first, then
    ``TORCH_TRACE``'s folder (its file, once open), then a ``logging.FileHandler``'s file; None when
    nothing writes it anywhere (torch not even imported; a handler to ``/dev/null``, as test
    harnesses add, counts not)."""
    internal = sys.modules.get("torch._logging._internal")
    if internal is None:
        return None
    handlers = list(internal.trace_log.handlers)
    ours = [h.kept_as for h in handlers if isinstance(h, _KeptTraceHandler)]
    # torch's own handler has a root_dir: None while no folder is set (it then removes itself)
    torchs = [str(getattr(h, "_stream_path", None) or h.root_dir) for h in handlers if getattr(h, "root_dir", None)]
    files = [str(h.baseFilename) for h in handlers
             if isinstance(h, logging.FileHandler) and h.baseFilename != os.path.abspath(os.devnull)]
    return next(iter(ours + torchs + files), None)


def note_trace(report: dict[str, Any]) -> None:
    """``report["trace"]``: where the trace goes and which artifacts :func:`emit_findings` writes
    there, under which compile id (absent when nothing records the trace)."""
    destination = trace_destination()
    if destination is None:
        report.pop("trace", None)
        return
    artifacts = [{"name": FINDING_ARTIFACT, "graph": f["graph"], "compile_id": f["compile_id"]} for f in findings(report)]
    report_id = artifacts[0]["compile_id"] if artifacts else _graph_compile_id(report, None)
    artifacts.append({"name": REPORT_ARTIFACT, "graph": None, "compile_id": report_id})
    report["trace"] = {"path": destination, "artifacts": artifacts}


def emit_findings(report: dict[str, Any]) -> None:
    """The artifacts :func:`note_trace` listed in ``report["trace"]``, written into the trace."""
    planned = (report.get("trace") or {}).get("artifacts") or []
    if not planned or trace_destination() is None:
        return
    for artifact, finding in zip(planned, findings(report)):
        _emit(FINDING_ARTIFACT, finding, artifact["compile_id"])
    _emit(REPORT_ARTIFACT, report, planned[-1]["compile_id"])


def findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One per graph that the culprit or a NaN/Inf origin names (in practice one: the search stops
    at the first graph with a finding); a finding no graph is named for is the run's."""
    if report.get("verdict") not in FINDINGS:
        return []
    culprit, nan = report.get("culprit") or {}, report.get("nan") or {}
    origins = [nan.get(side) or {} for side in ("eager", "compiled")]
    named = [culprit.get("graph"), *(origin.get("graph") for origin in origins)]
    graphs: list[str | None] = list(dict.fromkeys(g for g in named if g)) or [None]
    repro = report.get("repro") or {}
    return [{
        "verdict": report.get("verdict"),
        "graph": graph,
        "compile_id": _graph_compile_id(report, graph),
        "culprit": culprit if graph is None or culprit.get("graph") == graph else None,
        "nan": nan if graph is None or any(o.get("graph") == graph for o in origins) else None,
        "subsystem": report.get("subsystem"),
        "repro": {key: repro.get(key) for key in ("path", "status", "reproduced")} if repro else None,
    } for graph in graphs]


def _graph_compile_id(report: dict[str, Any], graph: str | None) -> str | None:
    """The compile id of the named graph; for None, the first graph's that has one."""
    for entry in report.get("graphs") or []:
        if (graph is None or entry.get("name") == graph) and entry.get("compile_id"):
            return str(entry["compile_id"])
    return None


def _emit(name: str, payload: dict[str, Any], compile_id: str | None) -> None:
    from torch._logging import trace_structured

    text = json.dumps(payload, default=str)
    trace_structured("artifact", metadata_fn=lambda: {"name": name, "encoding": "json"},
                     payload_fn=lambda: text, compile_id=parse_compile_id(compile_id))


def parse_compile_id(text: str | None) -> Any:
    """torch's ``CompileId`` from its text ("0/0"), or None (a record then carries no compile id)."""
    match = _COMPILE_ID.match(text or "")
    if not text or match is None:
        return None
    from torch._guards import CompileId

    def number(group: str) -> int | None:
        return int(match[group]) if match[group] is not None else None

    if match["autograd"] is not None:
        return CompileId(frame_id=number("frame"), frame_compile_id=number("frame_compile"),
                         compiled_autograd_id=number("autograd"))
    return CompileId(frame_id=number("frame"), frame_compile_id=number("frame_compile"))
