"""Installing the start-up hook: ``bisect_accuracy_hook.pth`` in this interpreter's site-packages.

Python runs ``import`` lines of ``.pth`` files in site-packages at every start-up; this one line
imports :mod:`bisect_engine.autostart`, which does nothing unless ``BISECT_ACCURACY_LEVEL`` is
set. setuptools cannot ship a ``.pth`` from ``pyproject.toml`` simply, hence an explicit command
(``bisect-accuracy install-hook``, run by ``make venv``) and its inverse.
"""
from __future__ import annotations

import sysconfig
from pathlib import Path

HOOK_FILE = "bisect_accuracy_hook.pth"
HOOK_LINE = "import bisect_engine.autostart\n"


def hook_path() -> Path:
    return Path(sysconfig.get_paths()["purelib"]) / HOOK_FILE


def install_hook() -> Path:
    """Write the hook (idempotent); returns its path."""
    path = hook_path()
    path.write_text(HOOK_LINE)
    return path


def uninstall_hook() -> Path | None:
    """Remove the hook; returns the path removed, or None when there was none."""
    path = hook_path()
    if not path.exists():
        return None
    path.unlink()
    return path
