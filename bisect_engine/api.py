"""The public API: one call from a model file to a report on disk.

Loads the model file, takes the output folder (locked, vetted and write-probed before any
analysis), makes the run's one search (its budget, stage and progress; every stage below judges
through it), runs the engine (a scan first when the file gives batches), and hands the result to
the writer. The repro's verifying interpreters start as soon as a graph diverges, so their imports
overlap the search. An interrupt (SIGINT/SIGTERM, raised by the CLI's handler) still leaves a
report of what was learned, with verdict ``interrupted``; the exception then goes on to the CLI.
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import logging
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from .errors import Interrupted
from .load.memory import check_memory, eager_step_bytes, run_offload
from .load.model_file import ModelSpec, load_model_spec
from .localise.options import EngineOptions
from .localise.judge import close_workers, judge_of, run_search
from .localise.pipeline import RunResult, run
from .localise.repro_inputs import REAL, ReproInputs, checked_random_inputs
from .localise.scan_flow import run_scanned
from .output.bug_report import Versions
from .output.folder import OutputFolder
from .output.report import bare_report
from .output.repro import Interpreters
from .output.trace import recording_trace
from .output.writer import OutputOptions, write_outputs, write_report_and_views
from .progress import Progress
from .verdict import offload
from .verdict.inductor_adapter import warm_cpu_isa

log = logging.getLogger(__name__)


@contextlib.contextmanager
def user_compile_options(spec: Any) -> Iterator[None]:
    """Inductor's config patched with what the user's ``torch.compile(mode=, options=)`` stands
    for (as Inductor's own wrapper patches it around each compile), undone on leaving."""
    if not spec.compile_options:
        yield
        return
    import torch._inductor.config as inductor_config

    with inductor_config.patch(without_dynamo_only_keys(spec.compile_options)):
        yield


def without_dynamo_only_keys(options: dict[str, Any]) -> dict[str, Any]:
    """The user's ``options=`` less ``freezing``: ``torch.compile`` patches them around Inductor's
    compile only, after Dynamo traced the graph with the parameters as inputs, so the user's compile
    freezes nothing (freezing takes effect where ``torch._inductor.config.freezing`` is set before
    Dynamo traces). Patched globally it would make our capture freeze them, and every copy after it."""
    return {key: value for key, value in options.items() if key != "freezing"}


def on_cpu(spec: Any) -> bool:
    """Whether the model runs on the CPU: its inputs and parameters all there."""
    import torch

    tensors = [v for v in torch.utils._pytree.tree_leaves(spec.inputs) if isinstance(v, torch.Tensor)]
    if isinstance(spec.model, torch.nn.Module):
        tensors += list(spec.model.parameters())
    return all(t.device.type == "cpu" for t in tensors)


def repro_warm_config(spec: Any) -> dict[str, Any] | None:
    """The Inductor config a repro interpreter warms Inductor's C++ toolchain under: the user's, as
    the repro sets it before its compile (``cpp.vec_isa_ok``, the compiler and its flags decide
    which CPU ISAs Inductor finds, an answer cached per process from its first call). None where a
    ``cpp.*`` key cannot be written into the repro: its interpreter must not ask first."""
    if any(str(key).startswith("cpp.") for key in spec.unrenderable_config):
        return None
    config = {**spec.inductor_config, **spec.compile_options}
    try:
        return config if ast.literal_eval(repr(config)) == config else None
    except (ValueError, SyntaxError):
        return None


def bisect_file(model_path: str | Path, options: EngineOptions = EngineOptions(),
                output: OutputOptions = OutputOptions(), progress: Progress | None = None,
                device: str | None = None, started_at: float | None = None) -> dict[str, Any]:
    """Run the whole pipeline on a model file; write ``OUT/report.json`` and the repro.

    ``device``: run the model there (its parameters, inputs and batches moved), e.g. ``"cuda"``.
    ``started_at``: ``time.monotonic()`` when the run began (``--timeout`` counts from there).
    """
    started_at = started_at if started_at is not None else time.monotonic()
    return bisect_spec(load_model_spec(model_path, device), options, output, progress, started_at)


def bisect_spec(spec: ModelSpec, options: EngineOptions = EngineOptions(), output: OutputOptions = OutputOptions(),
                progress: Progress | None = None, started_at: float | None = None) -> dict[str, Any]:
    """Run the whole pipeline on a loaded :class:`ModelSpec` (a model file's, or live objects':
    ``bisect_engine.check``); write ``OUT/report.json`` and the repro; return the report."""
    progress = progress or Progress(enabled=False)
    search = run_search(options, progress, started_at if started_at is not None else time.monotonic())
    # refused only what eager's own step cannot fit (its peak from a run of the user's step on fake
    # tensors, before anything is written: interrupted there, the report says so all the same)
    try:
        spec = dataclasses.replace(spec, step_bytes=eager_step_bytes(spec.model, spec.inputs, spec.loss_fn))
    except Interrupted as interrupt:
        with OutputFolder(output.out_dir, output.force) as folder:
            _write_interrupted(folder, spec, interrupt, "admission")
        raise
    check_memory(spec.model, spec.inputs, budget=options.memory_budget_bytes, step=spec.step_bytes)
    with_repro = options.stop_after == "repro"
    cpu = on_cpu(spec)
    interpreters = Interpreters(output.verify_runs if with_repro else 0, warm_config=repro_warm_config(spec) if cpu else None)
    versions = Versions()  # collect_env for the bug report, started with the interpreters

    def on_divergence() -> None:  # a finding is likely: what output needs starts while the search goes on
        interpreters.start()
        versions.start()

    require = judge_of(search).compiler.budget.require  # a step that cannot fit even with values on disk stops the run
    with OutputFolder(output.out_dir, output.force) as folder, recording_trace(folder, output.trace), \
            offload.using(_offload_policy(folder, options.memory_budget_bytes, require)):
        try:
            engine = run_scanned if spec.get_batches else run
            try:
                with user_compile_options(spec):  # the user's mode= / options=, in every compile we make
                    if cpu:  # Inductor's ISA detection beside the capture, not inside the first compile
                        warm_cpu_isa()
                    try:
                        result = engine(spec, options, search, on_divergence=on_divergence)
                    finally:
                        close_workers(search)
                    result, inputs = _repro_inputs(result, output, with_repro)
            except Interrupted as interrupt:  # before the engine had a result (loading, capture, a scan)
                _write_interrupted(folder, spec, interrupt, search.stage)
                raise
            remaining = None if options.timeout_s is None else options.timeout_s - search.elapsed_s
            report = write_outputs(result, output, folder, with_repro, progress, interpreters, remaining, inputs,
                                   versions)
            if result.interrupted:
                raise Interrupted(result.interrupted["signum"], result.interrupted["signal"])
            return report
        except BaseException:
            interpreters.kill()
            raise
        finally:
            interpreters.close()
            versions.close()
            progress.close()


def _write_interrupted(folder: OutputFolder, spec: ModelSpec, interrupt: Interrupted, stage: str) -> None:
    """The report of a run a signal stopped before the engine had a result: the signal and the stage."""
    report = bare_report(spec.path, "interrupted")
    report["interrupted"] = {"signal": interrupt.name, "signum": interrupt.signum, "stage": stage}
    write_report_and_views(folder, report)


def _offload_policy(folder: OutputFolder, budget: int | None,
                    require: Callable[[int, str], None]) -> offload.Offload:
    """Values wait on disk only when memory asks (``--memory-budget``, the machine's free memory),
    in the output folder's private scratch; the system's temporary folder where the output folder
    cannot take one or is itself in memory."""
    scratch = folder.scratch()
    if scratch is not None and offload.scratch_on_disk(str(scratch)):
        return run_offload(budget, str(scratch), require=require)
    why = "the output folder cannot take a scratch folder" if scratch is None else "the output folder is in memory"
    return run_offload(budget, None, why, require)


def _repro_inputs(result: RunResult, output: OutputOptions, with_repro: bool) -> tuple[RunResult, ReproInputs]:
    """--random-inputs: whether the finding reproduces on random draws (one compile, before
    anything is written); an interrupt here ends the run as one during the search would."""
    if not (output.random_inputs and with_repro) or result.interrupted:
        return result, REAL
    try:
        return result, checked_random_inputs(result)
    except Interrupted as interrupt:
        interrupted = {"signal": interrupt.name, "signum": interrupt.signum, "stage": "repro"}
        return dataclasses.replace(result, interrupted=interrupted), REAL


def record_environment(model_path: str | Path, out_dir: Path, value_cap: int, device: str | None = None,
                       force: bool = False, script_args: tuple[str, ...] = ()) -> dict[str, Any]:
    """``bisect-accuracy record``: the environment bundle of a model file, or of the graphs a plain
    script compiles (run once, with ``script_args``; see script/env_script.py), written through the
    output folder's checks (locked, vetted, probed before the work; atomic)."""
    from .localise.env_record import record
    from .output.folder import ENVIRONMENT_NAMES
    from .script.env_script import record_script

    script = _script_or_model(Path(model_path), script_args, device)
    if script:
        with _left_empty_removed(Path(out_dir)):
            with OutputFolder(Path(out_dir), force, names=ENVIRONMENT_NAMES) as folder:  # vetted before the script runs
                return record_script(Path(model_path), script_args, folder.write_bytes, value_cap)
    spec = load_model_spec(model_path, device)
    with OutputFolder(Path(out_dir), force, names=ENVIRONMENT_NAMES) as folder:
        return record(spec, folder.write_bytes, value_cap, device=device or "cpu")


@contextlib.contextmanager
def _left_empty_removed(out_dir: Path) -> Iterator[None]:
    """A folder this command created and wrote nothing into (the script failed, or compiled
    nothing) is removed: never a silent empty bundle."""
    from .output.folder import LOCK_FILE, MANIFEST_FILE

    created = not out_dir.exists() and not out_dir.is_symlink()
    try:
        yield
    except BaseException:
        if created and out_dir.is_dir() and {p.name for p in out_dir.iterdir()} <= {LOCK_FILE, MANIFEST_FILE}:
            for name in (LOCK_FILE, MANIFEST_FILE):
                (out_dir / name).unlink(missing_ok=True)
            out_dir.rmdir()
        raise


def _script_or_model(path: Path, script_args: tuple[str, ...], device: str | None) -> bool:
    """Whether ``path`` is a plain script (script mode); arguments and --device refused where they
    do not apply, in one line."""
    from .errors import UsageError
    from .load.contract import defines_model_contract

    if not path.is_file():
        raise UsageError(f"no such model file or script: {path}")
    script = not defines_model_contract(path)
    if script and device:
        raise UsageError("--device is for model files; a plain script places its own tensors")
    if not script and script_args:
        raise UsageError(f"{path.name} is a model file: the arguments {' '.join(script_args)!r} are only for "
                         "plain scripts")
    return script


def compare_environment(bundle_path: Path, out_dir: Path | None, model_path: Path | None = None,
                        settings: tuple[str, ...] = (), device: str | None = None,
                        force: bool = False) -> tuple[Any, list[str]]:
    """``bisect-accuracy compare``: the comparison with the bundle's environment, and the summary
    lines (files written to ``out_dir`` when given, through the output folder's checks)."""
    from .load.bundle import read_bundle
    from .localise.env_settings import applied, parse_settings
    from .localise.environments import check_model, compare
    from .output.env_report import check_out_dir, summary_lines, write_comparison
    from .output.folder import ENVIRONMENT_NAMES
    from .script.env_script import compare_script

    bundle = read_bundle(bundle_path)
    model = Path(model_path or bundle.manifest["model"].get("path", "")).resolve()
    check_model(bundle, model)
    script = _script_or_model(model, (), device)
    flips = parse_settings(settings)
    with contextlib.ExitStack() as stack:
        folder = None
        if out_dir is not None:
            check_out_dir(Path(out_dir), bundle)
            stack.enter_context(_left_empty_removed(Path(out_dir)))  # the script failed here: no empty folder
            folder = stack.enter_context(OutputFolder(Path(out_dir), force, names=ENVIRONMENT_NAMES))
        notes: list[str] = []
        with applied(flips):
            if script:
                comparison, repros, notes = compare_script(bundle, model)
            else:
                comparison, repros = compare(bundle, load_model_spec(model, device), device=device or "cpu")
        lines = notes + summary_lines(comparison)
        if folder is not None:
            lines += [f"wrote {path}" for path in write_comparison(folder, comparison, repros, bundle)]
    return comparison, lines


def determinism_file(model_path: str | Path, out_dir: Path, device: str | None = None, force: bool = False,
                     seed: int = 0, verify: bool = True, runs: int | None = None) -> dict[str, Any]:
    """``bisect-accuracy run MODEL --question determinism``: every captured graph run several times
    on the same inputs, eager and compiled; the first op whose own values change run to run named
    with its side, and its repro written (and run in a fresh interpreter when ``verify``)."""
    from .localise.env_record import capture_graphs
    import torch._inductor.config as inductor_config

    started = time.monotonic()
    spec = load_model_spec(model_path, device)

    def checking() -> Any:
        return _both(inductor_config.patch({**spec.inductor_config}), user_compile_options(spec))

    return _determinism(lambda: capture_graphs(spec, seed), checking, {}, out_dir, force, seed, verify, runs, started)


def determinism_script(script: Path, argv: tuple[str, ...], out_dir: Path, force: bool = False, seed: int = 0,
                       verify: bool = True, runs: int | None = None) -> dict[str, Any]:
    """``bisect-accuracy run SCRIPT --question determinism``: the script run once, unmodified, with
    the first call of each graph it compiles captured (``script/env_script.run_capturing``, as
    ``record`` does), then each graph judged as a model file's are (:func:`determinism_file`),
    under the Inductor options the script compiled it with."""
    from .script.env_script import run_capturing

    started = time.monotonic()
    graphs = run_capturing(script, argv)
    return _determinism(lambda: graphs.captured, contextlib.nullcontext, graphs.patches, out_dir, force, seed,
                        verify, runs, started, graphs.not_recorded)


@contextlib.contextmanager
def _both(first: Any, second: Any) -> Iterator[None]:
    with first, second:
        yield


def _determinism(graphs: Any, checking: Any, patches: dict[str, dict[str, Any]], out_dir: Path, force: bool,
                 seed: int, verify: bool, runs: int | None, started: float,
                 not_recorded: list[str] | None = None) -> dict[str, Any]:
    """The determinism question over captured ``graphs`` (a callable: captured inside ``checking()``,
    the context each graph is checked under; ``patches``: a graph's own Inductor options by name)."""
    from .localise.determinism import RUNS, check_graph
    from .output.report import SCHEMA_VERSION
    from .output.determinism import determinism_key, first_finding, run_repro, verdict_of, write_repro
    from .verdict.compiler import Compiler
    from .verdict.judgement import Oracle
    from .verdict.oracle import GraphContext
    import torch._inductor.config as inductor_config

    with OutputFolder(Path(out_dir), force) as folder:
        compiler, checked, contexts = Compiler(), [], {}
        with checking():
            for graph in graphs():
                contexts[graph.name] = GraphContext.from_captured(graph, Oracle(seed=seed))
                with inductor_config.patch(patches.get(graph.name, {})):
                    checked.append(check_graph(contexts[graph.name], compiler, runs or RUNS))
        repro = None
        first = first_finding(checked)
        if first is not None:
            context, op = contexts[first[0].name], first[1]
            node = context.view.nodes[op.node]
            path = write_repro(folder, first[0].name, op, node,
                               {source.name: context.eager_values[source.name] for source in node.all_input_nodes})
            repro = run_repro(path) if verify else {"path": str(path), "exit_code": None, "output": "not run",
                                                     "seconds": 0.0}
        verdict = verdict_of(checked)
        if not_recorded and verdict == "clean":  # a graph the script compiled and we did not check
            verdict = "incomplete"
        report = {"schema": SCHEMA_VERSION, "verdict": verdict, "question": "determinism",
                  "determinism": determinism_key(checked, repro, time.monotonic() - started),
                  "not_checked": [f"{g.name}: {g.error}" for g in checked if g.error] + list(not_recorded or []),
                  "stats": {"compiles": compiler.compiles}}
        return folder.write_report(report)
