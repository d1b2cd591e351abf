"""Standalone, self-verifying repro scripts.

:func:`repro_spec` turns a finding into a :class:`ReproSpec` (plain data); :func:`render` turns a
spec into text, a pure function (same spec, same bytes); :func:`write_repro` writes it;
:func:`verify_repro` runs it in fresh processes. A repro needs only torch: the minimal failing
subgraph as aten-level code, its real inputs (compressed, base64; a sidecar file beside the
script past a size cap), the non-default Inductor config as ``config.patch`` code, an environment
fingerprint, and the tool's own comparison code embedded verbatim.
"""
from __future__ import annotations

import base64
import io
import subprocess
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from ..verdict import compare, fx_eval
from ..verdict import recipes as recipes_module
from . import repro_runtime
from ..verdict.graphs import Subgraph

INLINE_LIMIT_BYTES = 2_000_000  # encoded inputs past this go to a sidecar file
SIDECAR_NAME = "repro_inputs.bin"
Expect = Literal["mismatch", "crash", "eager_nonfinite"]


@dataclass(frozen=True)
class ReproSpec:
    title: str
    finding: tuple[tuple[str, str], ...]  # (label, text) lines for the header
    forward_code: str
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    inputs_blob: bytes  # zlib-compressed torch.save of the input list
    inductor_config: tuple[tuple[str, Any], ...]
    unrenderable_config: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]
    expect: Expect = "mismatch"
    notes: tuple[str, ...] = ()
    rng_strict: bool = False
    seed: int = 0
    recipes: tuple[tuple[tuple[str, Any], ...], ...] | None = None  # random inputs instead of the blob


@dataclass(frozen=True)
class RenderedRepro:
    script: str
    sidecar: bytes | None


@dataclass(frozen=True)
class ReproCheck:
    path: str
    status: Literal["REPRODUCED", "FLAKY", "NOT_REPRODUCED", "CANNOT_RUN"]
    runs: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        reproduced = sum(run["exit"] == repro_runtime.EXIT_REPRODUCED for run in self.runs)
        return {"path": self.path, "status": self.status, "reproduced": f"{reproduced}/{len(self.runs)}",
                "runs": list(self.runs)}


def serialise_inputs(values: list[Any]) -> bytes:
    buffer = io.BytesIO()
    torch.save([fx_eval.clone_value(v) for v in values], buffer)
    return zlib.compress(buffer.getvalue(), 9)


def repro_spec(
    subgraph: Subgraph,
    values: dict[str, Any],
    *,
    title: str,
    finding: list[tuple[str, str]],
    environment: dict[str, str],
    expect: Expect = "mismatch",
    config: dict[str, Any],
    unrenderable_config: list[str],
    notes: list[str] | None = None,
    rng_strict: bool = False,
    seed: int = 0,
    recipes: list[dict[str, Any]] | None = None,
) -> ReproSpec:
    forward_code = subgraph.graph_module.code.strip()
    return ReproSpec(
        title=title,
        finding=tuple(finding),
        forward_code=forward_code,
        input_names=subgraph.input_names,
        output_names=subgraph.output_names,
        inputs_blob=b"" if recipes is not None else serialise_inputs([values[name] for name in subgraph.input_names]),
        inductor_config=tuple(sorted(config.items())),
        unrenderable_config=tuple(unrenderable_config),
        environment=tuple(sorted(environment.items())),
        expect=expect,
        notes=tuple(notes or ()),
        rng_strict=rng_strict,
        seed=seed,
        recipes=None if recipes is None else tuple(tuple(sorted(r.items())) for r in recipes),
    )


_HEADER = '''#!/usr/bin/env python3
# {title}
#
# Made by bisect-accuracy. Needs only torch. Run: python {script_name}
# Exit status: 1 = reproduces, 0 = does not, 125 = cannot run  (works with `git bisect run`).
#
{finding}
#
# Environment (paste into the bug report):
{environment}
from __future__ import annotations

import sys
import warnings

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
try:
    import torch
    import torch.fx
    from torch import device, inf, nan  # names the generated aten code may use
except Exception as _error:  # no usable torch here: the repro cannot say
    print(f"repro: cannot import torch: {{_error}}")
    sys.exit(125)
'''

_CONFIG = '''
# The non-default Inductor config the failing compile ran with.
INDUCTOR_CONFIG = {config}
{unrenderable}'''

