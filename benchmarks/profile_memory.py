#!/usr/bin/env python3
"""Where a run's memory goes: RSS per stage and the live tensors by owner near the peak, in-process.

Runs ``bisect_engine.api.bisect_file`` on a reduced GPT-2 (``GPT2Config(n_layer=N)``, the full
width and vocabulary: the embedding and LM head are its big tensors) or any model file, while a
sampler thread reads the process's RSS every 20 ms. Stages are the run's own progress steps plus a
few functions wrapped here (this script only; the tool is not patched): the eager re-run of a
graph, each compile, the fp64 streamed references, the noise model's runs, departures, the
model-level check. To profile another copy of the package (a "before"), set ``PYTHONPATH`` to it:
the installed start-up hook imports the package before this script's own path entry is read.

Near the peak (each time the RSS passes the last census by ``--census-step`` MB) the sampler takes
a census of live tensors (``gc``): unique storages, their MB, grouped by owner, the chain of
containers that holds them (a frame names the running function). The report: the stages with
their RSS in / peak / out, then the census closest to the peak.

A census runs in the sampler thread while the run goes on: it holds every object ``gc`` tracks for
its seconds, freed tensors included (the RSS of a stage with a census reads high), and a tuple the
run is still building can then fail with ``SystemError: ... tupleobject.c ... bad argument to
internal function`` (seen in ``compare._used`` during departures). A run's peaks are read from a run
without censuses (``--census-from`` above its peak), its owners from one with them.

Usage:  .venv/bin/python benchmarks/profile_memory.py [--layers 1] [--model FILE] [--out DIR] [--offload always]
"""
from __future__ import annotations

import atexit
import argparse
import collections
import contextlib
import gc
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

MB = 2**20
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


