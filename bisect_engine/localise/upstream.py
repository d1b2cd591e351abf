"""The upstream gate on a model file's per-graph headline (issue 36: never stricter than upstream).

A graph's finding judged by the ulp rule alone becomes the run's headline only where the
program's own outputs (the model-level check: the user's model through a real ``torch.compile``,
outputs, loss and gradients, judged at scope ``model``) fail too. Where they pass (the end-to-end
rule, or ``torch._dynamo.utils.same(eager, compiled, fp64_ref, tol=repro_tolerance)`` through
:func:`~bisect_engine.verdict.judgement.upstream_gate`), the finding is listed with the program's
errors (:class:`WithinUpstream`) and the verdict is the rest of the run's. The step that applies it
is ``upstream_gate`` in :data:`~bisect_engine.localise.run_steps.RUN_PLAN`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..verdict.compare import Outcome, TensorVerdict
from ..verdict.judgement import UPSTREAM_SAME
from ..verdict.oracle import SubgraphVerdict

# Every program output within the end-to-end tolerance by the tool's own rule (no gate needed).
END_TO_END = "end_to_end"


@dataclass(frozen=True)
class WithinUpstream:
    """Why a graph's finding is listed, not the headline: the program's outputs pass at scope model."""

    reason: str  # UPSTREAM_SAME: some outputs fail the ulp rule alone and ``same`` passes them; else END_TO_END
    outputs: dict[str, TensorVerdict] = field(default_factory=dict)  # the model-level check's, by output

    def to_json(self) -> dict[str, Any]:
        return {"reason": self.reason,
                "program_outputs": [{"output": name, **verdict.to_json()} for name, verdict in self.outputs.items()]}


def within_upstream(program: SubgraphVerdict) -> WithinUpstream | None:
    """The model-level check's verdict (scope ``model``): a listing when every output passes
    (never for a crash, a mismatch, or a check that compared nothing)."""
    if program.outcome is not Outcome.MATCH or not program.outputs:
        return None
    gated = any(verdict.reason == UPSTREAM_SAME for verdict in program.outputs.values())
    return WithinUpstream(UPSTREAM_SAME if gated else END_TO_END, dict(program.outputs))
