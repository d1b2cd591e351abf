"""The output folder is ours alone: locked, written atomically, never through a link, nothing lost.

:class:`OutputFolder` is the one way the tool writes into ``--out``:

- **a lock** (``.bisect-accuracy.lock``, ``flock``): a second run on the same folder is refused
  with a one-line message, never interleaved;
- **a manifest** (``.bisect-accuracy.json``): every file we write, with its SHA-256. A folder
  entry named like one of ours that the manifest does not vouch for (the user's own
  ``report.json``, a symbolic link) is *foreign*: the run is refused unless ``force``, and even
  then the entry is moved aside, never overwritten or followed;
- **earlier runs kept**: our files from an earlier run are moved to ``previous/<n>/`` before the
  new run writes, and the summary says where;
- **atomic writes**: a temporary file in the same folder (``O_EXCL | O_NOFOLLOW``), then
  ``os.replace``, which replaces a directory entry and never follows one; on any failure the
  temporary file is removed, so no truncated file is left;
- **faults are messages**: a missing parent, a read-only folder or a full disk raise
  :class:`OutputError` (a usage error, exit 2) naming the path and the reason; a write probe runs
  before the analysis, so the common cases fail before any work is done.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError

log = logging.getLogger(__name__)

REPORT_FILE = "report.json"
LOCK_FILE = ".bisect-accuracy.lock"
MANIFEST_FILE = ".bisect-accuracy.json"
# The run's private scratch (values waiting on disk, ``verdict/offload.py``): made by the run that
# asks, emptied first (a killed run's leftovers), removed when the folder closes.
SCRATCH_DIR = ".bisect-accuracy.scratch"
PREVIOUS_DIR = "previous"
# Names the tool writes at the top of the folder (files, or folders of files).
OUR_NAMES = ("report.json", "repro.py", "repro_inputs.bin", "internal-error.log", "report.html", "bug_report.md",
             "summary.json", "status.json", "graphs", "trace")
OUR_PREFIXES = ("rank", "pid")  # per-rank / per-process subfolders
# ``record`` / ``compare`` write these too (a bundle; a comparison and its bisection repros): their
# folders are vetted with the run's names and these, so an earlier run's files there are set aside too.
ENVIRONMENT_NAMES = OUR_NAMES + ("manifest.json", "values.pt", "comparison.json", "bisect")


class OutputError(UsageError):
    """The output folder cannot be used or written (exit 2): the message names path and reason."""


class FolderBusy(OutputError):
    """Another run holds the folder's lock."""


def _reason(error: OSError) -> str:
    if error.errno == errno.ENOSPC:
        return "no space left on the device"
    if error.errno == errno.EROFS:
        return "the file system is read-only"
    if error.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if error.errno == errno.ELOOP:
        return "it is a symbolic link (never followed)"
    return error.strerror or type(error).__name__


def _is_ours_by_name(name: str, names: tuple[str, ...] = OUR_NAMES) -> bool:
    return name in names or (name.startswith(OUR_PREFIXES) and name[len(name.rstrip("0123456789")):].isdigit())


