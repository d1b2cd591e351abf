"""The body of every emitted ``repro.py``: load inputs, run eager / fp64 / Inductor, judge, exit.

Embedded verbatim into each repro (with :mod:`bisect_engine.verdict.compare`,
:mod:`bisect_engine.verdict.precision`, :mod:`bisect_engine.verdict.judgement`,
:mod:`bisect_engine.verdict.fx_eval` and :mod:`bisect_engine.verdict.recipes`), so this file may import only torch and the standard library and
must not use relative imports. The rendered script defines ``Repro``, ``INPUTS_B64`` or
``INPUTS_FILE``, ``INDUCTOR_CONFIG``, ``OUTPUT_NAMES`` and ``EXPECT`` before this code runs, and
``ORACLE`` / ``OUTPUT_FACTS``: the judgement policy the tool judged by and each output's facts
(unit, scale floor, random draw), so the repro judges exactly as the tool did.

Exit status: 1 the finding reproduces, 0 it does not, 125 the repro cannot run (so that
``git bisect run python repro.py`` skips builds where it cannot say).
"""
import base64
import copy
import io
import operator
import os
import traceback
import zlib

import torch

if __package__:  # imported by the tool itself; inside a repro these names are defined above
    from ..verdict.compare import Outcome, elementwise_change, material_difference, rounding_unit
    from ..verdict.judgement import GRAPH, PROGRAM, Oracle, OutputFacts, judge_outputs
    from ..verdict.fx_eval import clone_value, heap_checked, interpret, run_graph, to_fp64
    from ..verdict.recipes import random_inputs
    from ..verdict.shapes import fake_inputs
    from ..verdict.frozen import frozen_copy, graph_constants_kept, kept_inputs

EXIT_REPRODUCED, EXIT_NOT_REPRODUCED, EXIT_CANNOT_RUN = 1, 0, 125
# The verdict line the tool's verification reads: "reproduced" needs this line *and* exit 1, so a
# crash (which also exits 1) can never pass for a reproduction.
MARKER_REPRODUCED, MARKER_NOT_REPRODUCED = "repro: REPRODUCED", "repro: NOT REPRODUCED"


def say_verdict(reproduced, why):
    """Say the outcome on stdout with its marker; return the exit status that goes with it."""
    print(f"{MARKER_REPRODUCED if reproduced else MARKER_NOT_REPRODUCED}: {why}")
    return EXIT_REPRODUCED if reproduced else EXIT_NOT_REPRODUCED


def load_inputs(inputs_b64, inputs_file, script_path, recipes=None, seed=0):
    if recipes is not None:
        return random_inputs(recipes, seed)
    if inputs_file:
        with open(os.path.join(os.path.dirname(os.path.abspath(script_path)), inputs_file), "rb") as handle:
            blob = handle.read()
    else:
        blob = base64.b64decode(inputs_b64)
    return torch.load(io.BytesIO(zlib.decompress(blob)), weights_only=True)


