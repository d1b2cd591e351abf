#!/usr/bin/env python3
"""Side-by-side benchmark: ``bisect-accuracy`` vs PyTorch's built-in after-AOT accuracy minifier.

For each benchmark model (``benchmarks/models/*.py``, each with Inductor's relu bug planted at
import) this runs, in fresh subprocesses:

  ours               ``bisect-accuracy run MODEL.py --out DIR --verify-runs N --quiet`` (the CLI);
                     the timed run includes the tool's own fresh-process verification of repro.py.
  builtin-isolate    the documented built-in flow in its default mode:
                       1. a driver script runs the model through ``torch.compile(backend="inductor")``
                          with ``TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL=4``; it raises
                          ``AccuracyError`` and writes ``minifier_launcher.py`` under the debug dir;
                       2. ``python minifier_launcher.py minify`` (``--isolate``, the default: every
                          minifier query compiles in its own subprocess);
                       3. ``python repro.py`` in a fresh process (the minified repro; it raises
                          ``AccuracyError`` - exit status != 0 - when it reproduces).
  builtin-inprocess  the same, with ``python minifier_launcher.py minify --no-isolate``.

Each built-in mode is an independent flow (its own driver run, temp folder and cold Inductor cache),
so the two modes do not share compiled artifacts and each end-to-end time stands on its own.

What is measured
  end-to-end s   wall seconds of every step a user needs to get a *verified* repro: ours = the one
                 CLI run (search + repro emission + verification); built-in = driver + minify +
                 fresh-process run of repro.py.
  compiles       Inductor compile requests over the whole end-to-end flow, counted the same way for
                 both tools: every subprocess gets a ``sitecustomize.py`` (via ``PYTHONPATH``) that
                 wraps ``torch._inductor.compile_fx._compile_fx_inner`` - the single function every
                 Inductor graph compile goes through (``compile_fx_inner`` looks it up at call time) -
                 and appends one line per call to a log file.  This counts the isolate-mode
                 minifier's per-query subprocesses and cache hits alike.  As a cross-check the
                 table's JSON also keeps each tool's self-reported number: ours = report.json
                 ``stats.compiles`` (search only, without repro verification); built-in = 1 (driver)
                 + the minifier's ``Made N queries`` line (one ``compile_fx_inner`` per query).
  nodes in repro the aten call nodes (FX ``call_function``; placeholders/output not counted) in the
                 repro's ``Repro.forward``; the same FX codegen is used by both tools, so the count is
                 the number of ``name = ...`` statements in that method.
  reproduces     an extra, untimed run of the final repro.py in a fresh process (fresh cwd and
                 Inductor cache): ours reproduces on exit status 1; the built-in repro when it exits
                 non-zero with ``AccuracyError`` in its output.

Hygiene: every subprocess runs with cwd in a ``tempfile`` folder, ``TORCHINDUCTOR_CACHE_DIR``,
``TORCH_COMPILE_DEBUG_DIR``, ``TMPDIR`` and ``XDG_CACHE_HOME`` inside it and
``PYTHONDONTWRITEBYTECODE=1``, so nothing is written outside it (``--warm-toolchain``: each sandbox
starts with a copy of Inductor's per-machine C++ state, its CPU-capability checks and precompiled
header, built once in a folder of its own, as on a machine where torch.compile already ran); only ``results.json`` is written
next to this script.  Each step has a timeout (``--timeout``, per step) and each built-in flow a
total budget (``--flow-timeout``); a step that runs past it is killed (its whole process group) and
recorded as a timeout.

Usage:  .venv/bin/python benchmarks/compare_minifier.py [--only ours,builtin-inprocess,builtin-isolate,ours-baseline]
            [--models mlp66,deep458,resmlp600] [--timeout 1800] [--flow-timeout 2400] [--verify-runs 1]
            [--baseline-root OLDER_CHECKOUT]

``ours`` runs this checkout's CLI (``python -m bisect_engine.cli`` with this repository on
``PYTHONPATH``); ``ours-baseline`` the same from ``--baseline-root`` (before/after in one run).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODELS_DIR = HERE / "models"
TOOLS = ("ours", "builtin-inprocess", "builtin-isolate", "ours-baseline")
TOOL_LABEL = {
    "ours": "bisect-accuracy",
    "ours-baseline": "bisect-accuracy (baseline checkout)",
    "builtin-inprocess": "built-in minifier --no-isolate",
    "builtin-isolate": "built-in minifier (default, --isolate)",
}

# ---------------------------------------------------------------------------------------------
# Files written into each temp folder
# ---------------------------------------------------------------------------------------------

COUNT_HOOK = '''\
# Written by benchmarks/compare_minifier.py: count Inductor graph compiles in this process.
import functools, importlib.abc, os, sys, time

_TARGET = "torch._inductor.compile_fx"
_LOG = os.environ.get("BENCH_COMPILE_LOG")


class _CountCompiles(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _TARGET or not _LOG:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        original_exec = spec.loader.exec_module

        def exec_module(module):
            original_exec(module)
            inner = module._compile_fx_inner

            @functools.wraps(inner)
            def counted(*args, **kwargs):
                with open(_LOG, "a") as log:
                    log.write(f"{os.getpid()} {time.time():.3f}\\n")
                return inner(*args, **kwargs)

            module._compile_fx_inner = counted

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _CountCompiles())
'''

BUILTIN_DRIVER = '''\
# Written by benchmarks/compare_minifier.py: the user's side of the built-in accuracy-minifier flow.
# Run with TORCHDYNAMO_REPRO_AFTER=aot TORCHDYNAMO_REPRO_LEVEL=4: torch.compile checks the compiled
# AOT graph against eager, raises AccuracyError and writes minifier_launcher.py under the debug dir.
import importlib.util, sys
import torch
from torch._dynamo.debug_utils import AccuracyError

spec = importlib.util.spec_from_file_location("bench_model", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
model, inputs = module.get_model(), module.get_inputs()
compiled = torch.compile(model, backend="inductor")
try:
    compiled(*inputs)
except AccuracyError as error:
    print(f"DRIVER: AccuracyError raised: {error}")
    sys.exit(0)
except Exception as error:  # Dynamo wraps backend errors; look for the AccuracyError inside
    cause = error
    while cause is not None and not isinstance(cause, AccuracyError):
        cause = cause.__cause__ or cause.__context__
    if cause is not None:
        print(f"DRIVER: AccuracyError raised (wrapped in {type(error).__name__}): {cause}")
        sys.exit(0)
    raise
print("DRIVER: no AccuracyError: the built-in check did not flag the model")
sys.exit(3)
'''

NODE_COUNTER = '''\
# Written by benchmarks/compare_minifier.py: size of the model's forward aten graph (no Inductor).
import importlib.util, sys
import torch
from torch._dynamo.backends.common import aot_autograd
from functorch.compile import make_boxed_func

spec = importlib.util.spec_from_file_location("bench_model", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
sizes = []

def forward_compiler(gm, example_inputs):
    calls = [n for n in gm.graph.nodes if n.op == "call_function"]
    sizes.append({"call_function": len(calls), "all": len(gm.graph.nodes),
                  "relu": sum("relu" in str(n.target) for n in calls)})
    return make_boxed_func(gm.forward)

torch.compile(module.get_model(), backend=aot_autograd(fw_compiler=forward_compiler))(*module.get_inputs())
print("NODES " + repr(sizes))
'''


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --warm-toolchain: a folder holding what Inductor builds once per machine before any graph (its
# CPU-capability checks in the cache folder, its precompiled kernel header under $TMPDIR), copied
# into every flow's sandbox before it starts; None: every flow starts from nothing (the default).
TOOLCHAIN: Path | None = None


def build_toolchain() -> Path:
    """Inductor's per-machine C++ toolchain state, as on a machine where torch.compile already ran
    once: one tiny compile in a folder of its own (removed by :func:`drop_toolchain`)."""
    path = Path(tempfile.mkdtemp(prefix="bench-toolchain-"))
    for sub in ("cache", "tmp"):
        (path / sub).mkdir()
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(path / "cache"), "TMPDIR": str(path / "tmp")}
    subprocess.run([sys.executable, "-c", "import torch; torch.compile(lambda x: torch.relu(x) + 1)(torch.ones(64))"],
                   env=env, check=True, capture_output=True, timeout=900)
    return path


def drop_toolchain(keep: bool) -> None:
    """Remove the toolchain folder at the end of a benchmark (kept with ``--keep-temp``)."""
    if TOOLCHAIN is not None and not keep:
        shutil.rmtree(TOOLCHAIN, ignore_errors=True)


def seed_toolchain(sandbox: Path) -> None:
    """Copy the toolchain state into a sandbox: the capability checks (never a graph's kernel) and
    the precompiled headers."""
    from bisect_engine.localise.workers import capability_probes, seed_cache

    assert TOOLCHAIN is not None
    seed_cache(sandbox / "cache", capability_probes(TOOLCHAIN / "cache"))
    for headers in (TOOLCHAIN / "tmp").glob("torchinductor_*/precompiled_headers"):
        shutil.copytree(headers, sandbox / "tmp" / headers.parent.name / "precompiled_headers")


class Sandbox:
    """A temp folder that holds everything one flow writes, and the environment that keeps it there."""

    def __init__(self, label: str, keep: bool):
        self.path = Path(tempfile.mkdtemp(prefix=f"bench-{label}-"))
        self.keep = keep
        for sub in ("hook", "cache", "debug", "tmp", "xdg"):
            (self.path / sub).mkdir()
        if TOOLCHAIN is not None:
            seed_toolchain(self.path)
        (self.path / "hook" / "sitecustomize.py").write_text(COUNT_HOOK)
        self.compile_log = self.path / "compiles.log"
        self.compile_log.touch()

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TORCHDYNAMO_REPRO", "TORCH_LOGS", "TORCHINDUCTOR_", "TORCH_COMPILE_DEBUG"))}
        env.update(
            PYTHONPATH=str(self.path / "hook"),
            PYTHONDONTWRITEBYTECODE="1",
            BENCH_COMPILE_LOG=str(self.compile_log),
            TORCHINDUCTOR_CACHE_DIR=str(self.path / "cache"),
            TORCH_COMPILE_DEBUG_DIR=str(self.path / "debug"),
            TMPDIR=str(self.path / "tmp"),
            XDG_CACHE_HOME=str(self.path / "xdg"),
        )
        env.update(extra)
        return env

    def compiles(self) -> int:
        return sum(1 for line in self.compile_log.read_text().splitlines() if line.strip())

    def workdir(self, name: str) -> Path:
        path = self.path / name
        path.mkdir(exist_ok=True)
        return path

    def close(self) -> None:
        if self.keep:
            log(f"  kept temp folder {self.path}")
        else:
            shutil.rmtree(self.path, ignore_errors=True)


def run_step(name: str, cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> dict:
    """Run one subprocess (its own process group), timed; on timeout kill the whole group."""
    log(f"  step {name}: {' '.join(cmd)}  (cwd {cwd}, timeout {timeout:.0f}s)")
    out_path, err_path = cwd / f"{name}.stdout", cwd / f"{name}.stderr"
    start = time.perf_counter()
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err, start_new_session=True)
        timed_out = False
        try:
            rc = proc.wait(timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)  # the group we started: the step and its children
            rc = proc.wait()
    seconds = time.perf_counter() - start
    stdout, stderr = out_path.read_text(errors="replace"), err_path.read_text(errors="replace")
    log(f"  step {name}: rc={rc} {'TIMEOUT ' if timed_out else ''}{seconds:.1f}s")
    return {"rc": rc, "seconds": round(seconds, 2), "timed_out": timed_out, "stdout": stdout, "stderr": stderr}


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def repro_graph(path: Path) -> dict:
    """Aten call nodes in the repro's ``Repro.forward`` (FX codegen: one ``name = ...`` line each)."""
    lines = path.read_text().splitlines()
    in_class = in_forward = False
    nodes, ops = 0, []
    for line in lines:
        if line.startswith("class Repro"):
            in_class = True
            continue
        if in_class and line and not line[0].isspace():
            break  # end of the class
        if in_class and re.match(r"\s+def forward\(", line):
            in_forward = True
            continue
        if in_forward:
            if re.match(r"\s+def ", line):
                break
            match = re.match(r"\s+([A-Za-z_]\w*) = (.*)", line)
            if match and not match.group(2).startswith("self."):
                nodes += 1
                op = re.match(r"(torch\.ops\.[\w.]+)", match.group(2))
                ops.append(op.group(1).replace("torch.ops.", "") if op else match.group(2).split("(")[0][:40])
    return {"nodes": nodes, "ops": ops}


def fresh_check(repro: Path, sandbox: Sandbox, name: str, timeout: float, builtin: bool) -> dict:
    """Run repro.py in a fresh process from a fresh folder; decide whether it reproduces."""
    where = sandbox.workdir(name)
    copy = where / "repro.py"
    shutil.copyfile(repro, copy)
    env = sandbox.env(TORCHINDUCTOR_CACHE_DIR=str(where / "cache"))
    step = run_step(name, [sys.executable, str(copy)], where, env, timeout)
    output = step["stdout"] + step["stderr"]
    if builtin:
        reproduces = step["rc"] != 0 and "AccuracyError" in output
    else:
        reproduces = step["rc"] == 1
    step["reproduces"] = bool(reproduces) and not step["timed_out"]
    step["output_tail"] = tail(output, 6)
    del step["stdout"], step["stderr"]
    return step


# ---------------------------------------------------------------------------------------------
# The flows
# ---------------------------------------------------------------------------------------------

def model_size(model: Path, keep: bool, timeout: float) -> dict:
    sandbox = Sandbox(f"{model.stem}-size", keep)
    try:
        script = sandbox.path / "count_nodes.py"
        script.write_text(NODE_COUNTER)
        step = run_step("size", [sys.executable, str(script), str(model)], sandbox.workdir("work"),
                        sandbox.env(), timeout)
        match = re.search(r"^NODES (.*)$", step["stdout"], re.M)
        if not match:
            return {"error": tail(step["stderr"])}
        graphs = eval(match.group(1))  # a list of dicts printed by our own helper
        return {"graphs": graphs, "forward_nodes": sum(g["call_function"] for g in graphs),
                "relus": sum(g["relu"] for g in graphs)}
    finally:
        sandbox.close()


def run_ours(model: Path, args, root: Path = ROOT) -> dict:
    """The CLI of the checkout at ``root`` (this one, or ``--baseline-root``'s), whatever the venv installed."""
    sandbox = Sandbox(f"{model.stem}-ours", args.keep_temp)
    try:
        work, out = sandbox.workdir("work"), sandbox.path / "out"
        cmd = [sys.executable, "-m", "bisect_engine.cli"]
        cmd += ["run", str(model), "--out", str(out), "--verify-runs", str(args.verify_runs), "--quiet"]
        env = sandbox.env()
        env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(root)])
        step = run_step("bisect", cmd, work, env, args.timeout)
        result = {"seconds": step["seconds"], "timed_out": step["timed_out"], "rc": step["rc"],
                  "compiles": sandbox.compiles(), "output": tail(step["stdout"] + step["stderr"], 20)}
        report_path = out / "report.json"
        if not report_path.exists():
            result["error"] = "no report.json"
            return result
        report = json.loads(report_path.read_text())
        culprit = report.get("culprit") or {}
        repro = report.get("repro") or {}
        result.update(
            verdict=report.get("verdict"),
            culprit_op=culprit.get("op"),
            culprit_ops=culprit.get("ops"),
            culprit_node=culprit.get("node"),
            self_reported_compiles=(report.get("stats") or {}).get("compiles"),
            tool_seconds=(report.get("stats") or {}).get("seconds"),
            tool_repro_seconds=(report.get("stats") or {}).get("repro_seconds"),
            tool_repro_status=repro.get("status"),
            tool_repro_reproduced=repro.get("reproduced"),
            graph_nodes=[g.get("nodes") for g in report.get("graphs", [])],
        )
        repro_path = Path(repro["path"]) if repro.get("path") else out / "repro.py"
        if repro_path.exists():
            result.update(repro_graph(repro_path))
            result["fresh_check"] = fresh_check(repro_path, sandbox, "fresh", args.timeout, builtin=False)
            result["reproduces"] = result["fresh_check"]["reproduces"]
        else:
            result["error"] = "no repro.py"
        return result
    finally:
        sandbox.close()


