#!/usr/bin/env python3
"""Clean models before/after "a clean graph in one compile" (issue 27), side by side in one run.

For each corpus model, two runs of the engine in fresh processes, interleaved (before, after,
before, after, ... with ``--repeat``), each with its own empty Inductor cache and ``TMPDIR`` (the
precompiled C++ headers), so neither order profits from the other's kernels (``--warm-toolchain``:
each run's cache and ``TMPDIR`` start with Inductor's CPU-capability probes and precompiled header,
built once, as ``compare_minifier.py --warm-toolchain`` seeds its flows: no kernel of a graph is
shared either way):

  before   ``EngineOptions(divergence_known=True)``: every graph takes the per-node check first
           (the order of the last round, which script mode and scans keep);
  after    the default: a graph whose whole compile is no dearer than its per-node check is
           compiled whole first (``bisect_engine/localise/order.py``).

Both go through ``api.bisect_file`` (the CLI's call) with ``verify_runs=0``: seconds are the
process's wall time (start-up, capture, search, writing), compiles the report's
``stats.compiles_by_stage``. The machine is shared and noisy: compare the ratio within one run.

    python benchmarks/clean_models.py [--models repro_cases/clean_bf16.py,...] [--repeat 1]
    python benchmarks/clean_models.py --corpus-clean --orders after   # every clean model file

``--corpus-clean`` takes every model file of ``repro_cases/`` whose ``EXPECTED`` verdict is
``clean`` (plain scripts are left out: script mode checks the user's own compiled calls, never a
whole graph of ours first). The ``per graph`` column is the localise stage's compiles divided by
the graphs captured: 1.0 is one compile per graph.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]  # compare_minifier's toolchain; bisect_engine (torch-free parts)
import compare_minifier  # noqa: E402
DEFAULT_MODELS = ("repro_cases/clean_bf16.py", "repro_cases/clean_dropout.py", "repro_cases/models/hf_bert_eval.py",
                  "repro_cases/models/hf_gpt2_eval.py", "repro_cases/relu_bug.py")
ORDERS = {"before": True, "after": False}  # divergence_known


def corpus_clean() -> list[str]:
    """Every model file of the corpus expected clean (its ``EXPECTED`` read as a literal, not run,
    as ``tests/test_e2e.py`` reads it)."""
    import ast

    from bisect_engine.load.contract import defines_model_contract

    found = []
    for path in sorted([*ROOT.glob("repro_cases/*.py"), *ROOT.glob("repro_cases/models/*.py")]):
        for node in ast.parse(path.read_text()).body:
            if (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "EXPECTED" for t in node.targets)
                    and ast.literal_eval(node.value).get("verdict") == "clean" and defines_model_contract(path)):
                found.append(str(path.relative_to(ROOT)))
    return found


DRIVER = """
import sys
from pathlib import Path
from bisect_engine.api import bisect_file
from bisect_engine.localise.options import EngineOptions
from bisect_engine.output.writer import OutputOptions
bisect_file(sys.argv[1], EngineOptions(divergence_known=sys.argv[3] == "1"), OutputOptions(out_dir=Path(sys.argv[2]), verify_runs=0))
"""


def run_once(model: Path, order: str, timeout: float, code: Path = ROOT) -> dict[str, Any]:
    """One engine run in a fresh process and fresh caches; what its report says. ``code``: where the
    engine's code is imported from (a checkout of another commit: its "before")."""
    sandbox = Path(tempfile.mkdtemp(prefix=f"clean-{model.stem}-{order}-"))
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHINDUCTOR_", "TORCH_COMPILE"))}
        env.update(PYTHONPATH=str(code), TORCHINDUCTOR_CACHE_DIR=str(sandbox / "cache"), TMPDIR=str(sandbox / "tmp"),
                   PYTHONDONTWRITEBYTECODE="1")
        (sandbox / "tmp").mkdir()
        if compare_minifier.TOOLCHAIN is not None:  # --warm-toolchain: the probes and the precompiled header
            compare_minifier.seed_toolchain(sandbox)
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
                "compiles": report["stats"]["compiles"], "whole_by": [g.get("whole_by") for g in report["graphs"]],
                # why a graph took more than its whole compile: the step that decided it, the
                # outputs that differ materially, ops wrong alone below tolerance
                "ended_by": [g.get("ended_by") for g in report["graphs"]],
                "material": [g.get("material_outputs") for g in report["graphs"]],
                "below_tolerance": [f.get("op") for f in report.get("findings") or []],
                # the values listed as compiled clearly closer to fp64 than eager (their ops)
                "differences": [d.get("op") for d in report.get("differences") or []]}
    finally:
        shutil.rmtree(sandbox, ignore_errors=True)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def row(name: str, runs: dict[str, list[dict[str, Any]]]) -> str:
    errors = [r["error"] for order_runs in runs.values() for r in order_runs if "error" in r]
    if errors:
        return f"| {name} | error: {errors[0]} |" + "|" * (2 + 3 * len(runs))
    first = {order: order_runs[0] for order, order_runs in runs.items()}
    last = list(first.values())[-1]
    seconds = {order: median([r["seconds"] for r in order_runs]) for order, order_runs in runs.items()}
    verdicts = {(r["verdict"], r["op"]) for r in first.values()}
    verdict = f"{last['verdict']} {last['op'] or ''}".strip() + (
        "" if len(verdicts) == 1 else " (" + ", ".join(f"{o}: {r['verdict']} {r['op']}" for o, r in first.items()) + ")")

    def compiles(r: dict[str, Any]) -> str:
        localise = r["by_stage"].get("localise", 0)
        return f"{localise} ({r['compiles']}) | {localise / max(r['graphs'], 1):.1f}"

    cells = [compiles(first[order]) for order in runs] + [f"{seconds[order]:.1f}" for order in runs]
    ratio = [f"{seconds['after'] / seconds['before']:.2f}"] if set(runs) == set(ORDERS) else []
    return f"| {name} | {last['graphs']} | {verdict} | " + " | ".join(cells + ratio) + " |"


