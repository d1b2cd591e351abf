"""Reports for the renderers' tests: real runs kept as JSON (``tests/fixtures/report_*.json``,
absolute paths replaced) and a synthetic report of any size."""
from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HOSTILE = "<script>alert(1)</script>"


def load(name: str) -> dict[str, Any]:
    """``divergent`` (relu_bug.py), ``crash``, ``clean`` (clean_bf16.py), ``nan_model`` (nan_in_model.py),
    ``nan_compiled`` (compiled_nan.py)."""
    return json.loads((FIXTURES / f"report_{name}.json").read_text())


def _entry(index: int, error: dict[str, Any] | None, nonfinite: int = 0) -> dict[str, Any]:
    digest = {"shape": [64, 128], "dtype": "float32", "l1_norm": 1000.0 + index, "bit_hash": f"{index:016x}",
              "nan": 0, "inf": 0}
    compiled = dict(digest, nan=nonfinite)
    entry = {"node": f"node_{index}", "op": ["aten.addmm.default", "aten.relu.default", "aten.add.Tensor",
                                              "aten.native_layer_norm.default", "aten.tanh.default"][index % 5],
             "source": f"model.py:{10 + index % 300}", "eager": digest, "compiled": compiled}
    if error is not None:
        entry["error"] = error
    return entry


def synthetic_report(nodes: int = 2000, culprit_at: int | None = None, hostile: bool = False) -> dict[str, Any]:
    """A divergent report over one graph of ``nodes`` values: a culprit a third of the way in,
    its error spreading to the next 40 nodes, the last three non-finite in compiled only."""
    culprit_at = nodes // 3 if culprit_at is None else culprit_at
    digests = []
    for index in range(nodes):
        eager = round(0.3 + abs(math.sin(index)) * 1.5, 3)
        spread = culprit_at < index <= culprit_at + 40
        compiled = 1.2e7 if index == culprit_at else (round(eager * 1.1, 3) if not spread else round(eager * 1.05, 3))
        outcome = "mismatch" if index == culprit_at or index >= nodes - 3 else "match"
        error = {"outcome": outcome, "compiled_rms_ulps": compiled, "eager_rms_ulps": eager,
                 "compiled_max_ulps": compiled * 3, "eager_max_ulps": eager * 3, "new_nonfinite": 0,
                 "reason": "rms" if outcome == "mismatch" else "", "scope": "node"}
        digests.append(_entry(index, error, nonfinite=5 if index >= nodes - 3 else 0))
    name = f"{HOSTILE}.py" if hostile else "model.py"
    report = copy.deepcopy(load("divergent"))
    report["model"] = f"/home/user/{name}"
    report["graphs"] = [{"name": "forward_0", "kind": "forward", "nodes": nodes, "whole": "mismatch",
                         "whole_error": None, "checked_nodes": nodes, "crashed_nodes": [], "node_check_error": None,
                         "compiled_node_copies": 40, "digests": digests}]
    culprit = report["culprit"]
    culprit.update(node=f"node_{culprit_at}", nodes=[f"node_{culprit_at}"], op=digests[culprit_at]["op"],
                   ops=[digests[culprit_at]["op"]], source=f"{name}:42", source_path=f"/home/user/{name}:42",
                   propagators=[f"node_{i}" for i in range(culprit_at + 1, min(nodes, culprit_at + 41))])
    culprit["error"]["output"] = f"node_{culprit_at}"
    return report