def run_builtin(model: Path, args, isolate: bool) -> dict:
    mode = "isolate" if isolate else "inprocess"
    sandbox = Sandbox(f"{model.stem}-builtin-{mode}", args.keep_temp)
    budget_end = time.perf_counter() + args.flow_timeout
    remaining = lambda: min(args.timeout, budget_end - time.perf_counter())  # noqa: E731
    steps: dict[str, dict] = {}
    result: dict = {"mode": mode, "steps": steps}
    try:
        # 1. The user's script, with the after-AOT accuracy checks on.
        driver = sandbox.path / "driver.py"
        driver.write_text(BUILTIN_DRIVER)
        env = sandbox.env(TORCHDYNAMO_REPRO_AFTER="aot", TORCHDYNAMO_REPRO_LEVEL="4")
        step = run_step("driver", [sys.executable, str(driver), str(model)], sandbox.workdir("driver"), env, remaining())
        steps["driver"] = {k: step[k] for k in ("rc", "seconds", "timed_out")}
        steps["driver"]["compiles"] = sandbox.compiles()
        launchers = sorted((sandbox.path / "debug").rglob("minifier_launcher.py"), key=lambda p: p.stat().st_mtime)
        if step["rc"] != 0 or not launchers:
            result["error"] = "driver did not produce minifier_launcher.py: " + tail(step["stdout"] + step["stderr"])
            return finish_builtin(result, steps, sandbox)
        launcher = launchers[-1]
        result["launcher"] = str(launcher.relative_to(sandbox.path))

        # 2. The minifier.  Run without the REPRO env vars (they are for the user's script; under
        #    TORCHDYNAMO_REPRO_AFTER=aot the isolate-mode queries would raise AccuracyError themselves).
        cmd = [sys.executable, str(launcher), "minify"] + ([] if isolate else ["--no-isolate"])
        minify_dir = sandbox.workdir("minify")
        step = run_step("minify", cmd, minify_dir, sandbox.env(), remaining())
        stderr = step["stderr"]
        queries = re.search(r"^Made (\d+) queries", stderr, re.M)
        started = re.search(r"^Started off with (\d+) nodes", stderr, re.M)
        steps["minify"] = {
            "rc": step["rc"], "seconds": step["seconds"], "timed_out": step["timed_out"],
            "compiles": sandbox.compiles() - steps["driver"]["compiles"],
            "queries": int(queries.group(1)) if queries else None,
            "started_nodes": int(started.group(1)) if started else None,
            "strategies_tried": len(re.findall(r"^Strategy: ", stderr, re.M)),
            "successes": len(re.findall(r"^SUCCESS: ", stderr, re.M)),
            "tail": tail(stderr, 8),
        }
        if queries:
            result["self_reported_compiles"] = 1 + int(queries.group(1))
        # The minifier's dump_state copies each checkpoint (the last one: the minimal graph) to
        # ./repro.py in its cwd; the checkpoints themselves land in <debug>/run_*/minifier/checkpoints.
        repro = minify_dir / "repro.py"
        if not repro.exists():
            result["error"] = "minifier wrote no repro.py: " + tail(step["stdout"] + stderr)
            return finish_builtin(result, steps, sandbox)
        result["partial_repro"] = step["timed_out"] or step["rc"] != 0
        result.update(repro_graph(repro))
        checkpoints = sorted((sandbox.path / "debug").rglob("checkpoints/*.py"), key=lambda p: p.stat().st_mtime)
        result["checkpoints"] = [p.name for p in checkpoints]

        # 3. The user verifies the repro in a fresh process (part of the end-to-end time).
        if remaining() > 0:
            check = fresh_check(repro, sandbox, "verify", remaining(), builtin=True)
            steps["verify"] = check
            steps["verify"]["compiles"] = None  # filled in below
        # 4. Untimed independent fresh-process check, same as for ours.
        compiles_before = sandbox.compiles()
        if "verify" in steps:
            steps["verify"]["compiles"] = compiles_before - steps["driver"]["compiles"] - steps["minify"]["compiles"]
        final = fresh_check(repro, sandbox, "fresh", args.timeout, builtin=True)
        result["fresh_check"] = final
        result["reproduces"] = final["reproduces"]
        result["compiles"] = compiles_before
        return finish_builtin(result, steps, sandbox, compiles_known=True)
    finally:
        sandbox.close()


