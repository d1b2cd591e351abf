"""OpenMP's waiting threads spinning (GNU OpenMP's default) against sleeping (``OMP_WAIT_POLICY=PASSIVE``):
side by side, for a process alone and for several of ours at once.

Why the repro's verifying interpreters sleep while they wait and the run's own process does not
(``bisect_engine/environ.py``): each row runs the same work in fresh processes under each policy,
alternating, and prints wall seconds, CPU-seconds (the processes' user + system time) and the largest
peak RSS of one process.

    python benchmarks/omp_waits.py [--model repro_cases/noise_cancel_layernorm.py] [--at-once 3] [--repeat 2]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POLICIES = {"spinning (default)": None, "sleeping (PASSIVE)": "PASSIVE"}
# An eager training step alone: GPT-2 small from its config where transformers is installed.
STEP = """
import time, torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config())
tokens = torch.randint(0, 50257, (1, 128))
def step():
    model(tokens, labels=tokens).loss.backward()
step()
times = []
for _ in range(6):
    started = time.perf_counter()
    step()
    times.append(time.perf_counter() - started)
print(f"{min(times):.3f} {sorted(times)[3]:.3f}")  # the fastest and the median step
"""


def _environ(policy: str | None) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    return environ if policy is None else {**environ, "OMP_WAIT_POLICY": policy}


def _at_once(commands: list[list[str]], policy: str | None, cwd: Path) -> tuple[float, float, int]:
    """Wall seconds, CPU-seconds and the largest child's peak RSS (MB) of ``commands`` run at once."""
    started = time.perf_counter()
    processes = [subprocess.Popen(c, cwd=cwd, env=_environ(policy), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for c in commands]
    cpu, peak = 0.0, 0
    for process in processes:
        _, _, usage = os.wait4(process.pid, 0)  # each run's own usage, its children's included
        process.returncode = 0
        cpu += usage.ru_utime + usage.ru_stime
        peak = max(peak, usage.ru_maxrss // 1024)
    return time.perf_counter() - started, cpu, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "repro_cases" / "noise_cancel_layernorm.py"))
    parser.add_argument("--at-once", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    rows: list[tuple[str, str, float, float, int]] = []
    with tempfile.TemporaryDirectory(prefix="omp-waits-") as folder:
        base = Path(folder)
        for repeat in range(args.repeat):
            for name, policy in POLICIES.items():
                runs = [[sys.executable, "-m", "bisect_engine.cli", "run", args.model, "--out",
                         str(base / f"out{repeat}{policy}{k}"), "--verify-runs", "1", "-q"] for k in range(args.at_once)]
                wall, cpu, peak = _at_once(runs, policy, ROOT)
                rows.append((f"{args.at_once} tool runs at once ({Path(args.model).name})", name, wall, cpu, peak))
                try:
                    step = subprocess.run([sys.executable, "-c", STEP], env=_environ(policy), capture_output=True,
                                          text=True, check=True)
                    fastest, median = (float(v) for v in step.stdout.split()[-2:])
                    rows.append(("GPT-2 small eager training step, alone (fastest / median of 6, s)", name,
                                 fastest, median, 0))
                except (subprocess.CalledProcessError, ValueError, IndexError):
                    pass  # no transformers here: the tool rows stand alone
    print("| work | OpenMP waits | wall s (a step: fastest) | CPU-s (a step: median s) | peak RSS MB (largest run) |")
    print("|---|---|---|---|---|")
    for work, name, wall, cpu, peak in rows:
        print(f"| {work} | {name} | {wall:.2f} | {cpu:.2f} | {peak or '-'} |")


if __name__ == "__main__":
    main()
