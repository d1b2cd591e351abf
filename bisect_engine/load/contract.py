"""The model-file contract, read without running the file: torch-free.

A model file defines ``get_model()`` and ``get_inputs()`` at top level; anything else is a plain
script (run in script mode). Both the CLI and :mod:`bisect_engine.load.model_file` ask here.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Iterator

from ..errors import UsageError

MODEL_CONTRACT = ("get_model", "get_inputs")
INPUTS_FORMS = ("a tuple of the model's positional arguments, a dict of its keyword arguments or an "
                "(args, kwargs) pair")


def defines_model_contract(path: Path) -> bool:
    """Whether the file defines ``get_model``/``get_inputs`` at top level, read without running it
    (a plain script's top level is its program). A file that does not parse counts as a model
    file, so importing it reports the syntax error as a usage error."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except (SyntaxError, ValueError, UnicodeDecodeError):
        return True
    return any(name in MODEL_CONTRACT for name in _top_level_names(tree.body))


def _top_level_names(body: list[ast.stmt]) -> Iterator[str]:
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield statement.name
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            yield from (n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            yield from ((a.asname or a.name).split(".")[0] for a in statement.names)
        elif isinstance(statement, (ast.If, ast.Try, ast.With)):
            yield from _top_level_names(statement.body + getattr(statement, "orelse", []))


def split_inputs(value: Any, where: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``get_inputs()``'s value as (positional arguments, keyword arguments): a tuple is the
    positional ones, a dict the keyword ones (HF models take ``input_ids=``, ``attention_mask=``),
    a pair of a tuple (or list) and a dict both; anything else is a :class:`UsageError` naming
    ``where`` (``"model.py: get_inputs()"``)."""
    if isinstance(value, dict):
        args, kwargs = (), value
    elif isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], (tuple, list)) \
            and isinstance(value[1], dict):
        args, kwargs = tuple(value[0]), value[1]
    elif isinstance(value, tuple):
        return value, {}
    else:
        raise UsageError(f"{where} must return {INPUTS_FORMS}; it returned a {type(value).__name__} "
                         "(for one input write `return (x,)`)")
    bad = [repr(name) for name in kwargs if not (isinstance(name, str) and name.isidentifier())]
    if bad:
        raise UsageError(f"{where} returned keyword arguments whose names are not identifiers: {', '.join(bad)}")
    return args, dict(kwargs)
