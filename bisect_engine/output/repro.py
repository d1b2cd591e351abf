"""Standalone, self-verifying repro scripts.

:func:`repro_spec` turns a finding into a :class:`ReproSpec` (plain data); :func:`render` turns a
spec into text, a pure function (same spec, same bytes); the writer writes it;
:func:`verify_repro` runs it in fresh processes. A repro needs only torch: the minimal failing
subgraph as aten-level code, its real inputs (compressed, base64; a sidecar file beside the
script past a size cap), the non-default Inductor config as ``config.patch`` code, an environment
fingerprint, and the tool's own comparison code embedded verbatim.
"""
from __future__ import annotations

import base64
import dataclasses
import io
import os
import shutil
import subprocess
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping

import torch

from ..verdict import compare, fx_eval, judgement, precision
from ..verdict import recipes as recipes_module
from ..verdict import frozen as frozen_module
from ..verdict import shapes as shapes_module
from ..verdict.shapes import data_dependent, shape_signature, static_signature, symbols_of
from ..verdict.inductor_adapter import WARM_KERNEL, cpu_isa_detected, toolchain_warming
from ..environ import with_quiet_waits
from . import repro_runtime
from .integrity import die_with_parent_code, private_folder, sweep_stale_folders
from .repro_modules import init_code, subgraph_classes
from ..verdict.graphs import Subgraph
from ..verdict.kernels import Kernel

INLINE_LIMIT_BYTES = 2_000_000  # encoded inputs past this go to a sidecar file
KERNEL_COMMENT_LIMIT = 8_000  # characters of each culprit kernel's source quoted in the repro
KERNEL_COMMENT_COUNT = 3
SIDECAR_NAME = "repro_inputs.bin"
# "pre_grad": ``Repro`` is a torch-level (Dynamo) graph; torch.compile runs Inductor's pre-grad
# passes on it (the user's pre_grad_custom_pass included), eager does not.
# "saved_layout": ``Repro`` is one backward op, run eagerly on its inputs as eager laid them out and
# again with those in ``LAYOUTS`` laid out as the compiled forward saved them (no compile).
# "decomposition": ``Repro`` is one aten op, run eagerly and as the aten graph AOT Autograd traces of
# it (its Python decomposition, which torch.compile compiles); no compile.
Expect = Literal["mismatch", "crash", "eager_nonfinite", "amplified", "pre_grad", "saved_layout", "decomposition"]


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
    # (heading, source) of the culprit's generated kernels, quoted as a comment block
    kernels: tuple[tuple[str, str], ...] = ()
    # An amplified finding (expect "amplified"): ``Repro`` is the culprit op alone, compiled; the
    # amplifying path below runs eagerly on its output, compiled or eager (see repro_runtime).
    downstream_code: str = ""
    downstream_input_names: tuple[str, ...] = ()
    downstream_output_names: tuple[str, ...] = ()
    culprit_input_names: tuple[str, ...] = ()
    # How the tool judged (verdict.judgement): its Oracle, precision flags pinned, and each output's
    # OutputFacts (unit, scale floor, random draw); rendered as ORACLE / OUTPUT_FACTS. None: defaults.
    oracle: Any = None
    output_facts: tuple[Any, ...] | None = None
    # A subgraph of a graph compiled with symbolic sizes: each input's sizes and strides as
    # expression text (see verdict.shapes); the repro compiles it symbolically too. None: static.
    symbolic: tuple[Any, ...] | None = None
    # The classes of the higher-order ops' subgraphs ``Repro`` holds as attributes (repro_modules).
    subgraph_classes: str = ""
    # The positions of the inputs the job's compile froze into constants (``freezing``: parameters
    # and what is computed from them alone); the repro compiles them as parameters. () : none.
    constants: tuple[int, ...] = ()
    # False: those constants are the graph's own (tensors the compiled function made), compiled as
    # plain attributes without freezing (CONSTANTS_FROZEN).
    constants_frozen: bool = True
    # The finding came from an AOTInductor package: the repro exports the cut and compiles it with
    # aoti_compile_and_package (then aoti_load_package), as the user's program did (COMPILE_WITH).
    aot_inductor: bool = False
    # A layout misread (expect "saved_layout"): (input name, strides) of each input laid out as the
    # compiled forward saved it.
    layouts: tuple[tuple[str, tuple[int, ...]], ...] = ()
    # The intra-op thread count the program ran with, where a fresh process would get another
    # (:func:`threads_to_carry`): the repro sets it (Inductor's C++ kernels are generated for it).
    threads: int | None = None


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
        reproduced = sum(run["outcome"] == "reproduced" for run in self.runs)
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
    kernels: tuple[Kernel, ...] = (),
    aot_inductor: bool = False,
) -> ReproSpec:
    forward_code = init_code(subgraph.graph_module) + subgraph.graph_module.code.strip()
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
        kernels=kernel_quotes(kernels),
        symbolic=_compiled_shapes(subgraph, values),
        subgraph_classes=subgraph_classes(subgraph.graph_module),
        aot_inductor=aot_inductor,
    )


