"""Findings in tlparse: our artifacts in torch's structured trace, read back from the raw log the
way tlparse reads it (one JSON record a line, its payload on the tab-indented lines after it).
No compiles: a report fixture stands in for a run."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import torch

from bisect_engine.output.folder import OutputFolder
from bisect_engine.output.trace import (
    FINDING_ARTIFACT,
    REPORT_ARTIFACT,
    TRACE_FILE,
    emit_findings,
    findings,
    note_trace,
    parse_compile_id,
    recording_trace,
    trace_destination,
)

FIXTURES = Path(__file__).parent / "fixtures"


def read_trace(path: Path) -> list[tuple[dict[str, Any], str]]:
    """Each record of a raw structured-trace log and its payload (glog prefix, then ``] {json}``)."""
    records: list[tuple[dict[str, Any], str]] = []
    for line in path.read_text().splitlines():
        if line.startswith("\t") and records:
            records[-1] = (records[-1][0], records[-1][1] + line[1:] + "\n")
        elif "] {" in line:
            records.append((json.loads(line.split("] ", 1)[1]), ""))
    return records


def artifacts(path: Path) -> list[tuple[dict[str, Any], Any]]:
    """Our artifacts in a trace: (record, parsed payload)."""
    return [(record, json.loads(payload)) for record, payload in read_trace(path)
            if (record.get("artifact") or {}).get("name", "").startswith("bisect_accuracy_")]


def _report(name: str = "report_divergent.json", compile_id: str = "3/1") -> dict[str, Any]:
    report = json.loads((FIXTURES / name).read_text())
    for graph in report["graphs"]:
        graph["compile_id"] = compile_id
    return report


def test_compile_ids_read_back_as_torch_writes_them() -> None:
    from torch._guards import CompileId

    for text in ("0/0", "12/3", "!2", "!2/0/1"):
        assert str(parse_compile_id(text)) == text
    assert parse_compile_id("3/1") == CompileId(frame_id=3, frame_compile_id=1)
    assert parse_compile_id(None) is None and parse_compile_id("forward_0") is None


def test_a_finding_belongs_to_the_graph_its_culprit_names() -> None:
    report = _report()
    (finding,) = findings(report)
    assert finding["graph"] == report["culprit"]["graph"] and finding["compile_id"] == "3/1"
    assert finding["culprit"]["op"] == report["culprit"]["op"]
    assert findings(_report("report_clean.json")) == []


def test_without_a_trace_nothing_is_noted_or_written() -> None:
    assert trace_destination() is None  # the tests set no TORCH_TRACE
    report = _report()
    note_trace(report)
    emit_findings(report)
    assert "trace" not in report


def test_recorded_trace_holds_the_report_and_each_finding_under_the_graphs_compile_id(tmp_path: Path) -> None:
    report = _report()
    with OutputFolder(tmp_path / "out") as folder, recording_trace(folder, enabled=True):
        note_trace(report)
        emit_findings(report)
    trace = tmp_path / "out" / TRACE_FILE
    assert report["trace"]["path"] == str(trace)
    assert [a["name"] for a in report["trace"]["artifacts"]] == [FINDING_ARTIFACT, REPORT_ARTIFACT]
    found = artifacts(trace)
    assert [record["artifact"] for record, _ in found] == [{"name": FINDING_ARTIFACT, "encoding": "json"},
                                                            {"name": REPORT_ARTIFACT, "encoding": "json"}]
    for record, _ in found:
        assert (record["frame_id"], record["frame_compile_id"]) == (3, 1)
    assert found[0][1]["culprit"]["op"] == report["culprit"]["op"]
    assert found[1][1]["verdict"] == report["verdict"]
    # written through the output folder: vouched for by its manifest, nothing else left in OUT
    manifest = json.loads((tmp_path / "out" / ".bisect-accuracy.json").read_text())
    assert TRACE_FILE in manifest["files"]
    assert sorted(p.name for p in (tmp_path / "out").rglob("*")) == [
        ".bisect-accuracy.json", ".bisect-accuracy.lock", "torch_trace.log", "trace"]
    assert trace_destination() is None  # the handler is gone


def test_the_trace_is_kept_when_the_run_fails(tmp_path: Path) -> None:
    from torch._logging._internal import trace_log

    handlers, level = list(trace_log.handlers), trace_log.level
    with (OutputFolder(tmp_path / "out") as folder, pytest.raises(RuntimeError, match="the run failed"),
          recording_trace(folder, enabled=True)):
        torch._logging.trace_structured("artifact", metadata_fn=lambda: {"name": "x", "encoding": "string"},
                                        payload_fn=lambda: "hello", expect_trace_id=False)
        raise RuntimeError("the run failed")
    assert [r["artifact"]["name"] for r, _ in read_trace(tmp_path / "out" / TRACE_FILE)] == ["x"]
    assert list(trace_log.handlers) == handlers and trace_log.level == level


def test_a_clean_report_still_goes_into_the_trace(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    report = _report("report_clean.json", compile_id="0/0")
    with OutputFolder(tmp_path / "out") as folder, recording_trace(folder, enabled=True):
        note_trace(report)
        emit_findings(report)
    found = artifacts(tmp_path / "out" / TRACE_FILE)
    assert [(r["artifact"]["name"], r["frame_id"]) for r, _ in found] == [(REPORT_ARTIFACT, 0)]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_large_trace_spills_into_an_unnamed_file_inside_out_and_nothing_is_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bisect_engine.output.trace as trace_module

    monkeypatch.setattr(trace_module, "SPILL_BYTES", 64)
    report = _report()
    with OutputFolder(tmp_path / "out") as folder, recording_trace(folder, enabled=True):
        note_trace(report)
        emit_findings(report)
    assert len(artifacts(tmp_path / "out" / TRACE_FILE)) == 2
    assert sorted(p.name for p in (tmp_path / "out").rglob("*")) == [
        ".bisect-accuracy.json", ".bisect-accuracy.lock", "torch_trace.log", "trace"]
