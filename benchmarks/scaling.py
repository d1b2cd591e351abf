#!/usr/bin/env python3
"""Scaling benchmark: the same planted relu bug in models of about 100, 500, 2,000 and 5,000 aten nodes.

Two generated families, each with exactly one ``relu`` (Inductor's C++ relu bug,
``cpp.inject_relu_bug_TESTING_ONLY``, planted at import as in ``benchmarks/models/``):

  resstack  a residual MLP (``benchmarks/models/resmlp600.py``'s block: two pre-norm sub-layers,
            tanh/gelu/sigmoid/silu elsewhere), the relu in the block at 70 % of the depth;
  gpt2      an HF transformers ``GPT2LMHeadModel`` built from a tiny config (random init, no
            download), eager attention, the MLP activation of the layer at 70 % of the depth
            replaced by ``nn.ReLU``.

For each model this runs, in fresh subprocesses with cold caches (``compare_minifier.Sandbox``):
``bisect-accuracy run MODEL --verify-runs 1 -v`` (per-stage seconds from its step log, Inductor
compiles from the counting hook and ``report.json``, peak RSS of the tool's process), and the
built-in flow with ``minifier_launcher.py minify --no-isolate`` (``compare_minifier.run_builtin``)
when ``--builtin`` is given (up to ``--builtin-max-nodes``), killed at ``--builtin-cap`` seconds (the
cap: a slow flow on a shared machine costs everyone; a capped flow is reported as ``>cap``).

Usage:  .venv/bin/python benchmarks/scaling.py [--families resstack,gpt2] [--sizes 100,500,2000,5000]
            [--builtin] [--builtin-cap 300] [--timeout 1800] [--results benchmarks/scaling.json]
            [--render-only]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import compare_minifier as cm  # noqa: E402  (the sandbox, node counter and built-in flow are shared)

PLANT = '''\
import torch
import torch._inductor.config as inductor_config
from torch import nn


def plant():
    """Install the bug: Inductor's C++ backend compiles relu(x) as x + 1."""
    inductor_config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"


plant()
PLANTED = {"config": {"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}}
EXPECTED = {"verdict": "divergent", "op": "aten.relu.default", "kind": "node"}
'''

RESSTACK = PLANT + '''
DEPTH = {depth}
RELU_BLOCK = {relu_block}
OTHERS = ["tanh", "gelu", "sigmoid", "silu"]


def activate(name, x):
    if name == "relu":
        return torch.relu(x)  # the only relu in the model
    if name in ("gelu", "silu"):
        return getattr(nn.functional, name)(x)
    return getattr(torch, name)(x)


class Block(nn.Module):
    def __init__(self, width, act):
        super().__init__()
        self.act = act
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.gate, self.up = nn.Linear(width, 2 * width), nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)
        self.fc1, self.fc2 = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)
        self.scale = nn.Parameter(torch.full((width,), 0.5))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.scale * self.down(torch.sigmoid(self.gate(h)) * self.up(h))
        return x + self.scale * self.fc2(activate(self.act, self.fc1(self.norm2(x))))


class Model(nn.Module):
    def __init__(self, width=16):
        super().__init__()
        self.stem = nn.Linear(width, width)
        acts = ["relu" if i == RELU_BLOCK else OTHERS[i % len(OTHERS)] for i in range(DEPTH)]
        self.blocks = nn.ModuleList(Block(width, act) for act in acts)
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, 4)

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.head(nn.functional.gelu(self.norm(x)))


def get_model():
    torch.manual_seed(0)
    return Model().eval()


def get_inputs():
    torch.manual_seed(1)
    return (torch.randn(8, 16),)
'''

GPT2 = PLANT + '''
from transformers import GPT2Config, GPT2LMHeadModel

LAYERS = {depth}
RELU_LAYER = {relu_block}


def get_model():
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=100, n_positions=32, n_embd=32, n_layer=LAYERS, n_head=2,
                        bos_token_id=99, eos_token_id=99)
    config._attn_implementation = "eager"
    model = GPT2LMHeadModel(config).eval()
    model.transformer.h[RELU_LAYER].mlp.act = nn.ReLU()  # the only relu in the model
    return model


def get_inputs():
    generator = torch.Generator().manual_seed(1)
    return (torch.randint(0, 100, (2, 12), generator=generator),)