def compile_with_inductor(graph_module, inputs, inductor_config, seed, example_inputs=None, constants=None,
                          constants_frozen=True):
    """``example_inputs``: what Inductor compiles for (symbolic fake inputs); default ``inputs``.
    ``constants``: the positions of the inputs the job's compile froze (``freezing``): compiled as
    the module's parameters, under no_grad, so Inductor folds them into constants as it did;
    ``constants_frozen=False``: the graph's own constants, compiled as plain attributes."""
    from torch._inductor.compile_fx import compile_fx

    if constants:
        kept = kept_inputs(len(inputs), constants)
        graph_module = frozen_copy(graph_module, constants, inputs, parameters=constants_frozen)
        inputs = [inputs[i] for i in kept]
        example_inputs = None if example_inputs is None else [example_inputs[i] for i in kept]
    # A fresh compile every time: no FX-graph or AOT-autograd cache entry may answer for it.
    fresh = {"use_pre_grad_passes": False, "fx_graph_cache": False, "fx_graph_remote_cache": False}
    with torch._inductor.config.patch({**fresh, **inductor_config}), \
            torch._functorch.config.patch(enable_autograd_cache=False), torch.set_grad_enabled(not constants):
        module = copy.deepcopy(graph_module)  # frozen.py is embedded only where there are constants
        compiled = compile_fx(graph_constants_kept(module) if constants else module,
                              list(inputs if example_inputs is None else example_inputs))
        torch.manual_seed(seed)
        with torch.no_grad():
            outputs = compiled(*[clone_value(v) for v in inputs])
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def compile_with_aot_inductor(graph_module, inputs, inductor_config, seed):
    """The graph as an AOTInductor package, as a program ships it: ``torch.export`` of the graph
    at these inputs, ``aoti_compile_and_package`` under the config, ``aoti_load_package``, run."""
    import tempfile

    fresh = {"fx_graph_cache": False, "fx_graph_remote_cache": False}
    with torch._inductor.config.patch({**fresh, **inductor_config}), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        exported = torch.export.export(copy.deepcopy(graph_module), tuple(clone_value(v) for v in inputs), strict=False)
        with tempfile.TemporaryDirectory() as folder:
            path = torch._inductor.aoti_compile_and_package(
                exported, package_path=os.path.join(folder, "repro.pt2"), inductor_configs={**fresh, **inductor_config})
            package = torch._inductor.aoti_load_package(path)
            torch.manual_seed(seed)
            with torch.no_grad():
                outputs = package(*[clone_value(v) for v in inputs])
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def trace(repro_module, inputs, symbolic=None):
    """The repro's graph. make_fx records every aten call, factory ops (rand, arange, ...)
    included, where symbolic tracing would bake their values in as constants. ``symbolic``: the
    inputs' symbolic shapes; the graph is then traced on symbolic fake inputs (returned too)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    if symbolic is None:
        return make_fx(repro_module)(*[clone_value(v) for v in inputs]), None
    fakes = fake_inputs(symbolic, inputs)
    return make_fx(repro_module, tracing_mode="symbolic")(*fakes), fakes


def random_outputs(graph_module):
    """For each graph output, whether a random op made it (its draw is data, not a reference)."""
    output = next(node for node in graph_module.graph.nodes if node.op == "output")
    flags = []
    for node in torch.fx.node.map_arg(output.args[0], lambda n: n):
        producer = node.args[0] if node.target is operator.getitem else node
        tags = getattr(producer.target, "tags", ())
        flags.append(torch.Tag.nondeterministic_seeded in tags)
    return flags


def references(graph_module, inputs, seed):
    """Eager outputs (seeded), and fp64 outputs that reuse eager's random draws."""
    torch.manual_seed(seed)
    values = interpret(graph_module, inputs)
    draws = {
        node.name: to_fp64(values[node.name])
        for node in graph_module.graph.nodes
        if torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ())
    }
    output = next(node for node in graph_module.graph.nodes if node.op == "output")
    eager = list(torch.fx.node.map_arg(output.args[0], lambda n: values[n.name]))
    return eager, run_graph(graph_module, inputs, upcast=True, overrides=draws)


def report(names, verdicts):
    print(f"{'output':<24} {'verdict':<9} {'compiled ulps (rms/max)':>26} {'eager ulps (rms/max)':>24}")
    for name, verdict in zip(names, verdicts):
        print(
            f"{name:<24} {verdict.outcome.value:<9} "
            f"{verdict.compiled_rms_ulps:>12.4g} / {verdict.compiled_max_ulps:<11.4g}"
            f"{verdict.eager_rms_ulps:>12.4g} / {verdict.eager_max_ulps:<11.4g} {verdict.reason}"
        )


def has_nonfinite(values):
    return any(
        isinstance(v, torch.Tensor) and v.is_floating_point() and not bool(torch.isfinite(v).all())
        for v in values
    )


def judging(oracle, rng_strict=False, seed=0):
    """The tool's policy (ORACLE), its precision flags set as the tool's run had them; a repro
    made without one judges by the defaults."""
    oracle = oracle if oracle is not None else Oracle(rng_strict=rng_strict, seed=seed)
    if oracle.precision is not None:
        oracle.precision.apply()
    return oracle


def output_facts_of(graph_module, facts):
    """The tool's facts of each output; without them, only which outputs random ops drew."""
    if facts is not None:
        return list(facts)
    return [OutputFacts(random=flag) for flag in random_outputs(graph_module)]