def _compiled_shapes(subgraph: Subgraph, values: dict[str, Any]) -> tuple[Any, ...] | None:
    """The shapes the repro compiles with: the graph's symbolic ones; for a static graph with a
    data-dependent op, its static sizes (Inductor must trace it with a ShapeEnv); else None."""
    symbolic = shape_signature(subgraph.graph_module)
    if symbolic is not None or not data_dependent(subgraph.graph_module) \
            or any(name not in values for name in subgraph.input_names):
        return symbolic
    return static_signature([values[name] for name in subgraph.input_names])


def torch_level_repro_spec(graph_module: torch.fx.GraphModule, input_names: tuple[str, ...],
                           output_names: tuple[str, ...], inputs: tuple[Any, ...], *, title: str,
                           finding: list[tuple[str, str]], environment: dict[str, str], config: dict[str, Any],
                           unrenderable_config: list[str], notes: list[str] | None = None, seed: int = 0,
                           expect: Expect = "pre_grad") -> ReproSpec:
    """A repro of a torch-level (pre-grad) pass finding: the Dynamo graph before the passes,
    compiled by ``torch.compile`` in the repro (the passes run there) against eager; ``expect``
    ``decomposition``: one aten op, eagerly against its decomposition as AOT Autograd traces it."""
    return ReproSpec(
        title=title, finding=tuple(finding), forward_code=graph_module.code.strip(), input_names=input_names,
        output_names=output_names, inputs_blob=serialise_inputs(list(inputs)),
        inductor_config=tuple(sorted(config.items())), unrenderable_config=tuple(unrenderable_config),
        environment=tuple(sorted(environment.items())), expect=expect, notes=tuple(notes or ()), seed=seed)


