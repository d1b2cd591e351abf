#!/usr/bin/env python3
"""Clean models before/after "a clean graph in one compile" (issue 27), side by side in one run.

For each corpus model, two runs of the engine in fresh processes, interleaved (before, after,
before, after, ... with ``--repeat``), each with its own empty Inductor cache and ``TMPDIR`` (the
precompiled C++ headers), so neither order profits from the other's kernels:

  before   ``EngineOptions(divergence_known=True)``: every graph takes the per-node check first
           (the order of the last round, which script mode and scans keep);
  after    the default: a graph whose whole compile is no dearer than its per-node check is
           compiled whole first (``bisect_engine/localise/order.py``).

Both go through ``api.bisect_file`` (the CLI's call) with ``verify_runs=0``: seconds are the
process's wall time (start-up, capture, search, writing), compiles the report's
``stats.compiles_by_stage``. The machine is shared and noisy: compare the ratio within one run.

    python benchmarks/clean_models.py [--models repro_cases/clean_bf16.py,...] [--repeat 1]
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
DEFAULT_MODELS = ("repro_cases/clean_bf16.py", "repro_cases/clean_dropout.py", "repro_cases/models/hf_bert_eval.py",
                  "repro_cases/models/hf_gpt2_eval.py", "repro_cases/relu_bug.py")
ORDERS = {"before": True, "after": False}  # divergence_known

DRIVER = """
import sys
from pathlib import Path
from bisect_engine.api import bisect_file
from bisect_engine.localise.options import EngineOptions
from bisect_engine.output.writer import OutputOptions
bisect_file(sys.argv[1], EngineOptions(divergence_known=sys.argv[3] == "1"), OutputOptions(out_dir=Path(sys.argv[2]), verify_runs=0))
"""


def run_once(model: Path, order: str, timeout: float) -> dict[str, Any]:
    """One engine run in a fresh process and fresh caches; what its report says."""
    sandbox = Path(tempfile.mkdtemp(prefix=f"clean-{model.stem}-{order}-"))
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "TORCH_COMPILE"))}
        env.update(PYTHONPATH=str(ROOT), TORCHINDUCTOR_CACHE_DIR=str(sandbox / "cache"), TMPDIR=str(sandbox),
                   PYTHONDONTWRITEBYTECODE="1")
        out = sandbox / "out"
        started = time.perf_counter()
        completed = subprocess.run([sys.executable, "-c", DRIVER, str(model), str(out), "1" if ORDERS[order] else "0"],
                                   cwd=sandbox, env=env, capture_output=True, text=True, timeout=timeout)
        seconds = time.perf_counter() - started
        report_path = out / "report.json"
        if not report_path.exists():
            return {"error": (completed.stderr or completed.stdout).strip().splitlines()[-1:], "seconds": seconds}
        report = json.loads(report_path.read_text())
        culprit = report.get("culprit") or {}
        return {"verdict": report["verdict"], "op": culprit.get("op"), "seconds": round(seconds, 1),
                "graphs": report["stats"]["graphs_captured"], "by_stage": report["stats"]["compiles_by_stage"],
                "compiles": report["stats"]["compiles"], "whole_by": [g.get("whole_by") for g in report["graphs"]]}
    finally:
        shutil.rmtree(sandbox, ignore_errors=True)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def row(name: str, runs: dict[str, list[dict[str, Any]]]) -> str:
    before, after = runs["before"][0], runs["after"][0]
    if "error" in before or "error" in after:
        return f"| {name} | error: {before.get('error') or after.get('error')} |||||"
    seconds = {order: median([r["seconds"] for r in runs[order]]) for order in ORDERS}
    same = (before["verdict"], before["op"]) == (after["verdict"], after["op"])
    verdict = f"{after['verdict']} {after['op'] or ''}".strip() + ("" if same else f" (before: {before['verdict']} {before['op']})")

    def compiles(r: dict[str, Any]) -> str:
        return f"{r['by_stage'].get('localise', 0)} ({r['compiles']})"

    return (f"| {name} | {after['graphs']} | {verdict} | {compiles(before)} | {compiles(after)} | "
            f"{seconds['before']:.1f} | {seconds['after']:.1f} | {seconds['after'] / seconds['before']:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated model files")
    parser.add_argument("--repeat", type=int, default=1, help="runs per order (the table shows the median seconds)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--results", type=Path, default=None, help="write every run as JSON here")
    args = parser.parse_args()
    models = [ROOT / m.strip() for m in args.models.split(",") if m.strip()]
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for model in models:
        runs = results[model.stem] = {order: [] for order in ORDERS}
        for _ in range(args.repeat):
            for order in ORDERS:  # interleaved: a load change hits both orders alike
                runs[order].append(run_once(model, order, args.timeout))
                print(f"[{time.strftime('%H:%M:%S')}] {model.stem} {order}: {runs[order][-1]}", file=sys.stderr, flush=True)
    lines = ["| model | graphs | verdict, op (both orders) | localise compiles (all) before | after "
             "| seconds before | after | after/before |", "|---|---|---|---|---|---|---|---|"]
    lines += [row(name, runs) for name, runs in results.items()]
    print("\n".join(lines))
    if args.results is not None:
        args.results.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