def _digest(path: Path) -> str | None:
    if path.is_symlink() or not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class OutputFolder:
    path: Path
    force: bool = False
    session: str | None = None  # per-process subfolders (pid<N>, rank<N>) of this session are left alone
    reuse: bool = False  # add to the run already there (re-rendering its views): nothing is set aside
    names: tuple[str, ...] = OUR_NAMES  # the top-level names this command writes (ENVIRONMENT_NAMES: record, compare)
    files: dict[str, str] = field(default_factory=dict)  # relative name -> sha256, this run's
    previous: Path | None = None  # where an earlier run's (or foreign) files were moved
    moved_foreign: list[str] = field(default_factory=list)
    _lock: int | None = None
    _scratch: Path | None = None

    # -- opening ---------------------------------------------------------------------------

    def open(self) -> "OutputFolder":
        """Create, lock, vet and probe the folder (before any analysis)."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise OutputError(f"cannot create the output folder {self.path}: {_reason(error)}") from error
        if not self.path.is_dir():
            raise OutputError(f"the output folder {self.path} is not a folder")
        self._take_lock()
        try:
            if self.reuse:
                self.files = {str(k): str(v) for k, v in (self._manifest().get("files") or {}).items()}
            else:
                self._set_aside_earlier_files()
            self.write_text(".bisect-accuracy.probe", "")  # a full disk or read-only folder fails here
            self.remove(".bisect-accuracy.probe")
            self._save_manifest()
        except BaseException:
            self.close()
            raise
        return self

    def _take_lock(self) -> None:
        lock_path = self.path / LOCK_FILE
        try:
            descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as error:
            raise OutputError(f"cannot use the output folder {self.path}: {_reason(error)}") from error
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(descriptor, 64).decode(errors="replace").strip() or "another process"
            os.close(descriptor)
            raise FolderBusy(f"another bisect-accuracy run is using {self.path} (pid {holder}); "
                             "wait for it, or pass another --out") from None
        os.ftruncate(descriptor, 0)
        os.write(descriptor, str(os.getpid()).encode())
        self._lock = descriptor

    def _manifest(self, folder: Path | None = None) -> dict[str, Any]:
        path = (folder or self.path) / MANIFEST_FILE
        if path.is_symlink() or not path.is_file():
            return {}
        try:
            data = json.loads(path.read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _of_this_session(self, entry: Path) -> bool:
        """A per-process subfolder another process of this very session is writing."""
        return (self.session is not None and entry.name.startswith(OUR_PREFIXES) and entry.is_dir()
                and not entry.is_symlink() and self._manifest(entry).get("session") == self.session)

    def _set_aside_earlier_files(self) -> None:
        """Move an earlier run's files (and, with ``force``, foreign ones) to ``previous/<n>``."""
        vouched = {str(k): str(v) for k, v in (self._manifest().get("files") or {}).items()}
        ours: list[Path] = []
        foreign: list[Path] = []
        for entry in sorted(self.path.iterdir(), key=lambda p: p.name):
            if not _is_ours_by_name(entry.name, self.names) or self._of_this_session(entry):
                continue
            inside = [name for name in vouched if name == entry.name or name.startswith(entry.name + "/")]
            genuine = bool(inside) and not entry.is_symlink() and all(
                _digest(self.path / name) == vouched[name] for name in inside if (self.path / name).exists())
            if not genuine and entry.name.startswith(OUR_PREFIXES) and self._manifest(entry).get("tool"):
                genuine = not entry.is_symlink()  # an earlier session's per-process folder, with its own manifest
            (ours if genuine else foreign).append(entry)
        folders = [e for e in foreign if e.is_dir() and not e.is_symlink()]
        if folders:  # a folder we did not write is the user's (a package named graphs/): never moved
            names = ", ".join(e.name + "/" for e in folders)
            raise OutputError(f"{self.path} holds the folder(s) {names}, which this tool did not write (its manifest "
                              "does not list them); they are never moved, even with --force: choose another --out")
        if foreign and not self.force:
            names = ", ".join(e.name + (" (a symbolic link)" if e.is_symlink() else "") for e in foreign)
            raise OutputError(f"{self.path} holds {names}, which this tool did not write; pass --force to move "
                              f"them to {self.path / PREVIOUS_DIR}/ and use the folder, or choose another --out")
        if ours or foreign:
            self.previous = self._next_previous()
            for entry in ours + foreign:
                os.replace(entry, self.previous / entry.name)  # moves a link itself, never its target
            self.moved_foreign = [e.name for e in foreign]
            if (self.path / MANIFEST_FILE).exists() and not (self.path / MANIFEST_FILE).is_symlink():
                os.replace(self.path / MANIFEST_FILE, self.previous / MANIFEST_FILE)

    def _next_previous(self) -> Path:
        root = self.path / PREVIOUS_DIR
        if root.is_symlink():
            raise OutputError(f"{root} is a symbolic link (never followed); remove it or choose another --out")
        check_previous(root)
        root.mkdir(exist_ok=True)
        taken = [int(p.name) for p in root.iterdir() if p.name.isdigit()]
        folder = root / str(max(taken, default=0) + 1)
        folder.mkdir()
        return folder

    # -- writing ---------------------------------------------------------------------------

    def write_text(self, name: str, text: str) -> Path:
        return self.write_bytes(name, text.encode())

    def write_json(self, name: str, content: Any) -> Path:
        return self.write_text(name, json.dumps(content, indent=2, default=str) + "\n")

    def write_bytes(self, name: str, data: bytes) -> Path:
        """Write ``name`` (relative, may include subfolders) atomically, never through a link."""
        target = self.path / name
        folder = target.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if folder.resolve() != (self.path.resolve() / name).parent:
                raise OutputError(f"cannot write {target}: a folder on its way is a symbolic link (never followed)")
            temporary = folder / f".{target.name}.{os.getpid()}.{time.monotonic_ns()}.tmp"
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            try:
                with os.fdopen(descriptor, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(temporary, target)
            except BaseException:
                temporary.unlink(missing_ok=True)
                raise
        except OSError as error:
            raise OutputError(f"cannot write {target}: {_reason(error)}") from error
        if not name.startswith(".bisect-accuracy"):
            self.files[name] = hashlib.sha256(data).hexdigest()
            self._save_manifest()
        return target

    def write_report(self, report: dict[str, Any]) -> dict[str, Any]:
        """``report.json``, with where it is and what was set aside (public keys ``output``,
        ``report_path``)."""
        report["output"] = {"folder": str(self.path), "previous": str(self.previous) if self.previous else None,
                            "moved_foreign": self.moved_foreign}
        report["report_path"] = str(self.path / REPORT_FILE)
        self.write_json(REPORT_FILE, complete_report(report))
        return report

    def remove(self, name: str) -> None:
        (self.path / name).unlink(missing_ok=True)
        self.files.pop(name, None)

    def _save_manifest(self) -> None:
        manifest = {"tool": "bisect-accuracy", "pid": os.getpid(), "session": self.session, "files": self.files}
        data = (json.dumps(manifest, indent=2) + "\n").encode()
        temporary = self.path / f".{MANIFEST_FILE}.{os.getpid()}.tmp"
        try:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
            os.replace(temporary, self.path / MANIFEST_FILE)
        except OSError as error:
            temporary.unlink(missing_ok=True)
            raise OutputError(f"cannot write {self.path / MANIFEST_FILE}: {_reason(error)}") from error

    def scratch(self) -> Path | None:
        """The run's private scratch folder inside this one, empty (:data:`SCRATCH_DIR`); removed
        on :meth:`close`. None where the folder cannot take it (the reason logged)."""
        if self._scratch is None:
            path = self.path / SCRATCH_DIR
            try:
                if path.is_symlink() or (path.exists() and not path.is_dir()):
                    raise OSError(errno.EEXIST, "a file or link is in its place")
                shutil.rmtree(path, ignore_errors=True)
                path.mkdir(mode=0o700)
            except OSError as error:
                log.info("no scratch folder in %s: %s", self.path, _reason(error))
                return None
            self._scratch = path
        return self._scratch

    def close(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
        if self._lock is not None:
            os.close(self._lock)  # releases the flock
            self._lock = None

    def __enter__(self) -> "OutputFolder":
        return self.open()

    def __exit__(self, *_: Any) -> None:
        self.close()


SCHEMA_PATH = Path(__file__).with_name("report.schema.json")


def report_keys() -> list[str]:
    """The keys every ``report.json`` holds (``report.schema.json``: its ``required``)."""
    return list(json.loads(SCHEMA_PATH.read_text())["required"])


def complete_report(report: dict[str, Any]) -> dict[str, Any]:
    """The report as written: every public key present on every exit path, absent ones ``null``."""
    return {**{key: None for key in report_keys()}, **report}


def check_previous(root: Path) -> None:
    """``OUT/previous`` is ours only as a folder of numbered earlier runs; anything else there (a
    file, the user's own folder) is refused (exit 2), never written into nor moved."""
    if not root.exists():
        return
    if not root.is_dir():
        raise OutputError(f"{root} is a file this tool did not write (earlier runs are kept in a folder of that "
                          "name): rename it, or choose another --out")
    strangers = sorted(p.name for p in root.iterdir() if not (p.name.isdigit() and p.is_dir() and not p.is_symlink()))
    if strangers:
        raise OutputError(f"{root} holds {', '.join(strangers[:5])}, which this tool did not write (earlier runs "
                          "are kept there as numbered folders): rename it, or choose another --out")


def write_atomically(path: Path, data: bytes) -> None:
    """One file written atomically and never through a link, outside any lock (a rank's status
    file, rank 0's summary, an internal-error log); raises :class:`OutputError`."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise OutputError(f"cannot write {path}: {_reason(error)}") from error