def fresh_process_threads(environ: Mapping[str, str], cpu_root: str = "/sys/devices/system/cpu") -> int | None:
    """The intra-op thread count a fresh process started with ``environ`` gets, by torch's rule:
    ``MKL_NUM_THREADS``, else ``OMP_NUM_THREADS``, else the machine's physical cores (read from
    Linux's CPU topology); None where that cannot be read."""
    for variable in ("MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        text = environ.get(variable, "").strip()
        if text.isdigit() and int(text) > 0:
            return int(text)
    cores = set()
    for topology in Path(cpu_root).glob("cpu[0-9]*/topology"):
        try:
            cores.add(((topology / "physical_package_id").read_text().strip(), (topology / "core_id").read_text().strip()))
        except OSError:
            return None
    return len(cores) or None


def threads_to_carry(threads: int, default: int | None) -> int | None:
    """``threads`` (the program's count) where a fresh process would run at another, or where what
    it would get cannot be told; None where it is that default (the repro then sets nothing)."""
    return None if default is not None and threads == default else threads


def kernel_quotes(kernels: tuple[Kernel, ...]) -> tuple[tuple[str, str], ...]:
    """(heading, source) for the first few kernels, each source cut to a readable size."""
    quotes = []
    for kernel in kernels[:KERNEL_COMMENT_COUNT]:
        source = kernel.source
        if len(source) > KERNEL_COMMENT_LIMIT:
            source = source[:KERNEL_COMMENT_LIMIT] + f"\n... ({len(kernel.source) - KERNEL_COMMENT_LIMIT:,} more characters)"
        nodes = ", ".join(kernel.nodes) or "?"
        quotes.append((f"{kernel.name} ({kernel.kind}; computes {nodes})", source.strip("\n")))
    if len(kernels) > KERNEL_COMMENT_COUNT:
        quotes.append((f"{len(kernels) - KERNEL_COMMENT_COUNT} more kernel(s) in report.json", ""))
    return tuple(quotes)


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
# The non-default Inductor config {config_note}.
INDUCTOR_CONFIG = {config}
{unrenderable}'''

_THREADS = '''
# The program ran with {threads} intra-op threads (torch.set_num_threads), not the count a fresh
# process gets here: Inductor generates its C++ kernels for the thread count they run at, so this
# repro runs at it too.
torch.set_num_threads({threads})
'''

# The repros that run ops eagerly only (their INDUCTOR_CONFIG is the run's, for the record).
NO_COMPILE_EXPECTS = ("decomposition", "saved_layout")

_AOT_INDUCTOR = '''
# The program compiled this graph as an AOTInductor package (torch.export +
# torch._inductor.aoti_compile_and_package): the cut below is exported and packaged the same way,
# loaded with torch._inductor.aoti_load_package and run.
COMPILE_WITH = "aot_inductor"
'''

_BODY = '''
# {what}
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

_SYMBOLIC = '''
# The job compiled this graph with symbolic sizes, and so does this repro: each input's sizes and
# strides as Inductor saw them ("tensor", sizes, strides) or a SymInt input ("int", expression);
# the symbols take their values from the inputs below, and the other sizes stay static (as
# torch._dynamo.mark_dynamic on exactly those dims would give).
SYMBOLIC_SHAPES = {shapes}
'''

_CONSTANTS = '''
# The job compiled with torch._inductor.config.freezing (no grad): these inputs (its parameters,
# and values computed from them alone) were constants of the graph Inductor compiled, and here they
# are parameters of the module compiled, frozen the same way (max-autotune's C++ GEMM template,
# for one, is chosen only for a constant weight).
CONSTANT_INPUTS = {positions}
CONSTANTS_FROZEN = True
'''

_GRAPH_CONSTANTS = '''
# These inputs are constants of the graph Inductor compiled: tensors the compiled function made
# itself (AOT Autograd traces them to attributes, not inputs), and values computed from them alone.
# Here they are plain attributes of the module compiled, so Inductor holds them as constants too
# (it inlines a small one into the kernel's arithmetic).
CONSTANT_INPUTS = {positions}
CONSTANTS_FROZEN = False
'''

_DATA_DEPENDENT = '''
# This graph has a data-dependent op (nonzero, masked_select, unique, .item()): Inductor traces it
# with a ShapeEnv, as under torch.compile. Each input's sizes and strides, all static.
SYMBOLIC_SHAPES = {shapes}
'''

_DOWNSTREAM = '''
# The amplifying path from the culprit's output to the model output, run eagerly.
class Downstream(torch.nn.Module):
{forward}


CULPRIT_INPUT_NAMES = {culprit_inputs}
DOWNSTREAM_INPUT_NAMES = {downstream_inputs}
DOWNSTREAM_OUTPUT_NAMES = {downstream_outputs}
ALL_INPUT_NAMES = {input_names}
'''

def _main_block(call: str) -> str:
    """The repro's ``__main__``: ``status = call``; anything unforeseen is exit 125 (the repro cannot
    say), never "reproduced"."""
    return ('\n\nif __name__ == "__main__":\n    try:\n        status = ' + call + """
    except Exception:  # anything unforeseen: the repro cannot say, never "reproduced"
        import traceback

        traceback.print_exc()
        print("repro: cannot run (unexpected error)")
        status = EXIT_CANNOT_RUN
    sys.exit(status)
""")


_MAIN_AMPLIFIED = _main_block(
    "amplified_main(Repro(), Downstream(), INPUTS_B64, INPUTS_FILE, INDUCTOR_CONFIG, ALL_INPUT_NAMES,\n"
    "                                CULPRIT_INPUT_NAMES, OUTPUT_NAMES, DOWNSTREAM_INPUT_NAMES, DOWNSTREAM_OUTPUT_NAMES,\n"
    "                                __file__, SEED, INPUT_RECIPES)")

_MAIN_PRE_GRAD = _main_block(
    "pre_grad_main(Repro(), INPUTS_B64, INPUTS_FILE, INDUCTOR_CONFIG, OUTPUT_NAMES, __file__, SEED,\n"
    '                               oracle=globals().get("ORACLE"))')

_MAIN_DECOMPOSITION = _main_block(
    "decomposition_main(Repro(), INPUTS_B64, INPUTS_FILE, OUTPUT_NAMES, __file__, SEED,\n"
    '                                    oracle=globals().get("ORACLE"))')

_LAYOUTS = '''
# The inputs the compiled forward saved in another memory layout (the same values): their strides.
LAYOUTS = {layouts}
INPUT_NAMES = {input_names}
'''

_MAIN_LAYOUT = _main_block(
    "layout_main(Repro(), INPUTS_B64, INPUTS_FILE, INPUT_NAMES, OUTPUT_NAMES, LAYOUTS, __file__, SEED)")

_MAIN = _main_block(
    "repro_main(Repro(), INPUTS_B64, INPUTS_FILE, INDUCTOR_CONFIG, OUTPUT_NAMES, EXPECT, __file__,\n"
    '                            RNG_STRICT, SEED, INPUT_RECIPES, symbolic=globals().get("SYMBOLIC_SHAPES"),\n'
    '                            oracle=globals().get("ORACLE"), facts=globals().get("OUTPUT_FACTS"),\n'
    '                            constants=globals().get("CONSTANT_INPUTS"),\n'
    '                            compile_with=globals().get("COMPILE_WITH"),\n'
    '                            constants_frozen=globals().get("CONSTANTS_FROZEN", True))')



def one_line(text: str) -> str:
    """User-named text (file names, paths, module names) made safe inside a ``#`` comment: every
    character that could end the line or hide text is written as its escape."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in str(text))


def _comment_lines(pairs: tuple[tuple[str, str], ...]) -> str:
    return "\n".join(f"#   {one_line(label) + ':':<12} {one_line(text)}" for label, text in pairs)


def _embedded(module: Any) -> str:
    """A module's source, minus what cannot sit in the middle of a script."""
    lines = Path(module.__file__).read_text().splitlines()
    kept = [line for line in lines if line.strip() != "from __future__ import annotations"]
    return f"\n\n# ---- embedded from {module.__name__} ----\n" + "\n".join(kept) + "\n"


def _kernel_block(kernels: tuple[tuple[str, str], ...]) -> str:
    """The culprit's generated kernels as comments: what Inductor made of it, for the bug report."""
    if not kernels:
        return ""
    lines = ["", "# What Inductor generated for the culprit when this repro was made (read-only; the",
             "# repro compiles it afresh):"]
    for heading, source in kernels:
        if not source:
            lines.append(f"# ({one_line(heading)})")
            continue
        lines.append(f"# ---- kernel {one_line(heading)} ----")
        lines += [f"#   {one_line(line)}".rstrip() for line in source.splitlines()]
    return "\n".join(lines) + "\n"


def _config_literal(config: tuple[tuple[str, Any], ...]) -> str:
    if not config:
        return "{}"
    return "{\n" + "".join(f"    {key!r}: {value!r},\n" for key, value in config) + "}"


def render(spec: ReproSpec, script_name: str = "repro.py") -> RenderedRepro:
    """The repro's text (and sidecar bytes past the inline cap): a pure function of ``spec``."""
    encoded = base64.b64encode(spec.inputs_blob).decode("ascii")
    inline = len(encoded) <= INLINE_LIMIT_BYTES
    chunks = [encoded[i : i + 96] for i in range(0, len(encoded), 96)] if inline else []
    notes = "".join(f"# {one_line(line)}\n" for note in spec.notes for line in str(note).splitlines() or [""])
    unrenderable = "".join(
        f"# Also non-default, not renderable as code (set it as your job does): {one_line(key)}\n"
        for key in spec.unrenderable_config
    )
    script = (
        _HEADER.format(
            title=one_line(spec.title), script_name=script_name,
            finding=_comment_lines(spec.finding), environment=_comment_lines(spec.environment),
        )
        + notes
        + _kernel_block(spec.kernels)
        + _CONFIG.format(config=_config_literal(spec.inductor_config), unrenderable=unrenderable,
                         config_note=("of the run (this repro compiles nothing: the op runs eagerly)"
                                      if spec.expect in NO_COMPILE_EXPECTS else "the failing compile ran with"))
        + (_THREADS.format(threads=spec.threads) if spec.threads is not None else "")
        + (_AOT_INDUCTOR if spec.aot_inductor else "")
        + ("\n# The higher-order ops' subgraphs, as Repro's attributes.\n" + spec.subgraph_classes
           if spec.subgraph_classes else "")
        + _BODY.format(
            what=("The torch-level (Dynamo) graph, before Inductor's pre-grad passes: torch.compile runs them on it."
                  if spec.expect == "pre_grad" else
                  "The backward op that reads its input's memory layout, at aten level (run eagerly)."
                  if spec.expect == "saved_layout" else
                  "The aten op as eager runs it; decomposition_main also runs its decomposition as AOT Autograd traces it."
                  if spec.expect == "decomposition" else
                  "The minimal failing subgraph, at aten level (before Inductor's decompositions)."),
            forward=_indent(spec.forward_code), output_names=list(spec.output_names), expect=spec.expect,
            rng_strict=spec.rng_strict, seed=spec.seed,
            recipes=None if spec.recipes is None else "[\n" + "".join(f"    {dict(r)!r},\n" for r in spec.recipes) + "]",
            inputs_file=None if inline else SIDECAR_NAME, input_names=", ".join(spec.input_names),
            inputs_b64="\n".join(f"    {chunk!r}" for chunk in chunks) or "    ''",
        )
        + ((_SYMBOLIC if symbols_of(spec.symbolic) else _DATA_DEPENDENT).format(shapes=_shapes_literal(spec.symbolic))
           if spec.symbolic else "")
        + (_DOWNSTREAM.format(forward=_indent(spec.downstream_code), culprit_inputs=list(spec.culprit_input_names),
                              downstream_inputs=list(spec.downstream_input_names),
                              downstream_outputs=list(spec.downstream_output_names),
                              input_names=list(spec.input_names)) if spec.downstream_code else "")
        + _embedded(compare) + _embedded(precision) + _embedded(judgement) + _embedded(fx_eval) + _embedded(recipes_module)
        + (_embedded(shapes_module) if spec.symbolic else "")
        + ((_CONSTANTS if spec.constants_frozen else _GRAPH_CONSTANTS).format(positions=list(spec.constants))
           + _embedded(frozen_module) if spec.constants else "")
        + (_LAYOUTS.format(layouts=_layouts_literal(spec.layouts), input_names=list(spec.input_names)) if spec.expect == "saved_layout" else "")
        + _embedded(repro_runtime)
        + _judgement_block(spec)
        + (_MAIN_AMPLIFIED if spec.downstream_code else _MAIN_PRE_GRAD if spec.expect == "pre_grad"
           else _MAIN_LAYOUT if spec.expect == "saved_layout"
           else _MAIN_DECOMPOSITION if spec.expect == "decomposition" else _MAIN)
    )
    return RenderedRepro(script, None if inline else spec.inputs_blob)


_JUDGEMENT = '''

# How the tool judged this finding (bisect_engine.verdict.judgement): the policy, with the precision
# settings of its run (set again here), and each output's unit, scale floor and random-draw flag.
ORACLE = {oracle!r}
OUTPUT_FACTS = {facts}
'''


def _judgement_block(spec: ReproSpec) -> str:
    if spec.oracle is None:
        return ""
    facts = None if spec.output_facts is None else "(\n" + "".join(f"    {f!r},\n" for f in spec.output_facts) + ")"
    return _JUDGEMENT.format(oracle=spec.oracle, facts=facts)


def with_judgement(spec: ReproSpec, context: Any, subgraph: Subgraph | None = None) -> ReproSpec:
    """The repro of a finding ``context`` (a GraphContext, at the size the repro runs) made judges
    by its policy, pinned, and the facts of its outputs as ``subgraph`` (the repro's) computes them.
    Against eager's values (--oracle eager / bitwise), the title says so."""
    outputs = [context.eager_values.get(name) for name in spec.output_names]
    facts = tuple(context.output_facts(spec.output_names, outputs, subgraph.graph_module if subgraph else None))
    title = spec.title if context.reference != "eager" else \
        spec.title.replace("(fp64 reference)", "(eager's values as the reference)")
    constants = tuple(context.constant_positions(spec.input_names))
    return dataclasses.replace(spec, oracle=context.oracle.pinned(), output_facts=facts, title=title,
                               constants=constants, constants_frozen=context.constants_frozen)


def _layouts_literal(layouts: tuple[tuple[str, tuple[int, ...]], ...]) -> str:
    return "{" + ", ".join(f"{name!r}: {list(strides)!r}" for name, strides in layouts) + "}"


def _shapes_literal(signature: tuple[Any, ...] | None) -> str:
    return "[\n" + "".join(f"    {entry!r},\n" for entry in signature or ()) + "]"


def _indent(code: str) -> str:
    return "\n".join(f"    {line}" if line else "" for line in code.splitlines())


# A python interpreter for one verification run: it drops the working folder from ``sys.path`` (as
# ``python -P`` does; it runs in a fresh empty folder anyway), imports what every repro imports
# (torch, Inductor, make_fx), niced, then waits for one script path on stdin and runs that file as
# __main__ the way ``python -P repro.py`` would: nothing in the output folder is ever imported
# (a ``numpy.py`` planted there stays inert). Started ahead of time, the imports overlap the
# search. An empty line or a closed stdin ends it without running anything. The interpreter's
# C-level teardown is skipped. It holds no state of the tool's.
_BOOTSTRAP = """\
import os, runpy, sys, warnings
sys.path[:] = [entry for entry in sys.path if entry not in ("", os.getcwd())]
_PRIORITY = os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None
if _PRIORITY is not None:
    os.setpriority(os.PRIO_PROCESS, 0, min(_PRIORITY + 10, 19))  # import in the search's idle cycles, not in its way
with warnings.catch_warnings():  # the script's own warning filters start as Python's defaults
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    for module in PRELOAD:
        try:
            __import__(module)
        except Exception:
            pass  # the script imports torch itself and says so (exit 125)
    if WARM_CONFIG is not None:  # what a CPU repro's first compile asks first, under the config it sets
        try:  # (the ISA answer is cached per process: the same answer; then the precompiled header)
            import torch._inductor.config
            from torch._inductor import cpu_vec_isa
            from torch._inductor.codecache import CppPythonBindingsCodeCache
            with torch._inductor.config.patch(WARM_CONFIG):
                cpu_vec_isa.valid_vec_isa_list()
                CppPythonBindingsCodeCache.load_pybinding_async(["float*"], WARM_KERNEL)  # the header only: never called
        except Exception:
            pass  # the repro's own compile asks again and meets the error itself
path = sys.stdin.readline().strip()
if not path:
    sys.exit(0)
if _PRIORITY is not None:  # the script itself at the priority it was started with, where the system lets us back
    try:                    # (it does for root; elsewhere it stays niced, as it imported: results do not depend on it)
        os.setpriority(os.PRIO_PROCESS, 0, _PRIORITY)
    except OSError:
        pass
sys.argv = [path]
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
LAUNCH = "python -P repro.py, from an empty working folder"
# What every repro imports: loaded while the interpreter waits for its script.
PRELOAD = ("torch", "torch.fx", "torch.fx.experimental.proxy_tensor", "torch._inductor.compile_fx",
           "torch._inductor.fx_passes.fuse_attention", "torch._inductor.fx_passes.mkldnn_fusion",
           "torch._inductor.fx_passes.pad_mm", "torch._inductor.fx_passes.quantization",
           "torch._inductor.codegen.halide", "torch._inductor.codegen.wrapper_fxir",
           "torch._inductor.codegen.memory_planning", "torch._inductor.cpp_builder", "setuptools")


class Interpreters:
    """Fresh interpreters for :func:`verify_repro`, each in an empty working folder of its own
    making; ``start`` launches them while the search still runs (importing torch and Inductor is
    most of a small repro's run time). Each runs one script once. :meth:`close` ends the ones
    never used; :meth:`kill` ends every one at once (an interrupted run)."""

    def __init__(self, count: int, preload: tuple[str, ...] = PRELOAD, warm_config: dict[str, Any] | None = None):
        self.count = count
        self.preload = preload
        # A CPU repro: Inductor's ISA detection and precompiled header done while waiting too, under
        # the Inductor config the repro sets (None: none that can be written here, no warming).
        self.warm_config = warm_config
        self._processes: list[subprocess.Popen[str]] = []
        self._cwd: str | None = None
        self.started = False

    @property
    def cwd(self) -> str:
        if self._cwd is None:
            sweep_stale_folders()  # an earlier run's, left by a kill -9
            self._cwd = private_folder()
        return self._cwd

    def launch(self) -> subprocess.Popen[str]:
        # Only where this process has the answer, or its warm-up (which took the cache folder's locks
        # first) is building it, so the interpreter (niced) only loads the builds: a build of its own
        # would hold a lock while our first compile waits on it.
        warm = self.warm_config is not None and (cpu_isa_detected() or toolchain_warming())
        bootstrap = die_with_parent_code() + _BOOTSTRAP.replace("PRELOAD", repr(self.preload)).replace(
            "WARM_CONFIG", repr(self.warm_config if warm else None)).replace("WARM_KERNEL", repr(WARM_KERNEL))
        return subprocess.Popen([sys.executable, "-c", bootstrap], cwd=self.cwd, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=with_quiet_waits(os.environ))  # the runs go at once

    def start(self) -> None:
        if self.started or self.count <= 0:
            return
        self.started = True
        self._processes = [self.launch() for _ in range(self.count)]

    def take(self) -> tuple[subprocess.Popen[str], bool]:
        """An interpreter for one run, and whether it was started ahead of time."""
        while self._processes:
            process = self._processes.pop()
            if process.poll() is None:
                return process, True
            process.communicate()
        return self.launch(), False

    def close(self) -> None:
        for process in self._processes:
            try:
                process.communicate(input="\n", timeout=10)
            except (subprocess.TimeoutExpired, OSError, ValueError):
                process.kill()
                process.communicate()
        self._processes = []
        self._remove_cwd()

    def kill(self) -> None:
        for process in self._processes:
            process.kill()
        self._processes = []
        self._remove_cwd()

    def _remove_cwd(self) -> None:
        if self._cwd is not None:
            shutil.rmtree(self._cwd, ignore_errors=True)
            self._cwd = None


def run_outcome(status: int, stdout: str) -> str:
    """``reproduced`` only with the repro's own marker and exit 1; ``not_reproduced`` with its
    marker and exit 0; anything else (a crash, a SyntaxError, 125, a timeout) is ``cannot_run``."""
    lines = stdout.splitlines()
    if status == repro_runtime.EXIT_REPRODUCED and any(
            line.startswith(repro_runtime.MARKER_REPRODUCED + ":") for line in lines):
        return "reproduced"
    if status == repro_runtime.EXIT_NOT_REPRODUCED and any(
            line.startswith(repro_runtime.MARKER_NOT_REPRODUCED + ":") for line in lines):
        return "not_reproduced"
    return "cannot_run"


def _run_once(path: Path, timeout_s: float, interpreters: Interpreters, running: list[subprocess.Popen[str]]) -> dict[str, Any]:
    process, prestarted = interpreters.take()
    running.append(process)
    started = time.perf_counter()
    try:
        stdout, stderr = process.communicate(input=f"{path.resolve()}\n", timeout=timeout_s)
        status, tail = process.returncode, (stdout + stderr)[-2000:]
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, _ = process.communicate()
        status, tail = repro_runtime.EXIT_CANNOT_RUN, f"timed out after {timeout_s:g} s"
    return {"exit": status, "outcome": run_outcome(status, stdout or ""), "seconds": round(time.perf_counter() - started, 2),
            "output_tail": tail, "launch": ("prestarted " if prestarted else "") + LAUNCH}


def verify_repro(path: Path, runs: int = 3, timeout_s: float = 600, interpreters: Interpreters | None = None,
                 preload: tuple[str, ...] = PRELOAD) -> ReproCheck:
    """Run the repro ``runs`` times in fresh processes (concurrently) and classify the outcome.

    ``interpreters``: started earlier (see :class:`Interpreters`); runs past those start fresh
    ones. An interrupt kills every run at once.
    """
    own = interpreters is None
    interpreters = interpreters or Interpreters(0, preload)
    running: list[subprocess.Popen[str]] = []
    with ThreadPoolExecutor(max_workers=max(runs, 1)) as pool:
        futures = [pool.submit(_run_once, path, timeout_s, interpreters, running) for _ in range(runs)]
        try:
            results = tuple(future.result() for future in futures)
        except BaseException:
            for process in running:
                process.kill()
            interpreters.kill()
            raise
        finally:
            if own:
                interpreters.close()
    outcomes = [r["outcome"] for r in results]
    if outcomes and all(o == "reproduced" for o in outcomes):
        status = "REPRODUCED"
    elif "reproduced" in outcomes:
        status = "FLAKY"
    elif outcomes and all(o == "not_reproduced" for o in outcomes):
        status = "NOT_REPRODUCED"
    else:
        status = "CANNOT_RUN"
    return ReproCheck(str(path), status, results)  # type: ignore[arg-type]
