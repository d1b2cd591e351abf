"""What a strategy sees of the run's search: the typed extension point every strategy takes.

A strategy only proposes: it builds candidates (:mod:`bisect_engine.verdict.candidate`) and asks
the search for their verdicts; caching, counting and the budget stay the search's
(:class:`bisect_engine.search.Search` over ``Candidate`` and ``SubgraphVerdict`` satisfies this
protocol; a test's fake only needs the methods a strategy calls).
"""
from __future__ import annotations

from typing import Callable, Protocol, Sequence

from ..search import Reporter
from ..verdict.candidate import Candidate
from ..verdict.oracle import SubgraphVerdict


class GraphSearch(Protocol):
    @property
    def calls(self) -> int:
        """Evaluations made so far (cache hits excluded)."""
        ...

    def judge(self, candidate: Candidate) -> SubgraphVerdict:
        """The candidate's verdict: cached, or evaluated within the run's budget."""
        ...

    def record(self, candidate: Candidate, verdict: SubgraphVerdict) -> None:
        """Seed the cache with a verdict learned without an evaluation."""
        ...

    @property
    def progress(self) -> Reporter:
        """The run's progress reporter, which the search holds (``with search.progress.step(...):``)."""
        ...

    @property
    def ahead(self) -> object | None:
        """The evaluator that judges candidates ahead (``--workers``), None when serial."""
        ...

    def prefetch(self, candidates: Sequence[Candidate]) -> None:
        """Start judging ``candidates`` ahead (a no-op without an ``ahead`` evaluator)."""
        ...

    def first(self, candidates: Sequence[Candidate],
              success: Callable[[SubgraphVerdict], bool]) -> tuple[Candidate, SubgraphVerdict] | None:
        """The first candidate, in submission order, whose verdict is a ``success``."""
        ...

    def discard_ahead(self) -> None:
        """Drop the verdicts judged ahead and never asked for."""
        ...