def finish_builtin(result: dict, steps: dict, sandbox: Sandbox, compiles_known: bool = False) -> dict:
    timed = [s for name, s in steps.items() if name in ("driver", "minify", "verify")]
    result["seconds"] = round(sum(s["seconds"] for s in timed), 2)
    result["timed_out"] = any(s.get("timed_out") for s in timed)
    if not compiles_known:
        result["compiles"] = sandbox.compiles()
    return result


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------

def fmt_seconds(r: dict, flow_timeout: float) -> str:
    if r.get("timed_out"):
        return f">{flow_timeout:.0f} (timeout after {r['seconds']:.0f})"
    if r.get("error") and "seconds" in r:
        return f"{r['seconds']:.1f} (failed)"
    return f"{r['seconds']:.1f}"


def fmt_row(model_label: str, tool: str, r: dict, flow_timeout: float) -> str:
    compiles = str(r.get("compiles", "?"))
    if r.get("self_reported_compiles") is not None:
        compiles += f" (self-reported {r['self_reported_compiles']})"
    nodes = str(r["nodes"]) if "nodes" in r else "-"
    if r.get("partial_repro"):
        nodes += " (partial)"
    ops = ", ".join(sorted(set(r.get("ops", [])))) or "-"
    if "reproduces" in r:
        rep = "yes" if r["reproduces"] else "NO"
        rc = (r.get("fresh_check") or {}).get("rc")
        rep += f" (exit {rc})"
    else:
        rep = "- (" + (r.get("error", "no repro")[:60].replace("|", "/").replace("\n", " ")) + ")"
    return f"| {model_label} | {TOOL_LABEL[tool]} | {fmt_seconds(r, flow_timeout)} | {compiles} | {nodes} | {ops} | {rep} |"


