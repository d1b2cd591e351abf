"""The repro renderer is a pure function: golden text for its own part, verbatim embedded code."""
from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from bisect_engine.output import repro_runtime
from bisect_engine.verdict import compare, fx_eval, recipes
from bisect_engine.verdict.graphs import CapturedGraph
from bisect_engine.verdict.oracle import GraphContext
from bisect_engine.output.repro import ReproSpec, render, repro_spec, serialise_inputs

GOLDEN = Path(__file__).parent / "golden" / "repro_head.txt"
ENVIRONMENT = {"torch": "2.13.0+cpu", "python": "3.11.7", "platform": "Linux", "cpu": "x86_64", "cuda": "none"}


def _spec() -> ReproSpec:
    def model(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.tanh(torch.relu(x @ w) * 0.5),)

    inputs = [torch.arange(12, dtype=torch.float32).reshape(3, 4) / 7, torch.eye(4)]
    graph_module = make_fx(model)(*inputs)
    context = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, graph_module, inputs, True))
    return repro_spec(
        context.subgraph(["relu", "mul"]), context.eager_values,
        title="aten.relu.default (+1 more): Inductor disagrees with eager (fp64 reference)",
        finding=[("verdict", "divergent"), ("ops", "aten.relu.default, aten.mul.Tensor")],
        environment=ENVIRONMENT, config={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"},
        unrenderable_config=["post_grad_custom_post_pass"], notes=["subsystem: lowering aten.relu.default"],
    )


def _head(script: str) -> str:
    return script.split("\n\n# ---- embedded from")[0]


def test_rendering_is_deterministic_and_matches_the_golden_text() -> None:
    first, second = render(_spec()), render(_spec())
    assert first.script == second.script and first.sidecar is None
    if not GOLDEN.exists():
        GOLDEN.write_text(_head(first.script))
        raise AssertionError(f"wrote {GOLDEN}: review it, commit it, run again")
    assert _head(first.script) == GOLDEN.read_text()


def test_the_repro_embeds_the_tools_own_comparison_code_verbatim() -> None:
    script = render(_spec()).script
    for module in (compare, fx_eval, recipes, repro_runtime):
        body = Path(module.__file__).read_text().replace("from __future__ import annotations\n", "")
        assert body in script, module.__name__
    compile(script, "repro.py", "exec")


def test_serialised_inputs_are_the_same_bytes_in_another_process() -> None:
    here = serialise_inputs([torch.arange(6, dtype=torch.float32).reshape(2, 3), torch.tensor([1, 2])])
    code = ("import sys, torch\nfrom bisect_engine.output.repro import serialise_inputs\n"
            "sys.stdout.write(serialise_inputs([torch.arange(6, dtype=torch.float32).reshape(2, 3), "
            "torch.tensor([1, 2])]).hex())")
    there = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, check=True)
    assert bytes.fromhex(there.stdout) == here


def test_large_inputs_go_to_a_sidecar_found_next_to_the_script_from_any_cwd(tmp_path: Path) -> None:
    big_input = torch.randn(700_000, generator=torch.Generator().manual_seed(0))  # incompressible: ~2.8 MB
    spec = ReproSpec(**{**_spec().__dict__, "inputs_blob": serialise_inputs([big_input])})
    rendered = render(spec)
    assert rendered.sidecar == spec.inputs_blob
    assert "INPUTS_FILE = 'repro_inputs.bin'" in rendered.script
    folder, elsewhere = tmp_path / "bundle", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    (folder / "repro.py").write_text(rendered.script)
    (folder / "repro_inputs.bin").write_bytes(rendered.sidecar)
    # Import the repro as a module (not __main__: nothing compiles) from another working directory
    # and load its inputs the way its main does.
    code = ("import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('repro', {str(folder / 'repro.py')!r})\n"
            "module = importlib.util.module_from_spec(spec); sys.modules['repro'] = module\n"
            "spec.loader.exec_module(module)\n"
            "values = module.load_inputs(module.INPUTS_B64, module.INPUTS_FILE, module.__file__)\n"
            "print(values[0].shape[0], float(values[0].sum()))")
    loaded = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True,
                            cwd=elsewhere, timeout=120)
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == ["700000", repr(float(big_input.sum()))]


def test_a_pre_grad_repro_embeds_the_torch_level_graph_and_compiles_it_with_torch_compile(tmp_path: Path) -> None:
    """A torch-level pass finding: ``Repro`` is the Dynamo graph before the passes (``x + 1`` as
    Dynamo recorded it), run by ``pre_grad_main``, which compiles it through torch.compile."""
    import operator

    from bisect_engine.output.repro import torch_level_repro_spec
    from bisect_engine.strategies.pregrad import cut_torch_level

    graph = torch.fx.Graph()
    x = graph.placeholder("l_x_")
    x.meta["example_value"] = torch.ones(3)
    add = graph.call_function(operator.add, (x, 1))
    graph.output((add,))
    module = torch.fx.GraphModule({}, graph)
    cut = cut_torch_level(module, {"add"}, {"l_x_": torch.ones(3), "add": torch.full((3,), 2.0)})
    assert cut is not None and not cut.minimal and cut.input_names == ("l_x_",)
    spec = torch_level_repro_spec(cut.graph_module, cut.input_names, cut.output_names, cut.inputs,
                                  title="aten.add.Tensor: pre_grad_custom_pass rewrites add", finding=[("pass", "p")],
                                  environment=ENVIRONMENT, config={}, unrenderable_config=["pre_grad_custom_pass"])
    script = render(spec).script
    assert render(spec).script == script and "status = pre_grad_main(Repro()" in script
    assert "# The torch-level (Dynamo) graph, before Inductor's pre-grad passes" in script
    import runpy

    (tmp_path / "repro.py").write_text(script)
    namespace = runpy.run_path(str(tmp_path / "repro.py"), run_name="not_main")
    inputs = namespace["load_inputs"](namespace["INPUTS_B64"], None, str(tmp_path / "repro.py"))
    assert torch.equal(namespace["Repro"]()(*inputs)[0], torch.full((3,), 2.0))


