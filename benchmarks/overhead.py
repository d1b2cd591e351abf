#!/usr/bin/env python3
"""What script mode costs when nothing diverges: levels 1-2 against a plain compiled run.

The workload is a small training loop (an MLP, forward + backward + SGD step, the forward and
backward compiled by ``torch.compile`` with Inductor). Each configuration runs in a fresh
subprocess with its own, cold Inductor cache folder, ``--repeats`` times, interleaved; the table
gives the best of the repeats for each figure (the least disturbed run, as ``timeit`` does):

  plain            torch.compile alone
  level 1 record   every graph's code and first-call inputs written under OUT
  level 2 check    the first call of each graph run eagerly and in fp64 and judged (the default)
  level 2 every 10 / every 1   the same check on every 10th call / on every call

Columns: *first step* is the first training step (compile + the tool's work on the first call);
*tool's work* is the time the session spent on its own work during the loop (checks, recording);
*later steps* are the steps after the first tenth (median: a typical step; mean: with the periodic
checks of ``every N`` spread over all steps); *total* is the whole loop plus writing the report at
exit.

Usage:  .venv/bin/python benchmarks/overhead.py [--steps 200] [--repeats 3] [--width 256] [--depth 4]
            [--batch 64] [--threads 1]
Writes nothing outside a temporary folder.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIGS = {  # name: (level, check_every); level 0 is the plain run
    "plain": (0, 0),
    "level 1 record": (1, 0),
    "level 2 check": (2, 0),
    "level 2 every 10": (2, 10),
    "level 2 every 1": (2, 1),
}


def workload(steps: int, width: int, depth: int, batch: int, threads: int = 1) -> list[float]:
    """Seconds per training step of a compiled MLP."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    torch.manual_seed(0)
    torch.set_num_threads(threads)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.LayerNorm(width), nn.GELU()]
    model = nn.Sequential(*layers, nn.Linear(width, 10))
    compiled = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        inputs, targets = torch.randn(batch, width), torch.randn(batch, 10)
        loss = F.mse_loss(compiled(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - started)
    return times


def worker(config: str, args: argparse.Namespace, out_dir: Path) -> dict[str, float]:
    level, check_every = CONFIGS[config]
    if level == 0:
        times, finish, tool = workload(args.steps, args.width, args.depth, args.batch, args.threads), 0.0, 0.0
    else:
        from bisect_engine.verdict.inductor_adapter import compiles_routed_through
        from bisect_engine.script.levels import Level, ScriptSettings
        from bisect_engine.script.session import Session

        settings = ScriptSettings(level=Level(level), out_dir=out_dir, check_every=check_every)
        session = Session(settings, Path(__file__), [], "benchmark")
        with compiles_routed_through(session.wrap_backend):
            times = workload(args.steps, args.width, args.depth, args.batch, args.threads)
        started = time.perf_counter()
        report = session.finish(0)
        finish = time.perf_counter() - started
        assert report["verdict"] in ("clean", "unchecked"), report["verdict"]
        tool = session.tool_seconds - finish
    later = times[len(times) // 10 + 1:]  # past the first step and the warm-up
    return {"first_s": times[0], "median_ms": 1000 * statistics.median(later), "mean_ms": 1000 * statistics.mean(later),
            "total_s": sum(times) + finish, "finish_s": finish, "tool_s": tool}


def run_config(config: str, args: argparse.Namespace, scratch: Path, repeat: int) -> dict[str, float]:
    folder = scratch / f"{config.replace(' ', '_')}_{repeat}"
    folder.mkdir(parents=True)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor-cache"), "TMPDIR": str(folder),
           "PYTHONDONTWRITEBYTECODE": "1"}
    env = {k: v for k, v in env.items() if not k.startswith("BISECT_ACCURACY_")}
    command = [sys.executable, __file__, "--worker", config, "--steps", str(args.steps), "--width", str(args.width),
               "--depth", str(args.depth), "--batch", str(args.batch), "--threads", str(args.threads),
               "--out", str(folder / "out")]
    completed = subprocess.run(command, env=env, cwd=folder, capture_output=True, text=True, check=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def table(results: dict[str, list[dict[str, float]]]) -> str:
    """Best (least disturbed) of the fresh processes for each figure, as ``timeit`` reports."""
    plain = {key: min(r[key] for r in results["plain"]) for key in ("median_ms", "mean_ms")}
    lines = ["| configuration | first step (s) | tool's work in the loop (s) | later steps, median (ms) "
             "| later steps, mean (ms) | overhead (median / mean) | total (s) | report at exit (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for config, runs in results.items():
        best = {key: min(r[key] for r in runs) for key in runs[0]}
        overhead = " / ".join(f"{100 * (best[key] / plain[key] - 1):+.0f}%" for key in ("median_ms", "mean_ms"))
        lines.append(f"| {config} | {best['first_s']:.1f} | {best['tool_s']:.2f} | {best['median_ms']:.2f} "
                     f"| {best['mean_ms']:.2f} "
                     f"| {overhead} | {best['total_s']:.1f} | {best['finish_s']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads per run (1: least sensitive to other load on the machine)")
    parser.add_argument("--worker", choices=list(CONFIGS), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args, args.out)))
        return
    results: dict[str, list[dict[str, float]]] = {config: [] for config in CONFIGS}
    with tempfile.TemporaryDirectory(prefix="bisect-overhead-") as scratch:
        for repeat in range(args.repeats):  # interleaved, so drifts in machine load hit every config
            for config in CONFIGS:
                results[config].append(run_config(config, args, Path(scratch), repeat))
                print(f"  {config} #{repeat + 1}: {results[config][-1]}", file=sys.stderr)
    print(f"{args.steps} steps of an MLP (width {args.width}, depth {args.depth}, batch {args.batch}, "
          f"{args.threads} thread(s)), "
          f"best of {args.repeats} fresh processes, torch {_torch_version()}")
    print(table(results))


def _torch_version() -> str:
    import torch

    return torch.__version__


if __name__ == "__main__":
    main()
