"""Installing the start-up hook: ``bisect_accuracy_hook.pth`` in this interpreter's site-packages.

Python executes ``import`` lines of ``.pth`` files in site-packages at every start-up; this one
imports :mod:`bisect_engine.autostart` (which does nothing unless ``BISECT_ACCURACY_LEVEL`` is
set) through a guard, so the line stays harmless where the package is gone. setuptools cannot ship
a ``.pth`` from ``pyproject.toml`` simply, hence an explicit command (``bisect-accuracy
install-hook``, run by ``make venv``) and its inverse; the hook is also entered in the
distribution's ``RECORD``, so ``pip uninstall bisect-accuracy`` removes it. Standard library only.
"""
from __future__ import annotations

import os
import sysconfig
from pathlib import Path

HOOK_FILE = "bisect_accuracy_hook.pth"
# One line (a .pth line starting with "import" is executed as it is): import the start-up hook,
# and nothing at all when the package is not installed any more.
HOOK_LINE = 'import sys; exec("try:\\n import bisect_engine.autostart\\nexcept ImportError:\\n pass")\n'
DIST_INFO_GLOB = "bisect_accuracy-*.dist-info"


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def hook_path(site_dir: Path | None = None) -> Path:
    return (site_dir or site_packages()) / HOOK_FILE


def _records(site_dir: Path) -> list[Path]:
    return [folder / "RECORD" for folder in site_dir.glob(DIST_INFO_GLOB) if (folder / "RECORD").is_file()]


def install_hook(site_dir: Path | None = None) -> Path:
    """Write the hook (idempotent) and enter it in the distribution's RECORD; returns its path."""
    site_dir = site_dir or site_packages()
    path = hook_path(site_dir)
    temporary = path.with_name(f".{HOOK_FILE}.{os.getpid()}.tmp")
    temporary.write_text(HOOK_LINE)
    os.replace(temporary, path)
    for record in _records(site_dir):
        lines = record.read_text().splitlines()
        if not any(line.split(",", 1)[0] == HOOK_FILE for line in lines):
            record.write_text("\n".join([*lines, f"{HOOK_FILE},,"]) + "\n")
    return path


def uninstall_hook(site_dir: Path | None = None) -> Path | None:
    """Remove the hook and its RECORD entry; returns the path removed, or None when there was none."""
    site_dir = site_dir or site_packages()
    for record in _records(site_dir):
        lines = record.read_text().splitlines()
        kept = [line for line in lines if line.split(",", 1)[0] != HOOK_FILE]
        if kept != lines:
            record.write_text("\n".join(kept) + "\n")
    path = hook_path(site_dir)
    if not path.exists():
        return None
    path.unlink()
    return path