_BODY = '''
# The minimal failing subgraph, at aten level (before Inductor's decompositions).
class Repro(torch.nn.Module):
{forward}


OUTPUT_NAMES = {output_names}
EXPECT = {expect!r}
RNG_STRICT = {rng_strict!r}  # True: random ops must reproduce eager's draws under SEED
SEED = {seed!r}
# Random inputs (chosen with --random-inputs, checked to reproduce), or None: the real ones below.
INPUT_RECIPES = {recipes}
INPUTS_FILE = {inputs_file!r}
# Inputs {input_names}: torch.save, zlib, base64.
INPUTS_B64 = (
{inputs_b64}
)
'''

_MAIN = '''

if __name__ == "__main__":
    sys.exit(repro_main(Repro(), INPUTS_B64, INPUTS_FILE, INDUCTOR_CONFIG, OUTPUT_NAMES, EXPECT, __file__,
                        RNG_STRICT, SEED, INPUT_RECIPES))
'''


def _comment_lines(pairs: tuple[tuple[str, str], ...]) -> str:
    return "\n".join(f"#   {label + ':':<12} {text}" for label, text in pairs)


def _embedded(module: Any) -> str:
    """A module's source, minus what cannot sit in the middle of a script."""
    lines = Path(module.__file__).read_text().splitlines()
    kept = [line for line in lines if line.strip() != "from __future__ import annotations"]
    return f"\n\n# ---- embedded from {module.__name__} ----\n" + "\n".join(kept) + "\n"


def _config_literal(config: tuple[tuple[str, Any], ...]) -> str:
    if not config:
        return "{}"
    return "{\n" + "".join(f"    {key!r}: {value!r},\n" for key, value in config) + "}"


def render(spec: ReproSpec, script_name: str = "repro.py") -> RenderedRepro:
    """The repro's text (and sidecar bytes past the inline cap): a pure function of ``spec``."""
    encoded = base64.b64encode(spec.inputs_blob).decode("ascii")
    inline = len(encoded) <= INLINE_LIMIT_BYTES
    chunks = [encoded[i : i + 96] for i in range(0, len(encoded), 96)] if inline else []
    notes = "".join(f"# {note}\n" for note in spec.notes)
    unrenderable = "".join(
        f"# Also non-default, not renderable as code (set it as your job does): {key}\n"
        for key in spec.unrenderable_config
    )
    script = (
        _HEADER.format(
            title=spec.title, script_name=script_name,
            finding=_comment_lines(spec.finding), environment=_comment_lines(spec.environment),
        )
        + notes
        + _CONFIG.format(config=_config_literal(spec.inductor_config), unrenderable=unrenderable)
        + _BODY.format(
            forward=_indent(spec.forward_code), output_names=list(spec.output_names), expect=spec.expect,
            rng_strict=spec.rng_strict, seed=spec.seed,
            recipes=None if spec.recipes is None else "[\n" + "".join(f"    {dict(r)!r},\n" for r in spec.recipes) + "]",
            inputs_file=None if inline else SIDECAR_NAME, input_names=", ".join(spec.input_names),
            inputs_b64="\n".join(f"    {chunk!r}" for chunk in chunks) or "    ''",
        )
        + _embedded(compare) + _embedded(fx_eval) + _embedded(recipes_module) + _embedded(repro_runtime)
        + _MAIN
    )
    return RenderedRepro(script, None if inline else spec.inputs_blob)


def _indent(code: str) -> str:
    return "\n".join(f"    {line}" if line else "" for line in code.splitlines())


def write_repro(rendered: RenderedRepro, out_dir: Path, script_name: str = "repro.py") -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / script_name
    path.write_text(rendered.script)
    if rendered.sidecar is not None:
        (out_dir / SIDECAR_NAME).write_bytes(rendered.sidecar)
    return path