class Profile:
    """Stages (a stack of names) with RSS in/peak/out, and censuses of live tensors."""

    def __init__(self, census_step_mb: int, census_from_mb: int = 0) -> None:
        self.stack: list[str] = []
        self.rows: list[tuple[str, int, int, int, float, float]] = []  # name, RSS in/peak/out MB, s, CPU-s
        self.peaks: list[int] = []
        self.peak, self.peak_stage = 0, ""
        self.census_step = census_step_mb * MB
        self.last_census = census_from_mb * MB - self.census_step
        self.censuses: list[tuple[int, str, list[tuple[str, float, int]], float]] = []
        self.totals: dict[str, list[float]] = {}  # stage name -> [calls, seconds, peak MB, CPU-s], every call
        self.quiet: set[str] = set()  # stages called per output or per node: totals only, no row each
        self.stop = False

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self.stack.append(name)
        self.peaks.append(rss())
        start, started, cpu = rss(), time.perf_counter(), time.process_time()
        index = len(self.rows)
        if name not in self.quiet:
            self.rows.append((name, 0, 0, 0, 0.0, 0.0))
        try:
            yield
        finally:
            peak = max(self.peaks.pop(), rss())
            if self.peaks:
                self.peaks[-1] = max(self.peaks[-1], peak)
            seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu
            total = self.totals.setdefault(name, [0, 0.0, 0, 0.0])
            total[0], total[1], total[2] = total[0] + 1, total[1] + seconds, max(total[2], peak // MB)
            total[3] += cpu_seconds
            if name not in self.quiet:
                self.rows[index] = ("  " * (len(self.stack) - 1) + name, start // MB, peak // MB, rss() // MB,
                                    seconds, cpu_seconds)
                print("stage", *self.rows[index], file=sys.stderr, flush=True)
            self.stack.pop()

    def sample(self) -> None:
        while not self.stop:
            now = rss()
            if self.peaks:
                self.peaks[-1] = max(self.peaks[-1], now)
            if now > self.peak:
                self.peak, self.peak_stage = now, " > ".join(self.stack)
            if now > self.last_census + self.census_step:
                self.last_census = now
                started = time.perf_counter()
                try:
                    owners = census()
                except Exception as error:  # noqa: BLE001 - a census that fails is said, the run goes on
                    owners = [(f"census failed: {type(error).__name__}: {error}", 0.0, 0)]
                self.censuses.append((now, " > ".join(self.stack), owners, time.perf_counter() - started))
                print_census(*self.censuses[-1], file=sys.stderr)
            time.sleep(0.02)


CONTAINERS = (dict, list, tuple, set, frozenset)


def census() -> list[tuple[str, float, int]]:
    """Live tensors' unique storages grouped by owner: (owner chain, MB, storages)."""
    import torch
    objects = gc.get_objects()
    storages: dict[int, tuple[int, Any]] = {}
    for obj in objects:
        if issubclass(type(obj), torch.Tensor) and type(obj).__name__ != "FakeTensor":
            try:
                storage = obj.untyped_storage()
                key = storage.data_ptr()
                if key and key not in storages:
                    storages[key] = (storage.nbytes(), obj)
            except Exception:  # noqa: BLE001 - meta, sparse, fake tensors
                continue
    frames = {id(f): f for f in sys._current_frames().values()}
    parent: dict[int, Any] = {}
    wanted = {id(t) for _n, t in storages.values()}
    for _level in range(6):  # containers up to 6 levels, one pass over every object each
        found: set[int] = set()
        for obj in objects:
            if id(obj) in wanted or id(obj) == id(storages):
                continue
            for child in gc.get_referents(obj):
                if id(child) in wanted and id(child) not in parent:
                    parent[id(child)] = obj
                    if type(obj) in CONTAINERS or type(obj).__name__ in ("cell", "function", "method"):
                        found.add(id(obj))
        wanted = found
        if not wanted:
            break
    groups: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for nbytes, tensor in storages.values():
        chain, obj = [], tensor
        for _ in range(7):
            holder = parent.get(id(obj))
            if holder is None:
                break
            chain.append(describe(holder, obj))
            if type(holder) not in CONTAINERS and type(holder).__name__ not in ("cell", "function", "method"):
                break
            obj = holder
        label = f"{tensor.dtype} " + (" < ".join(chain) if chain else "(no Python holder found)")
        groups[label][0] += nbytes
        groups[label][1] += 1
    del objects, frames
    return sorted(((k, v[0] / MB, v[1]) for k, v in groups.items()), key=lambda r: -r[1])


def describe(holder: Any, child: Any) -> str:
    if isinstance(holder, dict):
        for key, value in holder.items():
            if value is child:
                return f"dict[{str(key)[:30]}]"
        return "dict"
    if type(holder).__name__ == "frame":
        return f"frame {holder.f_code.co_name}"
    return type(holder).__name__


def wrap(profile: Profile, owner: Any, name: str, label: str, quiet: bool = False) -> None:
    if quiet:
        profile.quiet.add(label)
    original = getattr(owner, name)
    is_static = isinstance(owner.__dict__.get(name), (staticmethod, classmethod))
    if is_static:
        return

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with profile.stage(label):
            return original(*args, **kwargs)

    setattr(owner, name, wrapped)


GPT2 = '''\
"""Reduced GPT-2 for profile_memory.py."""
import torch
import torch.nn.functional as F
from transformers import GPT2Config, GPT2LMHeadModel

PLANTED = None
EXPECTED = {{"verdict": "clean"}}
_IDS = torch.randint(0, 1000, (1, 128), generator=torch.Generator().manual_seed(1))


def get_model():
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(n_layer={layers}, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)).train()


def get_inputs():
    return (_IDS.clone(),)


def loss_fn(output):
    logits = output.logits[:, :-1].reshape(-1, output.logits.shape[-1])
    return F.cross_entropy(logits, _IDS[:, 1:].reshape(-1).to(logits.device))
'''


def instrument(profile: Profile) -> None:
    from bisect_engine.localise import model_check
    from bisect_engine.strategies import departures
    from bisect_engine.verdict import compiler, oracle
    from bisect_engine.load import capture as capture_module
    from bisect_engine.localise import pipeline
    wrap(profile, compiler.Compiler, "compile", "compile")
    wrap(profile, oracle.GraphContext, "_streamed", "fp64 streamed + judged")
    wrap(profile, oracle.GraphContext, "judge_nodes", "judge_nodes (per-node)")
    wrap(profile, oracle.GraphContext, "replay", "eager replay")
    wrap(profile, oracle, "noise_floors", "noise model (fp64 clean + noisy runs)")
    from bisect_engine.localise import graph_steps, run_steps
    wrap(profile, departures, "find_departures", "departures")
    # the names graph_steps / run_steps imported (a module attribute wrapped there is not what they call)
    wrap(profile, graph_steps, "find_departures", "departures")
    wrap(profile, graph_steps, "follows_eager_with", "eager rounding (emulate_precision_casts)")
    wrap(profile, graph_steps, "material_outputs", "material outputs")
    wrap(profile, run_steps, "backward_consequence", "departures carried into the backward")
    wrap(profile, run_steps, "saved_value_consequence", "saved values into the backward")
    from bisect_engine.localise import judge as judge_module
    wrap(profile, judge_module, "check_model_level", "model-level check")
    wrap(profile, model_check, "_noise_floors", "model-level noise model (its fp64 noisy run)")
    wrap(profile, model_check, "_fp64_copy", "model-level: fp64 model copied")
    wrap(profile, model_check, "_forward_and_grads", "model-level: a run of the model (eager, fp64, compiled, noisy)")
    from bisect_engine import api as api_module
    wrap(profile, api_module, "write_outputs", "report, views and repro written")
    wrap(profile, model_check, "check_model_level", "model-level check")
    wrap(profile, pipeline, "capture", "capture (pipeline)")
    # per call totals only (called per output / per subgraph): where the judging time goes
    wrap(profile, oracle, "stream_graph", "fp64 run, streamed (each)", quiet=True)
    wrap(profile, oracle, "run_graph", "eager/fp64 run, held (each)", quiet=True)
    wrap(profile, oracle, "judge_outputs", "comparison: judge_outputs (each)", quiet=True)
    wrap(profile, oracle, "output_facts", "output facts (each)", quiet=True)
    wrap(profile, oracle, "run_compiled", "compiled run (each)", quiet=True)
    original = oracle.GraphContext.from_captured.__func__

    def from_captured(cls: Any, *args: Any, **kwargs: Any) -> Any:
        with profile.stage("eager re-run (GraphContext)"):
            return original(cls, *args, **kwargs)

    oracle.GraphContext.from_captured = classmethod(from_captured)
    del capture_module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None,
                        help="the run's output folder (default: inside the scratch folder, removed at exit)")
    parser.add_argument("--census-step", type=int, default=150, help="MB of RSS growth between censuses")
    parser.add_argument("--census-from", type=int, default=1500, help="MB of RSS of the first census")
    parser.add_argument("--verify-runs", type=int, default=0)
    parser.add_argument("--order", choices=("auto", "whole", "per-node"), default="auto",
                        help="which check a graph gets first: localise/order.py's rule, or forced")
    parser.add_argument("--offload", choices=("auto", "always"), default="auto",
                        help="when values wait on disk: as memory asks (the tool's rule), or at every point "
                             "that may move them (this script only: MemoryGuard.room reads 0, as code "
                             "before the rule did)")
    parser.add_argument("--keep-freed", action="store_true",
                        help="leave glibc's mmap threshold alone (the CLI fixes it without --memory-budget: "
                             "load/memory.return_freed_memory; this profile does the same unless told)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="profile-memory-"))  # the model, the Inductor cache: removed at exit
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(work / "inductor"))
    model = args.model
    if model is None:
        model = work / f"gpt2_l{args.layers}.py"
        model.write_text(GPT2.format(layers=args.layers))
    from bisect_engine import api
    from bisect_engine.localise.options import EngineOptions
    from bisect_engine.output.writer import OutputOptions
    from bisect_engine.progress import Progress

    profile = Profile(args.census_step, args.census_from)
    instrument(profile)
    if not args.keep_freed:
        from bisect_engine.load import memory
        if hasattr(memory, "return_freed_memory"):  # as the CLI's run does (an older package: as it did)
            memory.return_freed_memory()
    if args.offload == "always":
        from bisect_engine.load import memory
        if hasattr(memory.MemoryGuard, "room"):  # an older package moves at every point anyway
            memory.MemoryGuard.room = lambda self: 0  # type: ignore[method-assign]
    if args.order != "auto":  # this script only: the rule's threshold set so it always answers one way
        from bisect_engine.localise import order
        order.NODES_PER_COPY = float("inf") if args.order == "whole" else 0.0

    class Staged(Progress):
        @contextlib.contextmanager
        def step(self, description: str) -> Iterator[None]:
            with profile.stage(description):
                yield

    sampler = threading.Thread(target=profile.sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    with profile.stage("run"):
        report = api.bisect_file(model, EngineOptions(), OutputOptions(out_dir=args.out or work / "out",
                                                                       verify_runs=args.verify_runs),
                                 progress=Staged(enabled=False))
    profile.stop = True
    print(f"verdict {report.get('verdict')}  wall {time.perf_counter() - started:.0f} s  "
          f"CPU {time.process_time():.0f} s (every thread)  load {os.getloadavg()[0]:.1f}  "
          f"peak {profile.peak // MB} MB in: {profile.peak_stage}")
    print("\n| stage | RSS in MB | peak MB | out MB | s | CPU-s |\n|---|---|---|---|---|---|")
    for name, start, peak, end, seconds, cpu_seconds in profile.rows:
        print(f"| {name} | {start} | {peak} | {end} | {seconds:.1f} | {cpu_seconds:.1f} |")
    print("\n| stage (every call, inclusive) | calls | s | peak MB | CPU-s |\n|---|---|---|---|---|")
    for name, (calls, seconds, peak, cpu_seconds) in sorted(profile.totals.items(), key=lambda item: -item[1][1]):
        print(f"| {name} | {calls:.0f} | {seconds:.1f} | {peak:.0f} | {cpu_seconds:.1f} |")
    for census_taken in profile.censuses[-3:]:
        print_census(*census_taken)
    return 0


def print_census(now: int, stage: str, owners: list[tuple[str, float, int]], seconds: float,
                 file: Any = sys.stdout) -> None:
    total = sum(mb for _l, mb, _n in owners)
    print(f"\ncensus at RSS {now // MB} MB in {stage} ({seconds:.1f} s): tensors {total:.0f} MB", file=file)
    for label, mb, count in owners[:25]:
        print(f"  {mb:8.1f} MB {count:4d}  {label}", file=file)
    file.flush()


if __name__ == "__main__":
    sys.exit(main())
