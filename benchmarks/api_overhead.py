"""What the Python API adds around a run, measured in one process (issue 38).

1. ``caller_state_kept`` on a model of about 50 M fp32 parameters (with gradients): the seconds to
   save and put back (nothing changed, and every parameter changed) and the peak RSS it adds (its
   copies of the bits), after one warm-up that imports what it needs; 2. ``assert_compiled_matches`` on
   a clean corpus model: the gate alone (one compile, upstream's ``same`` with an fp64 reference)
   against the full ``check()`` on the same model, each in a fresh process with a fresh Inductor cache.
``python benchmarks/api_overhead.py [--skip-check]``; prints a Markdown table.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from bisect_engine.assertion import upstream_same
from bisect_engine.caller_state import caller_state_kept
from bisect_engine.live import check

ROOT = Path(__file__).resolve().parents[1]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def state_rows() -> list[tuple[str, float, float]]:
    model = nn.Sequential(*[nn.Linear(2048, 2048) for _ in range(12)])  # 50.4 M parameters
    model(torch.randn(4, 2048)).sum().backward()
    before = peak_rss_mb()
    with caller_state_kept(model):  # warm-up: Dynamo's and Inductor's config modules imported
        pass
    warm_up = peak_rss_mb() - before  # the copies of the bits (no later block raises the peak again)
    rows = []
    started = time.perf_counter()
    with caller_state_kept(model):
        pass
    rows.append(("caller_state_kept, nothing changed", time.perf_counter() - started, warm_up))
    started = time.perf_counter()
    with caller_state_kept(model):
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(1.0)
                if parameter.grad is not None:
                    parameter.grad.zero_()
    rows.append(("caller_state_kept, every parameter and grad changed", time.perf_counter() - started,
                 warm_up + peak_rss_mb() - before - warm_up))
    return rows


def clean_case():
    spec = importlib.util.spec_from_file_location("clean_bf16", ROOT / "repro_cases" / "clean_bf16.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["clean_bf16"] = module
    spec.loader.exec_module(module)
    return module


def assertion_row(which: str) -> tuple[str, float, float]:
    """One of the two, in this (fresh) process."""
    case = clean_case()
    model, inputs = case.get_model(), case.get_inputs()
    before = peak_rss_mb()
    started = time.perf_counter()
    if which == "gate":
        with caller_state_kept(model, inputs):
            agreed = upstream_same(model, inputs, {}, None)
        name = f"assert_compiled_matches gate on clean_bf16 (same: {agreed})"
    else:
        with tempfile.TemporaryDirectory() as out:
            result = check(model, *inputs, out=Path(out) / "run", verify_runs=1)
        name = f"check() on clean_bf16 (verdict: {result.verdict})"
    return name, time.perf_counter() - started, peak_rss_mb() - before


def in_fresh_process(which: str) -> tuple[str, float, float | None, float | None]:
    """The row, and the CPU seconds of the process and the processes it waited for (the repro's)."""
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as cache:
        run = subprocess.run([sys.executable, __file__, "--only", which], capture_output=True, text=True, check=True,
                             env={**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    name, seconds, _rss = run.stdout.strip().splitlines()[-1].split("\t")
    return name, float(seconds), after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime, None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--skip-check", action="store_true", help="leave out the full check() run")
    parser.add_argument("--only", choices=["gate", "check"], help=argparse.SUPPRESS)  # one row, in this process
    arguments = parser.parse_args()
    if arguments.only:
        print("\t".join(map(str, assertion_row(arguments.only))))
        return
    rows: list[tuple[str, float, float | None, float | None]] = [(name, seconds, None, rss)
                                                                 for name, seconds, rss in state_rows()]
    rows += [in_fresh_process("gate")] + ([] if arguments.skip_check else [in_fresh_process("check")])
    print(f"load average at the start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print("| what | wall s | CPU s (process + children) | peak RSS added (MB) |\n|---|---|---|---|")
    for name, seconds, cpu, rss in rows:
        print(f"| {name} | {seconds:.2f} | {'' if cpu is None else f'{cpu:.1f}'} | {'' if rss is None else f'{rss:.0f}'} |")


if __name__ == "__main__":
    main()
