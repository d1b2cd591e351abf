"""Search strategies: each proposes candidates to the one oracle and returns a finding.

A folder inside the package (``bisect_engine/strategies/``), so a plain checkout imports it and
the project claims no generic top-level ``strategies`` package. A strategy sees a
:class:`~bisect_engine.verdict.oracle.GraphContext` (a read-only view plus reference values) and never
mutates the captured ``GraphModule``.
"""
