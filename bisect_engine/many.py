"""Many model files in one command: each runs as its own ``bisect-accuracy run`` process.

``bisect-accuracy run a.py b.py`` or ``bisect-accuracy run models/`` (every model file in the
folder) runs each model in a process of its own (its torch state, compile cache and any planted
config stay its own), writes each report to ``OUT/<name>/``, prints one table and writes
``OUT/summary.json``. Where the runs go is an *executor*: a local pool of ``--jobs`` processes
(default), or Ray tasks (``--executor ray``; ``ray.init()`` locally or on ``--ray-address``), with
the same command in every task. No scheduler of our own: a thread per job slot waits on a child
process, or Ray places the tasks.

Torch-free: the parent imports no torch; the children do.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from .environ import with_quiet_waits
from .errors import UsageError
from .load.contract import defines_model_contract
from .verdicts import FINDINGS

SUMMARY = "summary.json"
SUMMARY_KIND = "bisect-accuracy many-models summary"
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class ModelRun:
    """One model's run: where its report went and what it said."""

    model: str
    out_dir: str
    exit_code: int
    verdict: str | None  # None: no report was written (the run failed before one)
    op: str | None
    compiles: int | None
    seconds: float
    message: str  # the child's last stderr line when it wrote no report, else ""


def model_files(paths: Sequence[Path]) -> list[Path]:
    """The model files named: files as given, folders expanded to the model files directly inside
    them (sorted); plain scripts in a folder are left out, a plain script named directly is an error."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(p for p in sorted(path.glob("*.py")) if defines_model_contract(p))
        elif path.is_file():
            if not defines_model_contract(path):
                raise UsageError(f"{path} is a plain script: several files at once are model files only")
            found.append(path)
        else:
            raise UsageError(f"no such model file or folder: {path}")
    if not found:
        raise UsageError(f"no model file (defining get_model and get_inputs) in {', '.join(map(str, paths))}")
    unique = list(dict.fromkeys(p.resolve() for p in found))
    return unique


def out_names(models: Sequence[Path]) -> list[str]:
    """One output subfolder name per model: its stem, made unique with its parent folder's name."""
    stems = [m.stem for m in models]
    return [m.stem if stems.count(m.stem) == 1 else f"{m.parent.name}__{m.stem}" for m in models]


def run_one(model: str, out_dir: str, options: Sequence[str], environment: dict[str, str] | None = None) -> ModelRun:
    """One model through the CLI in a child process; what its report says (a pure function of the
    child's result, so Ray can run it as a task)."""
    started = time.monotonic()
    command = [sys.executable, "-m", "bisect_engine.cli", "run", model, "--out", out_dir, "-q", *options]
    result = subprocess.run(command, capture_output=True, text=True, env=environment, stdin=subprocess.DEVNULL)
    seconds = round(time.monotonic() - started, 1)
    report = read_report(Path(out_dir) / "report.json")
    last_line = next((line for line in reversed(result.stderr.strip().splitlines()) if line.strip()), "")
    if report is None:
        return ModelRun(model, out_dir, result.returncode, None, None, None, seconds, last_line)
    culprit = report.get("culprit") or {}
    return ModelRun(model, out_dir, result.returncode, report.get("verdict"), culprit.get("op"),
                    (report.get("stats") or {}).get("compiles"), seconds, "")


def read_report(path: Path) -> dict[str, Any] | None:
    """A run's ``report.json`` as a dict, or None where it is missing, unreadable or not an object."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def local_executor(jobs: int) -> Callable[[Sequence[tuple[str, str]], Sequence[str]], list[ModelRun]]:
    """``jobs`` runs at a time on this machine; two or more at once let OpenMP's waiting threads sleep
    (``environ.QUIET_WAITS``: each run has a thread per core, and spinning ones take the others' cores)."""
    environment = with_quiet_waits(os.environ) if jobs > 1 else None

    def execute(work: Sequence[tuple[str, str]], options: Sequence[str]) -> list[ModelRun]:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(lambda item: run_one(item[0], item[1], options, environment), work))
    return execute


def ray_executor(address: str | None) -> Callable[[Sequence[tuple[str, str]], Sequence[str]], list[ModelRun]]:
    try:
        import ray
    except ImportError as error:
        raise UsageError("--executor ray needs Ray: pip install 'bisect-accuracy[ray]'") from error

    def execute(work: Sequence[tuple[str, str]], options: Sequence[str]) -> list[ModelRun]:
        started_here = not ray.is_initialized()
        if started_here:
            # The children must import this checkout as the parent does.
            path = os.pathsep.join(p for p in sys.path if p)
            ray.init(address=address, include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"PYTHONPATH": path}})
        try:
            task = ray.remote(num_cpus=1)(run_one)
            return list(ray.get([task.remote(model, out, list(options)) for model, out in work]))
        finally:
            if started_here:
                ray.shutdown()
    return execute


def run_many(models: Sequence[Path], out_dir: Path, options: Sequence[str], executor: str = "local",
             jobs: int = 1, ray_address: str | None = None) -> list[ModelRun]:
    """Every model through its own run, results in the order given (whatever finished first)."""
    _check_out_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = [(str(model), str((out_dir / name).absolute())) for model, name in zip(models, out_names(models))]
    execute = ray_executor(ray_address) if executor == "ray" else local_executor(jobs)
    runs = execute(work, options)
    summary = {"kind": SUMMARY_KIND, "executor": executor, "jobs": jobs if executor == "local" else None,
               "exit_code": exit_code(runs), "models": [asdict(run) for run in runs]}
    (out_dir / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    return runs


def _check_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out {out_dir} is a file, not a folder")
    existing = out_dir / SUMMARY
    if existing.exists() and (read_report(existing) or {}).get("kind") != SUMMARY_KIND:
        raise UsageError(f"{existing} exists and was not written by bisect-accuracy: choose another --out")


def exit_code(runs: Iterable[ModelRun]) -> int:
    """The status of the whole command: 3 if any run hit an internal error, else 1 if any found a
    disagreement, else 4 if any gave no verdict, else 2 if any was refused, else 130/143 if
    interrupted, else 0."""
    codes = {run.exit_code for run in runs}
    for code in (3, 1, 4, 2, 130, 143):
        if code in codes:
            return code
    return 0 if codes <= {0} else max(codes)


def table(runs: Sequence[ModelRun]) -> str:
    """The summary table, one row per model, in the order given."""
    rows = [("model", "verdict", "op", "compiles", "seconds", "exit", "report")]
    for run in runs:
        verdict = run.verdict or f"no report ({run.message or 'see the run'})"
        flag = "!" if run.verdict in FINDINGS else ""
        rows.append((Path(run.model).name, verdict + flag, run.op or "-",
                     "-" if run.compiles is None else str(run.compiles), f"{run.seconds:.1f}", str(run.exit_code),
                     str(Path(run.out_dir) / "report.json") if run.verdict else "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    found = sum(run.verdict in FINDINGS for run in runs)
    clean = sum(run.verdict == "clean" for run in runs)
    lines.append(f"{len(runs)} model(s): {found} with a finding, {clean} clean, "
                 f"{len(runs) - found - clean} other")
    return "\n".join(lines)