def header(orders: list[str]) -> list[str]:
    cells = [f"localise compiles (all) {order} | per graph {order}" for order in orders]
    cells += [f"seconds {order}" for order in orders] + (["after/before"] if set(orders) == set(ORDERS) else [])
    line = "| model | graphs | verdict, op | " + " | ".join(cells) + " |"
    return [line, "|" + "---|" * line.count(" | ") + "---|"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated model files")
    parser.add_argument("--corpus-clean", action="store_true", help="every clean model file of repro_cases/ (overrides --models)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="models run at once (more than 1: seconds under each other's load; compiles are unchanged)")
    parser.add_argument("--warm-toolchain", action="store_true",
                        help="every run starts with Inductor's C++ toolchain state built once (probes, precompiled header)")
    parser.add_argument("--orders", default="before,after", help="which orders to run: before, after or both")
    parser.add_argument("--repeat", type=int, default=1, help="runs per order (the table shows the median seconds)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--results", type=Path, default=None, help="write every run as JSON here")
    parser.add_argument("--pythonpath", type=Path, default=ROOT,
                        help="run the engine's code from this checkout (another commit's: a before/after of code, "
                             "not of orders); the models are this one's")
    args = parser.parse_args()
    if args.warm_toolchain:
        compare_minifier.TOOLCHAIN = compare_minifier.build_toolchain()
    names = corpus_clean() if args.corpus_clean else args.models.split(",")
    models = [ROOT / m.strip() for m in names if m.strip()]
    orders = [order for order in ORDERS if order in args.orders.split(",")]
    if not orders:
        parser.error(f"--orders takes {', '.join(ORDERS)}")
    results: dict[str, dict[str, list[dict[str, Any]]]] = {model.stem: {order: [] for order in orders} for model in models}
    lock = threading.Lock()

    def measure(model: Path) -> None:
        runs = results[model.stem]
        for _ in range(args.repeat):
            for order in orders:  # interleaved: a load change hits both orders alike
                measured = run_once(model, order, args.timeout, args.pythonpath)
                with lock:
                    runs[order].append(measured)
                    print(f"[{time.strftime('%H:%M:%S')}] {model.stem} {order}: {measured}", file=sys.stderr, flush=True)
                    if args.results is not None:  # kept as it goes: a long run cut short keeps what it measured
                        args.results.write_text(json.dumps(results, indent=2) + "\n")

    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            list(pool.map(measure, models))
    finally:
        compare_minifier.drop_toolchain(keep=False)
    lines = header(orders) + [row(name, runs) for name, runs in results.items()]
    print("\n".join(lines))
    if args.results is not None:
        args.results.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