'''

# Aten nodes per unit of depth and the fixed rest, measured with compare_minifier's node counter
# (forward graph, call_function nodes): the depth for a target size is (target - fixed) / per_unit.
FAMILIES = {
    "resstack": {"template": RESSTACK, "per_unit": 26.3, "fixed": 10},
    "gpt2": {"template": GPT2, "per_unit": 69.0, "fixed": 26},
}

STAGES = [  # (stage, pattern in the tool's -v step log)
    ("capture", r"^capture$"),
    ("whole graph", r"compile whole graph"),
    ("per-node", r"per-node verdicts"),
    ("confirm", r"confirming .* alone"),
    ("window", r"window search"),
    ("subsystem", r"subsystem bisection"),
    ("repro verify", r"verifying repro"),
]


def write_model(folder: Path, family: str, target: int) -> Path:
    spec = FAMILIES[family]
    depth = max(1, round((target - spec["fixed"]) / spec["per_unit"]))
    path = folder / f"{family}_{target}.py"
    path.write_text(spec["template"].replace("{depth}", str(depth)).replace("{relu_block}", str(int(depth * 0.7))))
    return path


def stage_seconds(stderr: str) -> dict[str, float]:
    """Sum the tool's ``-v`` step durations (``bisect_engine.progress: <step>: <s> s``) per stage."""
    seconds: dict[str, float] = {}
    for match in re.finditer(r"bisect_engine\.progress: (.*): ([0-9.]+) s$", stderr, re.M):
        step, took = match.group(1), float(match.group(2))
        stage = next((name for name, pattern in STAGES if re.search(pattern, step)), "other steps")
        seconds[stage] = round(seconds.get(stage, 0.0) + took, 2)
    return seconds


def run_tool(model: Path, args: argparse.Namespace) -> dict:
    sandbox = cm.Sandbox(f"{model.stem}-ours", args.keep_temp)
    try:
        work, out = sandbox.workdir("work"), sandbox.path / "out"
        cmd = [sys.executable, "-m", "bisect_engine.cli", "run", str(model), "--out", str(out),
               "--verify-runs", "1", "-v"] + args.tool_args.split()
        env = sandbox.env()
        env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(cm.ROOT)])
        cm.log(f"  tool: {' '.join(cmd)}")
        started = time.perf_counter()
        with open(work / "stdout", "w") as stdout, open(work / "stderr", "w") as stderr:
            process = subprocess.Popen(cmd, cwd=work, env=env, stdout=stdout, stderr=stderr, start_new_session=True)
            try:
                _, status, usage = _wait4(process, args.timeout)
                timed_out = False
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, 9)
                _, status, usage = os.wait4(process.pid, 0)
                timed_out = True
        seconds = time.perf_counter() - started
        log_text = (work / "stderr").read_text(errors="replace")
        result = {"seconds": round(seconds, 1), "timed_out": timed_out, "rc": os.waitstatus_to_exitcode(status),
                  "peak_rss_mb": round(usage.ru_maxrss / 1024), "compiles": sandbox.compiles(),
                  "stages": stage_seconds(log_text)}
        result["stages"]["start-up, writing, other"] = round(seconds - sum(result["stages"].values()), 2)
        report_path = out / "report.json"
        if report_path.exists():
            report = json.loads(report_path.read_text())
            result.update(verdict=report["verdict"], op=(report.get("culprit") or {}).get("op"),
                          compiles_by_stage=report["stats"]["compiles_by_stage"],
                          repro=(report.get("repro") or {}).get("status"),
                          graph_nodes=[g["nodes"] for g in report["graphs"]],
                          node_copies=[g["compiled_node_copies"] for g in report["graphs"]],
                          not_checked=[n["check"] for n in report.get("not_checked") or []])
        else:
            result["error"] = cm.tail(log_text)
        return result
    finally:
        sandbox.close()


def _wait4(process: subprocess.Popen, timeout: float) -> tuple[int, int, object]:
    """``os.wait4`` with a timeout (polling): the child's exit status and its resource usage."""
    deadline = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return pid, status, usage
        if time.monotonic() > deadline:
            raise subprocess.TimeoutExpired(process.args, timeout)
        time.sleep(0.2)


def run_builtin(model: Path, args: argparse.Namespace) -> dict:
    options = SimpleNamespace(keep_temp=args.keep_temp, timeout=args.builtin_cap, flow_timeout=args.builtin_cap)
    result = cm.run_builtin(model, options, isolate=False)
    return {k: result.get(k) for k in ("seconds", "timed_out", "compiles", "reproduces", "nodes", "error")
            if k in result}


def render(results: dict) -> str:
    stage_names = [name for name, _ in STAGES] + ["start-up, writing, other"]
    header = ("| model | aten nodes | bisect-accuracy s | " + " | ".join(stage_names)
              + " | compiles | peak RSS MB | s per 1,000 nodes | built-in --no-isolate s (compiles) |")
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for key, entry in results["models"].items():
        ours, builtin = entry.get("ours") or {}, entry.get("builtin")
        nodes = entry.get("nodes") or 0
        stages = ours.get("stages", {})
        per_k = f"{ours['seconds'] / nodes * 1000:.1f}" if nodes and ours.get("seconds") else "-"
        if builtin is None:
            other = "not run" if not results["settings"].get("builtin") else "not run (above --builtin-max-nodes)"
        elif builtin.get("timed_out"):
            other = f">{results['settings']['builtin_cap']:.0f} (capped; {builtin.get('compiles')} compiles by then)"
        else:
            other = f"{builtin.get('seconds')} ({builtin.get('compiles')})" + ("" if builtin.get("reproduces") else " no repro")
        verdict = f"{ours.get('verdict')} {ours.get('op') or ''}".strip()
        lines.append(f"| {key} ({verdict}) | {nodes} | {ours.get('seconds', '-')} | "
                     + " | ".join(str(stages.get(s, "-")) for s in stage_names)
                     + f" | {ours.get('compiles', '-')} | {ours.get('peak_rss_mb', '-')} | {per_k} | {other} |")
    lines.append("")
    lines += growth_lines(results)
    return "\n".join(lines)


def growth_lines(results: dict) -> list[str]:
    """Per family: the marginal seconds per 1,000 nodes between consecutive sizes, overall and per-node check."""
    lines = []
    by_family: dict[str, list[tuple[int, dict]]] = {}
    for key, entry in results["models"].items():
        if entry.get("nodes") and (entry.get("ours") or {}).get("seconds"):
            by_family.setdefault(key.split("_")[0], []).append((entry["nodes"], entry["ours"]))
    for family, points in by_family.items():
        points.sort(key=lambda p: p[0])
        steps = []
        for (n0, a), (n1, b) in zip(points, points[1:]):
            total = (b["seconds"] - a["seconds"]) / (n1 - n0) * 1000
            node = (b["stages"].get("per-node", 0) - a["stages"].get("per-node", 0)) / (n1 - n0) * 1000
            steps.append(f"{n0}->{n1}: {total:.1f} s (per-node check {node:.1f} s)")
        if steps:
            lines.append(f"- {family}: marginal seconds per 1,000 more nodes, " + "; ".join(steps))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", default="resstack,gpt2")
    parser.add_argument("--sizes", default="100,500,2000,5000", help="target aten node counts")
    parser.add_argument("--builtin", action="store_true", help="also run the built-in --no-isolate flow")
    parser.add_argument("--builtin-cap", type=float, default=1200.0,
                        help="seconds for a whole built-in flow (driver+minify+verify); default 1200")
    parser.add_argument("--builtin-max-nodes", type=int, default=None,
                        help="run the built-in flow only on models up to this many aten nodes")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds for one run of this tool")
    parser.add_argument("--tool-args", default="", help="extra options for bisect-accuracy run")
    parser.add_argument("--results", type=Path, default=HERE / "scaling.json")
    parser.add_argument("--keep-temp", action="store_true")
    parser.add_argument("--render-only", action="store_true")
    args = parser.parse_args()
    if args.render_only:
        print(render(json.loads(args.results.read_text())))
        return 0
    results = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "settings": vars(args) | {"results": str(args.results)},
               "models": {}}
    models_dir = Path(cm.tempfile.mkdtemp(prefix="bench-scaling-models-"))
    for family in args.families.split(","):
        for target in [int(s) for s in args.sizes.split(",")]:
            model = write_model(models_dir, family, target)
            key = f"{family}_{target}"
            cm.log(f"model {key}")
            entry = results["models"][key] = {}
            size = cm.model_size(model, args.keep_temp, args.timeout)
            entry["nodes"] = size.get("forward_nodes")
            cm.log(f"  forward graph: {entry['nodes']} aten nodes")
            entry["ours"] = run_tool(model, args)
            cm.log(f"  ours: {json.dumps(entry['ours'])}")
            if args.builtin and (args.builtin_max_nodes is None or (entry["nodes"] or 0) <= args.builtin_max_nodes):
                entry["builtin"] = run_builtin(model, args)
                cm.log(f"  built-in --no-isolate: {json.dumps(entry['builtin'])}")
            args.results.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
