"""Search strategies: each proposes candidates to the one oracle and returns a finding.

Importable as ``bisect_engine.strategies`` (``pyproject.toml`` maps this folder there), so the
project claims no generic top-level ``strategies`` package. A strategy sees a
:class:`~bisect_engine.oracle.GraphContext` (a read-only view plus reference values) and never
mutates the captured ``GraphModule``.
"""