# A python interpreter started ahead of time: it imports what every repro imports (torch,
# Inductor, make_fx), then waits for one script path on stdin and runs that file as __main__,
# exactly as ``python repro.py`` would (sys.argv, sys.path[0], __file__, output, exit status; the
# interpreter's C-level teardown is skipped). An empty line or a closed stdin ends it without
# running anything. It holds no state of the tool's.
_BOOTSTRAP = """\
import os, runpy, sys, warnings
if hasattr(os, "nice"):
    os.nice(10)  # import in the search's idle cycles, not in its way; results do not depend on it
with warnings.catch_warnings():  # the script's own warning filters start as Python's defaults
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    for module in ("torch", "torch.fx", "torch.fx.experimental.proxy_tensor", "torch._inductor.compile_fx",
                   "torch._inductor.fx_passes.fuse_attention", "torch._inductor.fx_passes.mkldnn_fusion",
                   "torch._inductor.fx_passes.pad_mm", "torch._inductor.fx_passes.quantization",
                   "torch._inductor.codegen.halide", "torch._inductor.codegen.wrapper_fxir",
                   "torch._inductor.codegen.memory_planning", "torch._inductor.cpp_builder", "setuptools"):
        try:
            __import__(module)
        except Exception:
            pass  # the script imports torch itself and says so (exit 125)
path = sys.stdin.readline().strip()
if not path:
    sys.exit(0)
sys.argv = [path]
sys.path[0] = os.path.dirname(os.path.abspath(path))
try:
    runpy.run_path(path, run_name="__main__")
    code = 0
except SystemExit as exit:
    code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    if not isinstance(exit.code, (int, type(None))):
        print(exit.code, file=sys.stderr)
except BaseException:
    import traceback
    traceback.print_exc()
    code = 1
# The interpreter's own exit, less its C-level teardown (about a second with torch loaded).
import atexit
atexit._run_exitfuncs()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
"""


class Interpreters:
    """Fresh interpreters for :func:`verify_repro`, started while the search still runs.

    Importing torch and Inductor is most of a small repro's run time (about 4 s here); started
    as soon as a graph is found to diverge, that overlaps with the search. Each interpreter runs
    one script once. :meth:`close` ends the ones never used.
    """

    def __init__(self, count: int, cwd: Path):
        self.count, self.cwd = count, cwd
        self._processes: list[subprocess.Popen[str]] = []
        self.started = False

    def start(self) -> None:
        if self.started or self.count <= 0:
            return
        self.started = True
        self.cwd.mkdir(parents=True, exist_ok=True)
        for _ in range(self.count):
            self._processes.append(subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP], cwd=self.cwd, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            ))

    def take(self) -> subprocess.Popen[str] | None:
        while self._processes:
            process = self._processes.pop()
            if process.poll() is None:
                return process
            process.communicate()
        return None

    def close(self) -> None:
        for process in self._processes:
            try:
                process.communicate(input="\n", timeout=10)
            except (subprocess.TimeoutExpired, OSError, ValueError):
                process.kill()
                process.communicate()
        self._processes = []


def _run_once(path: Path, timeout_s: float, interpreters: Interpreters | None = None) -> dict[str, Any]:
    process = interpreters.take() if interpreters is not None else None
    started = time.perf_counter()
    if process is None:
        process = subprocess.Popen([sys.executable, path.name], cwd=path.parent, stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        launch, request = "python repro.py", None
    else:
        launch, request = "prestarted python (torch imported, then the script run as __main__)", f"{path.resolve()}\n"
    try:
        stdout, stderr = process.communicate(input=request, timeout=timeout_s)
        status, tail = process.returncode, (stdout + stderr)[-2000:]
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        status, tail = 125, f"timed out after {timeout_s} s"
    return {"exit": status, "seconds": round(time.perf_counter() - started, 2), "output_tail": tail,
            "launch": launch}


def verify_repro(path: Path, runs: int = 3, timeout_s: float = 600,
                 interpreters: Interpreters | None = None) -> ReproCheck:
    """Run the repro ``runs`` times in fresh processes (concurrently) and classify the outcome.

    ``interpreters``: fresh interpreters started earlier (see :class:`Interpreters`); a run
    without one starts ``python repro.py``.
    """
    with ThreadPoolExecutor(max_workers=max(runs, 1)) as pool:
        results = tuple(pool.map(lambda _: _run_once(path, timeout_s, interpreters), range(runs)))
    exits = [r["exit"] for r in results]
    reproduced = sum(code == repro_runtime.EXIT_REPRODUCED for code in exits)
    if reproduced == runs and runs:
        status = "REPRODUCED"
    elif reproduced:
        status = "FLAKY"
    elif all(code == repro_runtime.EXIT_CANNOT_RUN for code in exits):
        status = "CANNOT_RUN"
    else:
        status = "NOT_REPRODUCED"
    return ReproCheck(str(path), status, results)  # type: ignore[arg-type]
