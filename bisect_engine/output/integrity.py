"""What the verification ran is what the tool rendered; the repro's hash; stale verifier folders.

Torch-free (``bisect-accuracy report OUT`` checks the hash without importing torch).

- :func:`private_repro` writes the rendered text (and its sidecar) into a folder of this process
  alone (``mkdtemp``: mode 0700), checks the hash, and yields the path the verifiers run: a file
  swapped in ``OUT`` after it was written is never what gets verified.
- :func:`repro_edited` says whether ``OUT/repro.py`` still has the hash the report recorded.
- :func:`sweep_stale_folders` removes verifier folders (or others named ``<prefix><pid>-``: the
  isolated rerun's) whose process is gone (a ``kill -9``).
- :func:`die_with_parent` (Linux, ``prctl(PR_SET_PDEATHSIG)``): a verifier interpreter dies
  when the tool does, even by ``kill -9``.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

VERIFY_PREFIX = "bisect-accuracy-verify-"
EDITED = "edited after verification (hash differs)"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def private_folder() -> str:
    """A folder only this process writes (0700), named with its pid so a later run can sweep it."""
    return tempfile.mkdtemp(prefix=f"{VERIFY_PREFIX}{os.getpid()}-")


@contextlib.contextmanager
def private_repro(script: str, sidecar: tuple[str, bytes] | None, name: str = "repro.py") -> Iterator[Path]:
    """The rendered ``script`` (and ``sidecar``: name, bytes) in a private folder, checked by hash."""
    folder = Path(private_folder())
    try:
        data = script.encode()
        path = folder / name
        path.write_bytes(data)
        if sidecar is not None:
            (folder / sidecar[0]).write_bytes(sidecar[1])
        if sha256(path.read_bytes()) != sha256(data):
            raise RuntimeError(f"the private copy of the repro at {path} changed before verification")
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def repro_edited(report: dict[str, Any], out_dir: Path) -> bool:
    """``OUT/repro.py`` no longer has the sha256 the run recorded (a report without one: unknown,
    ``False``)."""
    repro = report.get("repro") or {}
    recorded = repro.get("sha256")
    if not recorded:
        return False
    path = out_dir / "repro.py"
    try:
        return sha256(path.read_bytes()) != recorded
    except OSError:
        return True


def mark_edited(report: dict[str, Any]) -> None:
    """The views of an edited repro: no verification claimed for a text that was not verified."""
    repro = dict(report.get("repro") or {})
    repro.update(status="EDITED", reproduced=EDITED, runs=[])
    report["repro"] = repro


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_folders(root: str | None = None, prefix: str = VERIFY_PREFIX) -> list[str]:
    """Remove folders named ``<prefix><pid>-...`` (verifier folders unless told) left by a process
    that is gone; the ones removed."""
    root = root or tempfile.gettempdir()
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(root):
            if not entry.name.startswith(prefix) or not entry.is_dir(follow_symlinks=False):
                continue
            pid = entry.name[len(prefix):].split("-", 1)[0]
            if pid.isdigit() and not _alive(int(pid)) and entry.stat(follow_symlinks=False).st_uid == os.getuid():
                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.path)
    return removed


# Run first in each verifier interpreter: die with the tool (SIGKILL when the parent goes), and
# end at once when the parent is already gone. ``PARENT`` is replaced by the tool's pid.
DIE_WITH_PARENT = """\
import os, sys
try:
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
except Exception:
    pass
if os.getppid() != PARENT:
    os._exit(137)
"""


def die_with_parent_code() -> str:
    return DIE_WITH_PARENT.replace("PARENT", str(os.getpid()))