CRASH_CHILD = "BISECT_REPRO_CRASH_CHILD"  # set in the child a crash repro runs its compile in
CRASH_SIGNALS = ("SIGABRT", "SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGTRAP")


def crash_in_child(script_path):
    """A crash repro compiles and runs in a child process (this script again, under glibc's heap
    checker where there is one: ``heap_checked``): a kernel that kills its process (abort, segfault,
    heap corruption) is the crash reproduced (exit 1), not the repro's death; otherwise the child's
    own verdict and exit status stand. None: this is the child."""
    import signal
    import subprocess
    import sys

    if os.environ.get(CRASH_CHILD) or not script_path or not os.path.isfile(script_path):
        return None
    child = subprocess.run([sys.executable, script_path], env=heap_checked({**os.environ, CRASH_CHILD: "1"}))
    if child.returncode < 0:
        name = signal.Signals(-child.returncode).name
        if name in CRASH_SIGNALS:
            return say_verdict(True, f"the compiled code killed its process ({name}, exit {child.returncode})")
        print(f"repro: cannot run (the child was killed by {name})")
        return EXIT_CANNOT_RUN
    if child.returncode == EXIT_NOT_REPRODUCED:  # the child ran to its end: it says no verdict (see repro_main)
        return say_verdict(False, "Inductor compiled and ran without raising, and its process ended normally")
    return child.returncode


def repro_main(repro_module, inputs_b64, inputs_file, inductor_config, output_names, expect, script_path,
               rng_strict=False, seed=0, recipes=None, symbolic=None, oracle=None, facts=None, constants=None,
               compile_with=None, constants_frozen=True):
    if expect == "crash":
        status = crash_in_child(script_path)
        if status is not None:
            return status
    try:
        oracle = judging(oracle, rng_strict, seed)
        inputs = load_inputs(inputs_b64, inputs_file, script_path, recipes, seed)
        graph_module, fakes = trace(repro_module, inputs, symbolic)
        eager, fp64 = references(graph_module, inputs, seed)
    except Exception:
        traceback.print_exc()
        print("repro: cannot run (loading inputs or the eager reference failed)")
        return EXIT_CANNOT_RUN
    if expect == "eager_nonfinite":
        found = has_nonfinite(eager)
        return say_verdict(found, f"eager output {'holds' if found else 'holds no'} NaN/Inf")
    try:
        if compile_with == "aot_inductor":
            compiled = compile_with_aot_inductor(graph_module, inputs, inductor_config, seed)
        else:
            compiled = compile_with_inductor(graph_module, inputs, inductor_config, seed, fakes, constants,
                                             constants_frozen)
    except Exception as error:
        if expect == "crash":
            return say_verdict(True, f"Inductor raised {type(error).__name__}: {error}")
        traceback.print_exc()
        print("repro: cannot run (the Inductor compile raised)")
        return EXIT_CANNOT_RUN
    if expect == "crash":
        if os.environ.get(CRASH_CHILD):  # a heap corruption may still abort this process as it ends:
            print("repro: compiled and ran without raising; whether the process ends normally, the parent says")
            return EXIT_NOT_REPRODUCED  # the parent says the verdict (never two contradicting lines)
        return say_verdict(False, "Inductor compiled and ran without raising")
    verdicts = judge_outputs(oracle, GRAPH, eager, fp64, compiled, output_facts_of(graph_module, facts))
    report(output_names, verdicts)
    mismatched = any(v.outcome is not Outcome.MATCH for v in verdicts)
    against = "eager's values" if oracle.reference == "eager" else "fp64"
    return say_verdict(mismatched, f"Inductor {'disagrees' if mismatched else 'agrees'} with eager against {against}")