def test_the_repro_judges_by_the_policy_and_facts_the_tool_judged_with() -> None:
    """A sum that cancels to ~0 is judged at the scale of its terms (a scale floor): the repro's
    embedded judgement, given the ORACLE and OUTPUT_FACTS the tool rendered, says what the tool's
    GraphContext said, output for output; without the facts it would call the same values wrong."""
    from bisect_engine.output.repro import with_judgement

    def model(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return ((x - x.mean(0)).sum(0), torch.relu(x))

    inputs = [torch.randn(64, 4, generator=torch.Generator().manual_seed(0))]
    context = GraphContext.from_captured(CapturedGraph("forward_0", "forward", 0, make_fx(model)(*inputs), inputs, True))
    whole = context.whole()
    spec = with_judgement(repro_spec(whole, context.eager_values, title="t", finding=[], environment={}, config={},
                                     unrenderable_config=[]), context, whole)
    script = render(spec).script
    assert "\nORACLE = Oracle(" in script and "\nOUTPUT_FACTS = (" in script
    module = types.ModuleType("repro_under_test")  # the rendered repro, imported (its main does not run)
    sys.modules[module.__name__] = module
    try:
        exec(compile(script, "repro.py", "exec"), module.__dict__)  # noqa: S102
    finally:
        del sys.modules[module.__name__]
    namespace = module.__dict__
    values = namespace["load_inputs"](namespace["INPUTS_B64"], namespace["INPUTS_FILE"], "repro.py")
    graph_module, _ = namespace["trace"](namespace["Repro"](), values)
    eager, fp64 = namespace["references"](graph_module, values, 0)
    floor = context.scale_floor(whole.output_names[0])
    assert floor > 0
    compiled = [eager[0] + 2 * torch.finfo(torch.float32).eps * floor, eager[1].clone()]  # ~4 ulps of the terms
    tool = context.judge_whole_values(dict(zip(whole.output_names, compiled)))
    judge = namespace["judge_outputs"]
    in_repro = judge(namespace["ORACLE"], "graph", eager, fp64, compiled, namespace["OUTPUT_FACTS"])
    assert [v.outcome.value for v in in_repro] == [tool.outputs[n].outcome.value for n in whole.output_names] \
        == ["match", "match"]
    assert judge(namespace["ORACLE"], "graph", eager, fp64, compiled)[0].outcome.value == "mismatch"



def test_the_repro_runs_at_the_programs_thread_count_where_a_fresh_process_would_get_another(tmp_path: Path) -> None:
    """pytorch#185509 reproduces at 2 intra-op threads, not at 1 (Inductor's C++ kernels are
    generated for the count): a repro made at 2 where a fresh process gets 1 sets 2 before it
    compiles; at the default it sets nothing (the golden text above)."""
    from bisect_engine.output.repro import fresh_process_threads, threads_to_carry

    for package, core in ((0, 0), (0, 0), (0, 1), (1, 0)):  # 4 processors, 3 physical cores
        folder = tmp_path / f"cpu{len(list(tmp_path.iterdir()))}" / "topology"
        folder.mkdir(parents=True)
        (folder / "physical_package_id").write_text(f"{package}\n")
        (folder / "core_id").write_text(f"{core}\n")
    assert fresh_process_threads({}, str(tmp_path)) == 3
    assert fresh_process_threads({"OMP_NUM_THREADS": "1"}, str(tmp_path)) == 1
    assert fresh_process_threads({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "4"}, str(tmp_path)) == 4  # torch's order
    assert fresh_process_threads({}, str(tmp_path / "missing")) is None
    assert (threads_to_carry(2, 1), threads_to_carry(2, 2), threads_to_carry(2, None)) == (2, None, 2)
    script = render(ReproSpec(**{**_spec().__dict__, "threads": 2})).script
    assert script.count("torch.set_num_threads(2)") == 1
    assert script.index("torch.set_num_threads(2)") < script.index("class Repro(torch.nn.Module)")
    assert "set_num_threads" not in render(_spec()).script
    compile(script, "repro.py", "exec")


def test_every_module_a_repro_embeds_imports_the_tools_own_modules_only_inside_the_tool() -> None:
    # a repro holds these modules' source verbatim and runs as a plain script: a relative import
    # there ("from ..search import ...") is an ImportError in every repro (the tool's, when guarded
    # by ``if __package__:``)
    import ast

    from bisect_engine.output import repro
    from bisect_engine.verdict import frozen, judgement, precision, shapes

    embedded = [compare, precision, judgement, fx_eval, recipes, shapes, frozen, repro_runtime]
    assert Path(repro.__file__).read_text().count("_embedded(") - 1 == len(embedded)  # its definition, then each
    for module in embedded:
        tree = ast.parse(Path(module.__file__).read_text())
        guarded = {id(node) for statement in tree.body if isinstance(statement, ast.If)
                   and ast.unparse(statement.test) == "__package__" for node in ast.walk(statement)}
        relative = [ast.unparse(node) for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.level > 0 and id(node) not in guarded]
        assert relative == [], (module.__name__, relative)
