#!/usr/bin/env python3
"""``--workers 1`` against ``--workers N`` (issue 27), side by side in one run.

For each model, the real CLI (``bisect-accuracy run MODEL --workers K --verify-runs 1``) in fresh
processes, the worker counts interleaved (1, N, 1, N, ... with ``--repeat``), each run with its own
empty Inductor cache and ``TMPDIR``, so no run profits from another's kernels. Printed: the verdict,
op and subsystem (the same for both, or said), the compiles, whether the two report.json are the
same apart from timings and ``stats.workers`` (the contract of ``--workers``), the process's wall
seconds, the engine's own seconds (``stats.seconds``), the candidates sent to the workers / whose verdict the
search took / judged in the tool's own process because no worker was free yet, and how long the
workers took to start (spawn, imports, the model file, a warm-up compile). The machine is shared and noisy: compare within one run.

    python benchmarks/workers.py [--models relu_bug.py,...] [--workers 2] [--repeat 1] [--eager]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODELS = ("repro_cases/relu_bug.py", "repro_cases/vectorized_codegen_bug.py",
                  "repro_cases/wrong_decomposition.py", "benchmarks/models/resmlp600.py", "repro_cases/clean_bf16.py")


def comparable(value: Any, out_dir: str) -> Any:
    """A report without timings, ``stats.workers`` and its own folder's path."""
    if isinstance(value, dict):
        return {k: comparable(v, out_dir) for k, v in value.items()
                if k not in ("seconds", "workers") and not k.endswith("_seconds")}
    if isinstance(value, list):
        return [comparable(v, out_dir) for v in value]
    return value.replace(out_dir, "OUT") if isinstance(value, str) else value


def run_once(model: Path, workers: int, timeout: float, eager: bool = False) -> dict[str, Any]:
    """One CLI run in a fresh process and fresh caches; what its report says."""
    sandbox = Path(tempfile.mkdtemp(prefix=f"workers-{model.stem}-{workers}-"))
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "TORCH_COMPILE"))}
        env.update(PYTHONPATH=str(ROOT), TORCHINDUCTOR_CACHE_DIR=str(sandbox / "cache"), TMPDIR=str(sandbox),
                   PYTHONDONTWRITEBYTECODE="1")
        if eager:  # every candidate queued to the workers while they start (the tests' setting)
            env["BISECT_TESTING_WORKERS_EAGER"] = "1"
        out = sandbox / "out"
        command = [sys.executable, "-m", "bisect_engine.cli", "run", str(model), "--out", str(out),
                   "--workers", str(workers), "--verify-runs", "1", "--quiet"]
        started = time.perf_counter()
        completed = subprocess.run(command, cwd=sandbox, env=env, capture_output=True, text=True, timeout=timeout)
        seconds = time.perf_counter() - started
        report_path = out / "report.json"
        if not report_path.exists():
            return {"error": (completed.stderr or completed.stdout).strip().splitlines()[-1:], "seconds": seconds}
        report = json.loads(report_path.read_text())
        culprit, subsystem = report.get("culprit") or {}, report.get("subsystem") or {}
        stats = report["stats"]
        return {"verdict": report["verdict"], "op": culprit.get("op"), "subsystem": subsystem.get("name"),
                "exit": completed.returncode, "seconds": round(seconds, 1), "engine_seconds": stats["seconds"],
                "compiles": stats["compiles"], "by_stage": stats["compiles_by_stage"],
                "workers": stats.get("workers"), "comparable": comparable(report, str(out))}
    finally:
        shutil.rmtree(sandbox, ignore_errors=True)


def row(name: str, one: dict[str, Any], several: dict[str, Any]) -> str:
    if "error" in one or "error" in several:
        return f"| {name} | error: {one.get('error') or several.get('error')} |||||||"
    answer = f"{one['verdict']} {one['op'] or ''} {one['subsystem'] or ''}".strip()
    same = one["comparable"] == several["comparable"]
    ahead = several["workers"] or {}
    stages = ", ".join(f"{k} {v}" for k, v in one["by_stage"].items())
    return (f"| {name} | {answer} | {one['compiles']} ({stages}) | {'yes' if same else 'NO'} | "
            f"{ahead.get('evaluated_ahead', 0)} / {ahead.get('adopted', 0)} / {ahead.get('judged_here', 0)} | "
            f"{ahead.get('start_seconds') or '-'} | {one['seconds']:.1f} | "
            f"{several['seconds']:.1f} | {several['seconds'] / one['seconds']:.2f} | "
            f"{one['engine_seconds']:.1f} | {several['engine_seconds']:.1f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated model files")
    parser.add_argument("--workers", type=int, default=2, help="the worker count compared with 1")
    parser.add_argument("--repeat", type=int, default=1, help="pairs of runs per model (each pair is a row)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--eager", action="store_true",
                        help="the N-worker runs queue every candidate to the workers, even while they start")
    args = parser.parse_args()
    models = [ROOT / m.strip() for m in args.models.split(",") if m.strip()]
    rows = []
    for model in models:
        for _ in range(args.repeat):
            pair = {}
            for workers in (1, args.workers):  # back to back: a load change hits both alike
                pair[workers] = run_once(model, workers, args.timeout, args.eager and workers > 1)
                shown = {k: v for k, v in pair[workers].items() if k != "comparable"}
                print(f"[{time.strftime('%H:%M:%S')}] {model.stem} workers {workers}: {shown}", file=sys.stderr, flush=True)
            rows.append(row(model.stem, pair[1], pair[args.workers]))
    n = args.workers
    print(f"| model | verdict, op, subsystem | compiles (by stage) | same report | w{n}: to workers / judged / "
          f"judged in the tool | w{n}: workers' start s | wall s, w1 | w{n} | w{n}/w1 | engine s, w1 | w{n} |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