def amplified_main(culprit_module, downstream_module, inputs_b64, inputs_file, inductor_config, input_names,
                   culprit_inputs, culprit_outputs, downstream_inputs, downstream_outputs, script_path, seed=0,
                   recipes=None):
    """An amplified finding: the culprit op compiled alone differs from eager by a few ulps; the
    amplifying path, run eagerly on that output instead of eager's, makes the outputs differ
    materially (beyond what rounding noise explains)."""
    try:
        values = dict(zip(input_names, load_inputs(inputs_b64, inputs_file, script_path, recipes, seed)))
        arguments = [values[name] for name in culprit_inputs]
        graph_module, _ = trace(culprit_module, arguments)
        torch.manual_seed(seed)
        eager_mid = run_graph(graph_module, arguments)
    except Exception:
        traceback.print_exc()
        print("repro: cannot run (loading inputs or the eager reference failed)")
        return EXIT_CANNOT_RUN
    try:
        compiled_mid = compile_with_inductor(graph_module, arguments, inductor_config, seed)
    except Exception:
        traceback.print_exc()
        print("repro: cannot run (the Inductor compile raised)")
        return EXIT_CANNOT_RUN

    def downstream(mid):
        known = {**values, **dict(zip(culprit_outputs, mid))}
        with torch.no_grad():
            outputs = downstream_module(*[clone_value(known[name]) for name in downstream_inputs])
        return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]

    for name, eager, compiled in zip(culprit_outputs, eager_mid, compiled_mid):
        change = elementwise_change(eager, compiled)
        unit = rounding_unit(eager.dtype) if isinstance(eager, torch.Tensor) and eager.is_floating_point() else 1.0
        print(f"culprit {name}: compiled differs from eager by at most {change / unit:.4g} ulps (elementwise)")
    differences = [material_difference(e, h) for e, h in zip(downstream(eager_mid), downstream(compiled_mid))]
    return say_outputs(downstream_outputs, differences, "noise", "the culprit's compiled output, run through the eager "
                       "path,", ("changes", "does not change"), "the outputs materially")


def say_outputs(output_names, differences, quiet, subject, verbs, rest):
    """Each output's difference printed (``quiet``: the word for one that is not material), then the
    verdict: reproduced when any output differs materially (``verbs``: the material and the other)."""
    for name, difference in zip(output_names, differences):
        print(f"output {name:<20} {'MATERIAL' if difference.material else quiet:<9} {difference.elements} of "
              f"{difference.total} elements differ, max |diff| {difference.max_abs:.4g} ({difference.reason or '-'})")
    material = any(d.material for d in differences)
    return say_verdict(material, f"{subject} {verbs[0] if material else verbs[1]} {rest}")


def laid_out(value, strides):
    """``value``'s elements in a tensor of its size and dtype with ``strides`` (another layout)."""
    moved = torch.empty_strided(tuple(value.shape), tuple(strides), dtype=value.dtype, device=value.device)
    return moved.copy_(value)


def layout_main(repro_module, inputs_b64, inputs_file, input_names, output_names, layouts, script_path, seed=0):
    """A layout misread: ``Repro`` (one op) run eagerly on its inputs as eager laid them out, then
    on the same values with the inputs in ``layouts`` laid out as the compiled forward saved them;
    it reproduces when an output then differs materially (the op reads the layout, not the values)."""
    try:
        inputs = load_inputs(inputs_b64, inputs_file, script_path, None, seed)
        moved = [laid_out(v, layouts[name]) if name in layouts else v for name, v in zip(input_names, inputs)]
        if any(name in layouts and (list(m.stride()) != list(layouts[name]) or not torch.equal(m, v))
               for name, v, m in zip(input_names, inputs, moved)):
            print("repro: cannot run (an input could not be laid out as the compiled forward saved it)")
            return EXIT_CANNOT_RUN

        def run(arguments):
            torch.manual_seed(seed)
            with torch.no_grad():
                outputs = repro_module(*[clone_value(v) for v in arguments])
            return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]

        eager, other = run(inputs), run(moved)
    except Exception:
        traceback.print_exc()
        print("repro: cannot run (loading the inputs or running the op failed)")
        return EXIT_CANNOT_RUN
    for name, strides in layouts.items():
        print(f"input {name:<20} laid out with strides {list(strides)} (eager's: {list(inputs[input_names.index(name)].stride())})")
    differences = [material_difference(e, o) for e, o in zip(eager, other)]
    return say_outputs(output_names, differences, "same", "the same input values, laid out as the compiled forward "
                       "saved them,", ("change", "do not change"), "the op's outputs materially")


