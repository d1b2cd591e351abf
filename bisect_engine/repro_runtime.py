"""The body of every emitted ``repro.py``: load inputs, run eager / fp64 / Inductor, judge, exit.

Embedded verbatim into each repro (with :mod:`bisect_engine.compare` and
:mod:`bisect_engine.fx_eval`), so this file may import only torch and the standard library and
must not use relative imports. The rendered script defines ``Repro``, ``INPUTS_B64`` or
``INPUTS_FILE``, ``INDUCTOR_CONFIG``, ``OUTPUT_NAMES`` and ``EXPECT`` before this code runs.

Exit status: 1 the finding reproduces, 0 it does not, 125 the repro cannot run (so that
``git bisect run python repro.py`` skips builds where it cannot say).
"""
import base64
import copy
import io
import os
import sys
import traceback
import zlib

import torch

if __package__:  # imported by the tool itself; inside a repro these names are defined above
    from .compare import Outcome, compare_values
    from .fx_eval import clone_value, run_graph

EXIT_REPRODUCED, EXIT_NOT_REPRODUCED, EXIT_CANNOT_RUN = 1, 0, 125


def load_inputs(inputs_b64, inputs_file, script_path):
    if inputs_file:
        with open(os.path.join(os.path.dirname(os.path.abspath(script_path)), inputs_file), "rb") as handle:
            blob = handle.read()
    else:
        blob = base64.b64decode(inputs_b64)
    return torch.load(io.BytesIO(zlib.decompress(blob)), weights_only=True)


def compile_with_inductor(graph_module, inputs, inductor_config):
    from torch._inductor.compile_fx import compile_fx

    with torch._inductor.config.patch(inductor_config):
        compiled = compile_fx(copy.deepcopy(graph_module), list(inputs))
        with torch.no_grad():
            outputs = compiled(*[clone_value(v) for v in inputs])
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


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


def repro_main(repro_module, inputs_b64, inputs_file, inductor_config, output_names, expect, script_path):
    try:
        inputs = load_inputs(inputs_b64, inputs_file, script_path)
        graph_module = torch.fx.symbolic_trace(repro_module)
        eager = run_graph(graph_module, inputs)
        fp64 = run_graph(graph_module, inputs, upcast=True)
    except Exception:
        traceback.print_exc()
        print("repro: cannot run (loading inputs or the eager reference failed)")
        return EXIT_CANNOT_RUN
    if expect == "eager_nonfinite":
        found = has_nonfinite(eager)
        print(f"repro: eager output {'holds' if found else 'holds no'} NaN/Inf")
        return EXIT_REPRODUCED if found else EXIT_NOT_REPRODUCED
    try:
        compiled = compile_with_inductor(graph_module, inputs, inductor_config)
    except Exception as error:
        if expect == "crash":
            print(f"repro: REPRODUCED: Inductor raised {type(error).__name__}: {error}")
            return EXIT_REPRODUCED
        traceback.print_exc()
        print("repro: cannot run (the Inductor compile raised)")
        return EXIT_CANNOT_RUN
    if expect == "crash":
        print("repro: NOT REPRODUCED: Inductor compiled and ran without raising")
        return EXIT_NOT_REPRODUCED
    verdicts = compare_values(eager, fp64, compiled)
    report(output_names, verdicts)
    mismatched = any(v.outcome is not Outcome.MATCH for v in verdicts)
    print(f"repro: {'REPRODUCED' if mismatched else 'NOT REPRODUCED'}: Inductor "
          f"{'disagrees' if mismatched else 'agrees'} with eager against fp64")
    return EXIT_REPRODUCED if mismatched else EXIT_NOT_REPRODUCED
