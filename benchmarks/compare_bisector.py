"""Subsystem bisection side by side with PyTorch's CompilerBisector, on the same planted bug.

For each model (default: the ~458-node benchmark model with the relu codegen bug), runs
  * bisect-accuracy with ``--stage subsystem`` (no repro): Inductor compiles per stage, seconds;
  * ``CompilerBisector.do_bisect`` with the oracle a user has to write by hand (compiled output
    allclose to eager), in a fresh process with its own cache folder: seconds, compiles
    (``_compile_fx_inner`` calls counted by a wrapper in the driver process).
Prints a Markdown table; timings are from one run on this machine (compare as ratios).

    python benchmarks/compare_bisector.py [--models deep458,mlp66]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = {"deep458": ROOT / "benchmarks/models/deep458.py", "mlp66": ROOT / "benchmarks/models/mlp66.py"}

BISECTOR_DRIVER = r'''
import importlib.util, json, sys, time, torch
import torch._inductor.compile_fx as compile_fx_module
from torch._inductor.compiler_bisector import CompilerBisector
spec = importlib.util.spec_from_file_location("bench_model", sys.argv[1])
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
model, inputs = module.get_model(), module.get_inputs()
compiles = 0
inner = compile_fx_module._compile_fx_inner  # what compile_fx_inner calls, looked up at call time
def counting(*args, **kwargs):
    global compiles
    compiles += 1
    return inner(*args, **kwargs)
compile_fx_module._compile_fx_inner = counting  # count only: this driver measures the upstream tool
def test_fn():
    torch._dynamo.reset()
    with torch.no_grad():
        return torch.allclose(torch.compile(model)(*inputs), model(*inputs), rtol=1e-3, atol=1e-3)
started = time.perf_counter()
result = CompilerBisector.do_bisect(test_fn)
print(json.dumps({"seconds": time.perf_counter() - started, "compiles": compiles,
                  "backend": getattr(result, "backend", None), "subsystem": getattr(result, "subsystem", None),
                  "bisect_number": getattr(result, "bisect_number", None),
                  "debug_info": str(getattr(result, "debug_info", ""))[:200]}))
'''


def run_ours(model: Path, work: Path) -> dict:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "bisect_engine.cli", "run", str(model), "--out", str(work / "ours"),
                    "--stage", "subsystem", "--quiet"], cwd=work, capture_output=True, text=True)
    report = json.loads((work / "ours" / "report.json").read_text())
    return {"seconds": round(time.perf_counter() - started, 1), "compiles": report["stats"]["compiles_by_stage"],
            "op": (report["culprit"] or {}).get("op"), "subsystem": report["subsystem"]}


def run_bisector(model: Path, work: Path) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(work / "cache"))
    started = time.perf_counter()
    completed = subprocess.run([sys.executable, "-c", BISECTOR_DRIVER, str(model)], cwd=work, env=env,
                               capture_output=True, text=True)
    wall = round(time.perf_counter() - started, 1)
    lines = [line for line in completed.stdout.splitlines() if line.startswith("{")]
    result = json.loads(lines[-1]) if lines else {"error": completed.stderr[-500:]}
    return {"wall_seconds": wall, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="deep458")
    args = parser.parse_args()
    rows = []
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as folder:
            work = Path(folder)
            ours, theirs = run_ours(MODELS[name], work), run_bisector(MODELS[name], work)
        rows.append((name, ours, theirs))
        print(json.dumps({"model": name, "ours": ours, "bisector": theirs}), file=sys.stderr)
    print("| model | tool | seconds | Inductor compiles | answer |")
    print("|---|---|---|---|---|")
    for name, ours, theirs in rows:
        subsystem = ours["subsystem"] or {}
        print(f"| {name} | bisect-accuracy --stage subsystem | {ours['seconds']} | {ours['compiles']} | "
              f"{ours['op']}; {subsystem.get('kind')} {subsystem.get('name')} |")
        print(f"| {name} | CompilerBisector (hand-written oracle) | {theirs.get('wall_seconds')} | "
              f"{theirs.get('compiles')} | {theirs.get('subsystem')} #{theirs.get('bisect_number')} "
              f"{theirs.get('debug_info', '')[:60]} |")


if __name__ == "__main__":
    main()
