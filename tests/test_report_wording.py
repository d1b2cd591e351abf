"""Issue 37, the report's wording (helper bugs7): one story per report, each sentence true.

- A culprit judged by an exact rule (integers, a zero's sign, a value with one right answer) says
  the exact facts, never "compiled 0.001 ulps RMS vs eager 0" beside "exact: 4 of 8 elements".
- A saved value listed by element (a mask, or a float not closer by the ulp rule: pytorch#186799's
  ``atan2``) is never called "an exact value", nor said to agree with fp64 where eager does not.
- A script whose failing call a skipped cast explains (pytorch#181568) is clean, and its
  ``first_divergence_call`` says it was explained (``explained_by``).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bisect_engine.output.amplified import differences_lines
from bisect_engine.output.bug_report import render_bug_report
from bisect_engine.output.summary import summary
from bisect_engine.output.wording import answer
from bisect_engine.script.levels import Level, ScriptSettings
from bisect_engine.script.session import Divergence, Session

EXACT = "exact: 4 of 8 element(s) differ from eager's and the reference's (judged by equality)"


def _report(reason: str, compiled_rms: float = 0.001) -> dict[str, Any]:
    error = {"output": "remainder", "outcome": "mismatch", "compiled_rms_ulps": compiled_rms, "eager_rms_ulps": 0.0,
             "compiled_max_ulps": 0.004, "eager_max_ulps": 0.0, "new_nonfinite": 0, "reason": reason,
             "reference": "fp64"}
    culprit = {"op": "aten.remainder.Scalar", "node": "remainder", "graph": "forward_0", "kind": "node",
               "ops": ["aten.remainder.Scalar"], "nodes": ["remainder"], "source": "s.py:3", "module": None,
               "made_by": "compiler", "confirmed_alone": True, "propagators": [], "error": error}
    return {"verdict": "divergent", "culprit": culprit, "stats": {"compiles": 5, "seconds": 1.0, "compiles_by_stage": {}},
            "graphs": [], "findings": []}


def test_an_exact_rules_culprit_says_the_exact_facts_not_ulps() -> None:
    report = _report(EXACT)
    text = summary(report)
    assert EXACT in text and "judged by equality, not in ulps" in text and "ulps RMS" not in text
    assert "ulps RMS" not in answer(report) and EXACT in answer(report)
    assert EXACT in (render_bug_report(report, "", None) or "")
    ulp_rule = summary(_report("rms", compiled_rms=40.0))  # the ulp rule's culprit keeps its ulps
    assert "compiled 40 ulps RMS vs eager 0" in ulp_rule


def test_a_departure_counted_by_element_is_not_called_an_exact_value() -> None:
    entry = {"op": "aten.atan2.default", "node": "atan2", "source": "s.py:5", "elements": 3, "exact": True,
             "compiled_wrong": 1, "eager_wrong": 2, "setting": None}
    line = differences_lines([entry])[0]
    assert "3 element(s) differ from eager" in line and "compiled is off in 1 element(s), eager in 2" in line
    assert "an exact value" not in line and "agrees with fp64 where eager does not" not in line
    unswitched = differences_lines([{**entry, "setting": {"name": "emulate_precision_casts", "value": True,
                                                          "follows_eager": False}}])[0]
    assert unswitched.endswith("emulate_precision_casts=True checked: compiled still differs")  # never "makes it follow"


def test_a_clean_script_report_says_its_failing_call_was_explained_by_a_skipped_cast(tmp_path: Path) -> None:
    session = Session(ScriptSettings(out_dir=tmp_path / "out", level=Level.LOCALISE), tmp_path / "script.py", [], "test")
    session.divergence = Divergence("graph_0", 1, 1, time.time(), {"outcome": "mismatch", "output": "output 0",
                                                                    "reason": "rms"})
    elided = {"op": "aten._to_copy.default", "node": "_to_copy", "cast_elided": {"dtype": "torch.bfloat16"},
              "setting": {"name": "emulate_precision_casts", "value": True, "follows_eager": True}}
    session.report = {"verdict": "clean", "differences": [elided], "graphs": [], "stats": {}}
    session._save_report()
    first = session.report["script"]["first_divergence_call"]
    assert session.report["verdict"] == "clean" and first["explained_by"] == "cast_elided"
    session.report = {"verdict": "clean", "differences": [{**elided, "setting": None}], "graphs": [], "stats": {}}
    session._save_report()  # not explained: the program's difference stands
    assert session.report["verdict"] == "not_reproducible"
    assert "explained_by" not in session.report["script"]["first_divergence_call"]
