"""The run's verdicts: one vocabulary for the report, the exit status and every view.

Torch-free and at the bottom of the layer order, so the CLI, the script session, the trace and the
torch-free report views (``bisect-accuracy report OUT``) all read the same list. ``Verdict`` is a
``str`` enum: ``report.json`` keeps writing the plain strings (a public contract).
"""
from __future__ import annotations

from enum import Enum


class Verdict(str, Enum):
    CLEAN = "clean"  # every graph, and the model, judged and matching
    DIVERGENT = "divergent"  # a compiled value is wrong (a named op, or a window of ops)
    NAN = "nan"  # compiled code makes NaN/Inf (or eager does: then a model issue, said so)
    CRASH = "crash"  # Inductor fails to compile or run a graph the user's torch.compile also fails on
    NOT_REPRODUCIBLE = "not_reproducible"  # the model diverges; no captured graph does on its own
    INCOMPLETE = "incomplete"  # the budget ran out before every graph was judged (exit 4)
    INTERRUPTED = "interrupted"  # SIGINT / SIGTERM (exit 130 / 143)
    UNCHECKED = "unchecked"  # script mode, level 1: graphs recorded, not checked
    ERROR = "error"  # the run ended by a usage error (exit 2) or an internal error (exit 3): report.error says which

    def __str__(self) -> str:
        return self.value


# A disagreement between torch.compile and eager was found: exit 1, a bug report, trace artifacts.
FINDINGS: tuple[str, ...] = tuple(v.value for v in (Verdict.DIVERGENT, Verdict.NAN, Verdict.CRASH,
                                                     Verdict.NOT_REPRODUCIBLE))
# Findings where an op, a window or a NaN origin was localised: the red badge of report.html.
LOCALISED: tuple[str, ...] = tuple(v.value for v in (Verdict.DIVERGENT, Verdict.NAN, Verdict.CRASH))
# Several processes' verdicts summarised as one: the first in this order wins.
SEVERITY: tuple[str, ...] = tuple(v.value for v in (Verdict.DIVERGENT, Verdict.CRASH, Verdict.NAN,
                                                     Verdict.NOT_REPRODUCIBLE, Verdict.INCOMPLETE,
                                                     Verdict.INTERRUPTED, Verdict.ERROR, Verdict.CLEAN,
                                                     Verdict.UNCHECKED))
