"""Errors the engine raises on purpose; the CLI maps each to an exit status."""
from __future__ import annotations


class BisectError(Exception):
    """Base class: every error here carries a message meant for the user."""


class UsageError(BisectError):
    """Bad input from the user: a missing file, a model file that breaks its contract (exit 2)."""


class ModelError(UsageError):
    """The user's model raised while we ran it eagerly (exit 2: the model, not the compiler)."""
