"""The culprit's generated kernels: reading Inductor's output code (torch-free, no compiles) and
quoting it in the repro as comments that cannot break the script."""
from __future__ import annotations

import io
import json
import tokenize
from dataclasses import replace
from pathlib import Path

from bisect_engine.output.repro import kernel_quotes, render
from bisect_engine.verdict.kernels import (
    Kernel,
    OutputCode,
    culprit_kernels,
    parse_output_code,
    provenance_nodes,
)

FIXTURES = Path(__file__).parent / "fixtures"
# A real CPU compile (torch 2.13) of relu -> mm -> tanh with provenance tracking on.
CPU = (FIXTURES / "output_code_cpu.txt").read_text()
CPU_PROVENANCE = (FIXTURES / "output_code_cpu_provenance.json").read_text()
# The same graph as Triton's wrapper writes it (hand-written in its 2.13 shape).
CUDA = (FIXTURES / "output_code_cuda.txt").read_text()


def test_a_cpu_wrapper_defines_its_cpp_kernels_and_calls_an_extern_one() -> None:
    parsed = parse_output_code(CPU)
    assert {name: kind for name, (kind, _) in parsed.defined.items()} == {"cpp_fused_relu_0": "cpp",
                                                                         "cpp_fused_tanh_1": "cpp"}
    assert parsed.defined["cpp_fused_relu_0"][1].startswith("#include")
    assert parsed.defined["cpp_fused_relu_0"][1].rstrip().endswith("}")  # the source only, not the quotes
    assert "extern_kernels.mm" in parsed.externs and parsed.call.startswith("def call(")


def test_provenance_maps_each_kernel_to_our_nodes_without_its_debug_handle() -> None:
    assert provenance_nodes(CPU_PROVENANCE) == {"cpp_fused_relu_0": ["relu"], "extern_kernels.mm": ["mm"],
                                                "cpp_fused_tanh_1": ["tanh"]}
    assert provenance_nodes(None) == {} and provenance_nodes("not json") == {} and provenance_nodes("[]") == {}


def test_provenance_names_the_cpp_kernel_that_computes_the_culprit() -> None:
    code = (OutputCode(CPU, CPU_PROVENANCE),)
    (relu,) = culprit_kernels(code, ("relu",))
    assert (relu.name, relu.kind, relu.nodes, relu.mapped_by) == ("cpp_fused_relu_0", "cpp", ("relu",), "provenance")
    assert "at::vec::clamp_min(tmp0, decltype(tmp0)(0))" in relu.source
    (mm,) = culprit_kernels(code, ("mm",))
    assert (mm.name, mm.kind, mm.mapped_by) == ("extern_kernels.mm", "extern", "provenance")
    assert mm.source.endswith("extern_kernels.mm(buf0, arg1_1, out=buf1)")


def test_without_provenance_the_source_node_comments_name_triton_kernels() -> None:
    (relu,) = culprit_kernels((OutputCode(CUDA),), ("relu",))[:1]
    assert (relu.name, relu.kind, relu.mapped_by) == ("triton_poi_fused_relu_0", "triton", "comment")
    assert "triton_helpers.maximum(tmp1, tmp0)" in relu.source and "device_str" not in relu.source
    names = [k.name for k in culprit_kernels((OutputCode(CUDA),), ("tanh",))]
    assert names == ["triton_poi_fused_tanh_1"]


def test_without_any_mapping_every_kernel_of_the_culprits_own_compile_computes_it() -> None:
    """C++ kernels carry no comment: in a compile of the culprit alone, each of them is its."""
    kernels = culprit_kernels((OutputCode(CPU),), ("relu",))
    by_name = {k.name: k for k in kernels}
    assert by_name["cpp_fused_relu_0"].mapped_by == "compile" and by_name["cpp_fused_relu_0"].nodes == ("relu",)
    assert by_name["extern_kernels.mm"].mapped_by == "comment"  # its comment names relu too


def test_a_compile_without_kernels_gives_its_call_function() -> None:
    wrapper = "def call(args):\n    arg0_1, = args\n    return (reinterpret_tensor(arg0_1, (4,), (1,), 0), )\n"
    (kernel,) = culprit_kernels((OutputCode(wrapper),), ("view",))
    assert (kernel.name, kernel.kind, kernel.nodes) == ("call", "wrapper", ("view",))
    assert culprit_kernels((), ("relu",)) == ()


def test_a_kernel_in_report_json_is_clipped_and_says_so() -> None:
    kernel = Kernel("k", "cpp", "x\n" * 40_000, ("relu",), "provenance")
    entry = kernel.to_json()
    assert set(entry) >= {"name", "nodes", "source"} and entry["truncated"] and entry["lines"] == 40_001
    assert len(entry["source"]) < 70_000 and entry["source"].endswith("more characters)")
    json.dumps(entry)


def test_the_repro_quotes_a_kernel_as_comments_that_cannot_break_the_script() -> None:
    from test_repro_render import _spec  # the golden spec, plus a hostile kernel

    hostile = ("void kernel() {\n  x = 1; ''' \"\"\" \\\n}\r\nprint('escaped')\u2028"
               "raise SystemExit(9)\x0bimport os\x00\tend")
    spec = _spec()
    script = render(replace(spec, kernels=kernel_quotes((Kernel("cpp_fused_relu_0", "cpp", hostile, ("relu",)),)))).script
    compile(script, "repro.py", "exec")
    block = script[script.index("# What Inductor generated"):script.index("INDUCTOR_CONFIG")]
    assert "# ---- kernel cpp_fused_relu_0 (cpp; computes relu) ----" in block
    tokens = list(tokenize.generate_tokens(io.StringIO(block).readline))
    assert {t.type for t in tokens} <= {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER}
    for fragment in ("print('escaped')", "raise SystemExit(9)", "import os", "x = 1; '''"):
        assert fragment in block  # quoted, each on a commented line
    assert render(replace(spec, kernels=())).script == render(spec).script  # no kernels: no block


def test_the_summary_names_the_culprits_kernel() -> None:
    from bisect_engine.output.summary import summary

    report = json.loads((FIXTURES / "report_divergent.json").read_text())
    report["culprit"]["kernels"] = [Kernel("cpp_fused_relu_0", "cpp", "a\nb", ("relu",), "provenance").to_json()]
    assert ("  kernel:  cpp_fused_relu_0  (cpp, 2 lines, nodes relu; source in report.html and repro.py)"
            in summary(report).splitlines())
    report["repro"] = None
    assert "nodes relu; source in report.html)" in summary(report)
