"""The culprit's generated kernels, from the compiles that judge the culprit.

Confirming a node alone asks for Inductor's code up front (``GraphCandidate.keep_code``: no extra
compile). The minimal window was judged many times while it was searched, without its code, so
keeping the code costs one more compile of it, made only when the budget has one left: without
it the report has no kernels, and nothing else changes.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Sequence

from ..verdict.candidate import GraphCandidate
from ..verdict.kernels import Kernel, culprit_kernels
from .judge import RunSearch

log = logging.getLogger(__name__)


def kept_kernels(search: RunSearch, candidate: GraphCandidate, culprit: Sequence[str]) -> tuple[Kernel, ...]:
    """The kernels computing ``culprit`` in a compile of ``candidate`` that keeps its code."""
    verdict = search.judge_if_room(dataclasses.replace(candidate, keep_code=True))
    if verdict is None:
        log.info("no compile left to keep the kernels of %s", candidate.purpose or candidate.graph)
        return ()
    return culprit_kernels(verdict.code, culprit)
