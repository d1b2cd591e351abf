"""Ranks under ``torchrun``: where each rank writes, and rank 0's summary of who diverged first.

Ranks never talk through the process group: a hung collective must not hang the tool. Each rank
writes ``OUT/rank<r>/status.json`` (at its first divergence, and again, final, at exit); rank 0
waits a bounded time at exit for every rank's final status and writes ``OUT/summary.json``.
Ranks are ordered by when they diverged: wall time (one clock per host), then call index.
Standard library only.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ..output.folder import write_atomically
from ..verdicts import SEVERITY

STATUS_FILE = "status.json"
SUMMARY_FILE = "summary.json"


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: int


def rank_from_environment(environ: Mapping[str, str] = os.environ) -> RankInfo | None:
    """The rank ``torchrun`` (or any launcher setting RANK and WORLD_SIZE) gave this process."""
    if "RANK" not in environ or "WORLD_SIZE" not in environ:
        return None
    try:
        rank, world_size = int(environ["RANK"]), int(environ["WORLD_SIZE"])
        local_rank = int(environ.get("LOCAL_RANK", rank))
    except ValueError:
        return None
    return RankInfo(rank, world_size, local_rank)


def rank_dir(out_dir: Path, rank: RankInfo | None) -> Path:
    """Where one process writes: ``OUT`` alone, ``OUT/rank<r>`` under a launcher."""
    return out_dir if rank is None else out_dir / f"rank{rank.rank}"


def write_json_atomically(path: Path, content: dict[str, Any]) -> None:
    """Write to a temporary file, then rename (never through a link): a reader never sees half a file."""
    write_atomically(path, (json.dumps(content, indent=2, default=str) + "\n").encode())


def read_status(out_dir: Path, rank: int) -> dict[str, Any] | None:
    path = out_dir / f"rank{rank}" / STATUS_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def collect_statuses(out_dir: Path, world_size: int, wait_s: float,
                     sleep: Callable[[float], None] = time.sleep) -> dict[int, dict[str, Any] | None]:
    """Every rank's status, waiting up to ``wait_s`` for each to be final (a rank still running
    or killed keeps its last status, or None)."""
    deadline = time.monotonic() + wait_s
    while True:
        statuses = {rank: read_status(out_dir, rank) for rank in range(world_size)}
        if all(s is not None and s.get("final") for s in statuses.values()) or time.monotonic() >= deadline:
            return statuses
        sleep(0.2)


def rank_verdict(status: dict[str, Any] | None) -> str:
    """A rank's verdict as its final status says it; a rank with no status, or none final yet (it
    was killed, or still runs), was not seen to the end: ``incomplete``, never clean."""
    if not status or not status.get("final") or status.get("verdict") not in SEVERITY:
        return "incomplete"
    return str(status["verdict"])


def merged_verdict(verdicts: dict[int, str]) -> str:
    """One verdict for the whole run: the most severe rank's (``verdicts.SEVERITY``)."""
    return min(verdicts.values(), key=SEVERITY.index, default="incomplete")


def summarise(statuses: dict[int, dict[str, Any] | None]) -> dict[str, Any]:
    """Which ranks diverged, and which first: earliest wall time, then lowest call index; each
    rank's verdict and the one that covers them all."""
    diverged = {rank: s["divergence"] for rank, s in statuses.items() if s and s.get("divergence")}
    order = sorted(diverged, key=lambda r: (diverged[r]["wall_time"], diverged[r]["call"], r))
    verdicts = {rank: rank_verdict(status) for rank, status in statuses.items()}
    return {
        # added keys: every rank's verdict, and the most severe of them
        "verdict": merged_verdict(verdicts),
        "verdicts": {str(rank): verdict for rank, verdict in verdicts.items()},
        "world_size": len(statuses),
        "diverged": sorted(diverged),
        "first": order[0] if order else None,
        "order": order,
        "ordered_by": "wall time of the divergent call, then call index",
        "missing": [rank for rank, s in statuses.items() if s is None],
        "unfinished": [rank for rank, s in statuses.items() if s is not None and not s.get("final")],
        "ranks": {str(rank): s for rank, s in statuses.items()},
    }


def write_summary(out_dir: Path, world_size: int, wait_s: float) -> dict[str, Any]:
    summary = summarise(collect_statuses(out_dir, world_size, wait_s))
    write_json_atomically(out_dir / SUMMARY_FILE, summary)
    return summary