def render(results: dict, flow_timeout: float) -> str:
    lines = [
        "| model (aten nodes) | tool | end-to-end s to verified repro | Inductor compiles | nodes in repro "
        "| ops in repro | repro reproduces in fresh process |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, entry in results["models"].items():
        label = f"{name} ({entry.get('size', {}).get('forward_nodes', '?')}"
        started = [r["steps"]["minify"]["started_nodes"] for r in entry["runs"].values()
                   if r.get("steps", {}).get("minify", {}).get("started_nodes")]
        label += f"; built-in graph {started[0]})" if started else ")"
        for tool in TOOLS:
            if tool in entry["runs"]:
                lines.append(fmt_row(label, tool, entry["runs"][tool], flow_timeout))
    lines.append("")
    lines.append("model (N; built-in graph M): N = aten call nodes in the forward graph; M = nodes (with "
                 "placeholders/output) of the post-decomposition graph the built-in minifier starts from. "
                 "Compiles: counted _compile_fx_inner calls over the whole end-to-end flow "
                 "(self-reported: ours = report stats.compiles, search only; built-in = 1 + 'Made N queries').")
    lines.append("Toolchain: " + ("warm (every flow starts with Inductor's CPU-capability checks and precompiled "
                                  "header built, as where torch.compile already ran once)."
                                  if results["settings"].get("warm_toolchain") else
                                  "cold (every flow builds Inductor's CPU-capability checks and precompiled header "
                                  "itself, as on a machine where torch.compile never ran)."))
    lines.append("")
    for name, entry in results["models"].items():
        runs = entry["runs"]
        ours = runs.get("ours")
        if not ours or ours.get("error") or ours.get("timed_out"):
            continue
        for tool in ("builtin-isolate", "builtin-inprocess", "ours-baseline"):
            other = runs.get(tool)
            if not other:
                continue
            ratio = other["seconds"] / ours["seconds"]
            more = "≥" if other.get("timed_out") else ""
            who = "baseline" if tool == "ours-baseline" else "built-in"
            fewer = f"{who} {other['compiles']} Inductor compiles vs ours {ours['compiles']}"
            lines.append(f"- {name}: ours is {more}{ratio:.1f}× faster end to end than {TOOL_LABEL[tool]} "
                         f"({ours['seconds']:.1f} s vs {more}{other['seconds']:.1f} s; {fewer})")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(TOOLS[:3]),
                        help="comma-separated subset of: " + ", ".join(TOOLS))
    parser.add_argument("--models", default="mlp66,deep458,resmlp600", help="comma-separated names in benchmarks/models/")
    parser.add_argument("--baseline-root", type=Path, default=None,
                        help="another checkout of this tool (e.g. a `git worktree` of an older commit): "
                             "the ours-baseline tool runs its CLI, side by side with this checkout's")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per step (default 1800)")
    parser.add_argument("--flow-timeout", type=float, default=2400.0,
                        help="seconds for a whole built-in flow, driver+minify+verify (default 2400)")
    parser.add_argument("--verify-runs", type=int, default=1, help="--verify-runs passed to bisect-accuracy")
    parser.add_argument("--results", type=Path, default=HERE / "results.json")
    parser.add_argument("--keep-temp", action="store_true", help="keep the temp folders (for debugging)")
    parser.add_argument("--warm-toolchain", action="store_true",
                        help="every flow starts with Inductor's per-machine C++ state built (its CPU-capability "
                             "checks and precompiled header, as where torch.compile already ran once); "
                             "default: every flow builds them itself")
    parser.add_argument("--render-only", action="store_true",
                        help="run nothing: print the table from an existing --results file")
    args = parser.parse_args()
    if args.render_only:
        results = json.loads(args.results.read_text())
        print(render(results, results["settings"]["flow_timeout"]))
        return 0

    tools = [t.strip() for t in args.only.split(",") if t.strip()]
    unknown = [t for t in tools if t not in TOOLS]
    if unknown:
        parser.error(f"unknown tool(s) {unknown}; choose from {TOOLS}")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        if not (MODELS_DIR / f"{m}.py").is_file():
            parser.error(f"no model {MODELS_DIR / (m + '.py')}")

    import torch  # only for the environment record

    global TOOLCHAIN
    if args.warm_toolchain:
        sys.path.insert(0, str(ROOT))  # bisect_engine.localise.workers: which cache files are the capability checks
        TOOLCHAIN = build_toolchain()
        log(f"toolchain state built in {TOOLCHAIN}")

    results = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "environment": {"torch": torch.__version__, "python": sys.version.split()[0],
                        "cpus": os.cpu_count(), "python_exe": sys.executable},
        "settings": {"timeout": args.timeout, "flow_timeout": args.flow_timeout, "verify_runs": args.verify_runs,
                     "tools": tools, "models": models, "warm_toolchain": args.warm_toolchain},
        "models": {},
    }
    total_start = time.perf_counter()

    def save() -> None:
        results["total_seconds"] = round(time.perf_counter() - total_start, 1)
        args.results.write_text(json.dumps(results, indent=2) + "\n")

    try:
        for name in models:
            model = MODELS_DIR / f"{name}.py"
            log(f"model {name}")
            entry = results["models"][name] = {"path": str(model.relative_to(ROOT)), "runs": {}}
            entry["size"] = model_size(model, args.keep_temp, args.timeout)
            log(f"  forward graph: {entry['size']}")
            for tool in tools:
                log(f"== {name} / {tool}")
                if tool == "ours":
                    run = run_ours(model, args)
                elif tool == "ours-baseline":
                    if args.baseline_root is None:
                        parser.error("ours-baseline needs --baseline-root")
                    run = run_ours(model, args, args.baseline_root.resolve())
                else:
                    run = run_builtin(model, args, isolate=(tool == "builtin-isolate"))
                entry["runs"][tool] = run
                log(f"  -> {json.dumps({k: v for k, v in run.items() if k not in ('steps', 'output', 'fresh_check')})}")
                save()
    finally:
        drop_toolchain(args.keep_temp)

    results["table"] = render(results, args.flow_timeout)
    save()
    print(results["table"])
    print(f"\ntotal benchmark time: {results['total_seconds']:.0f} s; results in {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