def decomposition_main(repro_module, inputs_b64, inputs_file, output_names, script_path, seed=0, oracle=None):
    """An op decomposed wrong at capture: ``Repro`` (one aten op) run eagerly, and as the aten graph
    ``make_fx`` traces of it under the Python dispatcher (what AOT Autograd traces, and
    torch.compile compiles), both on the same inputs; judged against fp64 (the op upcast). No compile."""
    from torch._dispatch.python import enable_python_dispatcher
    from torch.fx.experimental.proxy_tensor import make_fx

    try:
        oracle = judging(oracle, seed=seed)
        inputs = load_inputs(inputs_b64, inputs_file, script_path, None, seed)
        graph_module = torch.fx.symbolic_trace(repro_module)
        with torch.no_grad():
            eager = run_graph(graph_module, [clone_value(v) for v in inputs])
            fp64 = run_graph(graph_module, [clone_value(v) for v in inputs], upcast=True)
            with enable_python_dispatcher():
                traced = make_fx(graph_module)(*[clone_value(v) for v in inputs])
            decomposed = traced(*[clone_value(v) for v in inputs])
        decomposed = list(decomposed) if isinstance(decomposed, (tuple, list)) else [decomposed]
    except Exception:
        traceback.print_exc()
        print("repro: cannot run (running the op or tracing its decomposition failed)")
        return EXIT_CANNOT_RUN
    print("decomposed as: " + ", ".join(dict.fromkeys(str(n.target) for n in traced.graph.nodes if n.op == "call_function")))
    verdicts = judge_outputs(oracle, PROGRAM, eager, fp64, decomposed)
    report(output_names, verdicts)
    mismatched = len(verdicts) != len(eager) or any(v.outcome is not Outcome.MATCH for v in verdicts)
    return say_verdict(mismatched, f"the op's decomposition (what torch.compile traces and compiles) "
                                   f"{'disagrees' if mismatched else 'agrees'} with the op eager runs, against fp64")


def compile_torch_level(repro_module, inputs, inductor_config, seed):
    """``repro_module`` through a real ``torch.compile`` (Dynamo, then Inductor with its pre-grad
    passes), fresh: no cache entry may answer for it."""
    torch._dynamo.reset()
    fresh = {"fx_graph_cache": False, "fx_graph_remote_cache": False}
    with torch._inductor.config.patch({**fresh, **inductor_config}), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        compiled = torch.compile(repro_module, backend="inductor", fullgraph=True)
        torch.manual_seed(seed)
        with torch.no_grad():
            outputs = compiled(*[clone_value(v) for v in inputs])
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def pre_grad_main(repro_module, inputs_b64, inputs_file, inductor_config, output_names, script_path, seed=0,
                  oracle=None):
    """A torch-level (pre-grad) pass finding: eager runs ``Repro`` as written; torch.compile runs
    Inductor's pre-grad passes on it first (the user's ``pre_grad_custom_pass``, set as the job
    sets it). Judged against fp64 (the graph's ops upcast)."""
    try:
        oracle = judging(oracle, seed=seed)
        inputs = load_inputs(inputs_b64, inputs_file, script_path, None, seed)
        graph_module = torch.fx.symbolic_trace(repro_module)
        torch.manual_seed(seed)
        eager = run_graph(graph_module, [clone_value(v) for v in inputs])
        fp64 = run_graph(graph_module, [clone_value(v) for v in inputs], upcast=True)
    except Exception:
        traceback.print_exc()
        print("repro: cannot run (loading inputs or the eager reference failed)")
        return EXIT_CANNOT_RUN
    try:
        compiled = compile_torch_level(repro_module, inputs, inductor_config, seed)
    except Exception:
        traceback.print_exc()
        print("repro: cannot run (torch.compile raised)")
        return EXIT_CANNOT_RUN
    verdicts = judge_outputs(oracle, PROGRAM, eager, fp64, compiled)
    report(output_names, verdicts)
    mismatched = len(verdicts) != len(eager) or any(v.outcome is not Outcome.MATCH for v in verdicts)
    return say_verdict(mismatched, f"torch.compile (its pre-grad passes run on this torch-level graph) "
                                   f"{'disagrees' if mismatched else 'agrees'} with eager against fp64")
