"""The command line: parse options, call the API, print a summary, map errors to exit codes.

Exit status: 0 clean, 1 divergence / NaN / crash found, 2 usage or input error, 3 internal error,
4 no verdict (the budget ran out before every graph was judged). ``bisect-accuracy report OUT``
re-renders ``report.html`` and ``bug_report.md`` from ``OUT/report.json`` (0, or 2 when it is
missing or not a report).
Script mode (a file without get_model/get_inputs): when nothing diverges, the script's own status.
"""
from __future__ import annotations

import logging
import os
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any
from typing import TYPE_CHECKING

import click

from .verdicts import FINDINGS

if TYPE_CHECKING:
    from .script.levels import ScriptSettings

EXIT_CLEAN, EXIT_FOUND, EXIT_USAGE, EXIT_INTERNAL, EXIT_INCOMPLETE = 0, 1, 2, 3, 4


def _print_version(context: click.Context, _param: click.Parameter, value: bool) -> None:
    """``--version``: this package's version and the torch it runs with (read without importing torch)."""
    if not value or context.resilient_parsing:
        return
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    click.echo(f"bisect-accuracy {installed('bisect-accuracy')} (torch {installed('torch')})")
    context.exit(EXIT_CLEAN)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print the version (and torch's) and exit.")
def main() -> None:
    """Find the op that makes torch.compile (Inductor) disagree with eager, or make NaN/Inf."""
    _isolate_from_hook()


def _isolate_from_hook() -> None:
    """This process runs its own session: neither it nor its subprocesses (repro verification,
    the script's children) start the environment-variable hook."""
    from . import autostart
    from .script.levels import clear_environment

    autostart.stand_down()
    clear_environment(os.environ)


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("model_file", type=click.Path(path_type=Path))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("bisect-accuracy-out"), show_default=True, help="Folder for report.json and the repro.")
@click.option("--max-compiles", type=click.IntRange(min=1), default=None, help="Stop searching after N Inductor compiles.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0), default=None, help="Stop searching after S seconds.")
@click.option("--seed", type=int, default=0, show_default=True, help="torch.manual_seed before capture.")
@click.option("--stage", type=click.Choice(["localise", "subsystem", "repro"]), default="repro", show_default=True,
              help="Stop after localising the op, after naming the Inductor subsystem, or after the verified repro.")
@click.option("--rng", type=click.Choice(["data", "strict"]), default="data", show_default=True,
              help="data: random draws are recorded and fed to both sides (dropout is not a divergence); "
                   "strict: compiled random ops must reproduce eager's draws under the same seed.")
@click.option("--oracle", type=click.Choice(["outputs", "strict", "eager", "bitwise"]), default="outputs",
              show_default=True,
              help="outputs: name first the wrong op whose error reaches a model output (a loss, a logit, a "
                   "gradient); every other wrong op is listed too. strict: name the first wrong op in graph "
                   "order, and judge every node even when the outputs agree, as the minifier's strict accuracy "
                   "does. eager: eager's values are the reference "
                   "(compiled closer to fp64 but beyond rounding noise from eager is a finding). bitwise: "
                   "every node must equal eager's exactly.")
@click.option("--verify-runs", type=click.IntRange(min=0), default=3, show_default=True,
              help="Run the emitted repro this many times in fresh processes (0: do not verify).")
@click.option("--random-inputs", is_flag=True,
              help="The repro draws its inputs at random (shape, dtype, statistics) instead of embedding the "
                   "real ones, only if that was checked to still reproduce.")
@click.option("--device", default=None,
              help="Model files: move the model, its inputs and batches to this torch device first "
                   "(e.g. cuda) [default: where get_model()/get_inputs() put them].")
@click.option("--level", type=click.IntRange(1, 4), default=None,
              help="Script mode: 1 record graphs, 2 check, 3 localise, 4 repro "
                   "[default: 4, or 3 with --stage localise/subsystem].")
@click.option("--check-every", type=click.IntRange(min=0), default=0, show_default=True,
              help="Script mode: check each graph's first call, then every N-th call (0: the first only).")
@click.option("--stop-on-divergence", is_flag=True,
              help="Script mode: end the program at its first divergence (exit status 1).")
@click.option("--trace", "trace", is_flag=True,
              help="Keep torch's structured trace of the run in OUT/trace/ (open it with tlparse), with the "
                   "report and each finding as bisect_accuracy_* artifacts under their graph's compile id. "
                   "With TORCH_TRACE set they go there too.")
@click.option("--force", is_flag=True,
              help="Use an output folder that holds files named like ours which this tool did not write "
                   "(they are moved to OUT/previous/<n>, never overwritten; a folder this tool did not write "
                   "is never moved: the run is refused).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar; only the summary.")
@click.option("--verbose", "-v", is_flag=True, help="Log each step and its duration to stderr.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Model files: worker processes that compile independent candidates at once (subsystem "
                   "switches); the report is the same for any number. 1: everything in this process "
                   "[default: one per two CPUs, at most 8; 1 on a 2-core machine].")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Several model files (or a folder): models run at once [default: half the CPUs, at least 1].")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Several model files: a local pool of --jobs processes, or Ray tasks "
                   "(pip install 'bisect-accuracy[ray]').")
@click.option("--ray-address", default=None,
              help="With --executor ray: the cluster to join [default: ray.init() starts a local one].")
@click.option("--question", type=click.Choice(["accuracy", "determinism"]), default="accuracy", show_default=True,
              help="Model files and scripts: accuracy (compiled vs eager) or determinism (which op makes two identical runs "
                   "differ, eager or compiled; OUT/determinism/repro.py exits 1 when its two runs differ).")
@click.option("--memory-budget", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Model files: GiB of memory this run may hold (values on disk do not count); past it the run stops with what it learned "
                   "(exit 4); values that wait go to disk only when they would pass it [default: stop when the "
                   "machine has less than 5 percent of its memory left, 0.5-2 GiB; values that wait always go to disk].")
def run(**options: Any) -> None:
    """Bisect MODEL_FILE (defining get_model() and get_inputs()), or run a plain script with
    SCRIPT_ARGS, every torch.compile checked against eager (see README: script mode). Put the
    script's own options after `--` when they share a name with ours."""
    try:
        _run_command(**options)
    except KeyboardInterrupt:  # Ctrl-C before the run's own handler (while torch imports): as later
        click.echo("bisect-accuracy: interrupted", err=True)
        sys.exit(130)


def _run_command(model_file: Path, script_args: tuple[str, ...], out_dir: Path, max_compiles: int | None,
                 timeout_s: float | None, seed: int, stage: str, rng: str, oracle: str, verify_runs: int,
                 random_inputs: bool, device: str | None, level: int | None, check_every: int,
                 stop_on_divergence: bool, trace: bool, force: bool, quiet: bool, verbose: bool,
                 workers: int | None, jobs: int | None, executor: str, ray_address: str | None,
                 memory_budget: float | None = None, question: str = "accuracy") -> None:
    from .script.levels import SCRIPT_ORACLES, Level, ScriptSettings, stage_for
    from .load.contract import defines_model_contract

    context = click.get_current_context()
    if _several_models(model_file, script_args):
        sys.exit(_run_many([model_file, *map(Path, script_args)], context, out_dir, jobs, executor, ray_address))
    _refuse_typed(context, MANY_ONLY, "several model files or a folder")
    if not model_file.is_file():
        click.echo(f"bisect-accuracy: error: no such model file or script: {model_file}", err=True)
        sys.exit(EXIT_USAGE)
    if not defines_model_contract(model_file):
        if device is not None:
            click.echo("bisect-accuracy: error: --device is for model files; a plain script places its own "
                       "tensors", err=True)
            sys.exit(EXIT_USAGE)
        refused = {k: v for k, v in MODEL_FILE_ONLY.items()
                   if (k != "oracle" or oracle not in SCRIPT_ORACLES) and k != "question"}
        _refuse_typed(context, refused, "model files; script mode judges each compiled call by its own rule "
                      "(outputs vs eager and fp64, the program's own random draws and seed, real inputs; "
                      "--oracle bitwise is honoured)")
        chosen = Level(level) if level else (Level.REPRO if stage == "repro" else Level.LOCALISE)
        settings = ScriptSettings(level=chosen, out_dir=out_dir, check_every=check_every,
                                  stop_on_divergence=stop_on_divergence, verify_runs=verify_runs,
                                  stage=stage_for(chosen, stage), max_compiles=max_compiles, timeout_s=timeout_s,
                                  force=force, trace=trace, oracle=oracle)
        if question == "determinism":
            sys.exit(_run_determinism(model_file, out_dir, None, force, 0, quiet, script_args))
        sys.exit(_run_script(model_file, script_args, settings, quiet, verbose))
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(name)s: %(message)s")
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    if script_args:
        click.echo(f"bisect-accuracy: error: {model_file.name} is a model file; extra arguments "
                   f"{' '.join(script_args)!r} are only for plain scripts", err=True)
        sys.exit(EXIT_USAGE)
    from .errors import UsageError
    from .verdict.inductor_adapter import check_cache_dir

    try:
        check_cache_dir()  # before anything imports Inductor, which creates its cache folder on import
    except UsageError as error:
        click.echo(f"bisect-accuracy: error: {error}", err=True)
        sys.exit(EXIT_USAGE)
    if question == "determinism":
        sys.exit(_run_determinism(model_file, out_dir, device, force, seed, quiet))
    from .localise.options import EngineOptions
    from .localise.workers import default_workers
    from .output.writer import OutputOptions

    options = EngineOptions(max_compiles=max_compiles, timeout_s=timeout_s, seed=seed, rng=rng,  # type: ignore[arg-type]
                            stop_after=stage, oracle=oracle, workers=workers or default_workers(),  # type: ignore[arg-type]
                            memory_budget_bytes=None if memory_budget is None else int(memory_budget * 2**30))
    output = OutputOptions(out_dir=out_dir, verify_runs=verify_runs, random_inputs=random_inputs, force=force,
                           trace=trace)
    sys.exit(_run_model_file(model_file, options, output, quiet, device))


# Options script mode does not honour: given on the command line for a plain script, they are refused
# (exit 2) rather than silently ignored.
MODEL_FILE_ONLY = {"memory_budget": "--memory-budget", "question": "--question",
                   "oracle": "--oracle", "rng": "--rng", "seed": "--seed", "random_inputs": "--random-inputs",
                   "workers": "--workers"}


# Options of a run over several model files (or a folder); the rest are passed on to each model's run.
MANY_ONLY = {"jobs": "--jobs", "executor": "--executor", "ray_address": "--ray-address"}


def _refuse_typed(context: click.Context, options: dict[str, str], meant_for: str) -> None:
    """Exit 2 with one line when the user typed any of ``options`` (name -> flag) where they do not apply."""
    given = [flag for name, flag in options.items() if name in _typed(context)]
    if given:
        click.echo(f"bisect-accuracy: error: {', '.join(given)} {'is' if len(given) == 1 else 'are'} for {meant_for}",
                   err=True)
        sys.exit(EXIT_USAGE)


def _typed(context: click.Context) -> list[str]:
    """The parameters the user typed (not their defaults), in declaration order."""
    typed = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)
    return [p.name for p in context.command.params if p.name and context.get_parameter_source(p.name) in typed]


def _several_models(model_file: Path, script_args: tuple[str, ...]) -> bool:
    """A folder, or a model file followed only by model files and folders (a model file takes no
    script arguments, so this reading was an error before)."""
    from .load.contract import defines_model_contract

    if model_file.is_dir():
        return True
    if not script_args or not model_file.is_file() or not defines_model_contract(model_file):
        return False
    return all(Path(a).is_dir() or (Path(a).is_file() and a.endswith(".py")) for a in script_args)


def _run_many(paths: list[Path], context: click.Context, out_dir: Path, jobs: int | None, executor: str,
              ray_address: str | None) -> int:
    """Each model through its own run (``bisect_engine.many``); one table; the worst status."""
    from .errors import UsageError
    from .many import exit_code, model_files, run_many, table

    passed_on = _passed_on(context)
    jobs = jobs or max(1, (os.cpu_count() or 2) // 2)
    if "workers" not in _typed(context):  # the CPUs are shared by the runs at once (localise/workers.py's default)
        passed_on += ["--workers", str(max(1, min((os.cpu_count() or 1) // 2, 8) // jobs))]
    try:
        models = model_files(paths)
        runs = run_many(models, out_dir, passed_on, executor, jobs, ray_address)
    except UsageError as error:
        click.echo(f"bisect-accuracy: error: {error}", err=True)
        return EXIT_USAGE
    click.echo(table(runs))
    click.echo(f"  summary: {out_dir / 'summary.json'}")
    return exit_code(runs)


def _passed_on(context: click.Context) -> list[str]:
    """The options the user typed, as arguments for each model's own run."""
    keep_out = {"model_file", "script_args", "out_dir", "quiet", *MANY_ONLY}
    typed = set(_typed(context))
    arguments: list[str] = []
    for param in context.command.params:
        if param.name in keep_out or param.name not in typed or not isinstance(param, click.Option):
            continue
        flag = max(param.opts, key=len)
        value = context.params[param.name]
        arguments += [flag] if param.is_flag else [flag, str(value)]
    return arguments


def _run_model_file(model_file: Path, options: Any, output: Any, quiet: bool, device: str | None = None) -> int:
    from .interrupts import shut_down_compile_workers, signals_interrupt
    from .load.memory import return_freed_memory

    global _FAST_EXIT
    _FAST_EXIT = True
    if options.memory_budget_bytes is None:
        # Without --memory-budget the run keeps near 3x eager's peak: values let go leave the process
        # (our own process: the CLI's run). With one, it may use memory up to it: freed blocks are
        # reused, not handed back and faulted in again (GPT-2 small's clean step: 208 s, not 299).
        return_freed_memory()
    out_dir = output.out_dir
    with signals_interrupt(deadline=watchdog_deadline(options.timeout_s)):
        try:
            from .api import bisect_file
            from .output.summary import summary
            from .progress import Progress

            report = bisect_file(model_file, options, output, Progress(enabled=not quiet), device, _STARTED)
        except BaseException as error:
            return _model_file_error(error, out_dir, model_file)
        finally:
            shut_down_compile_workers()
    click.echo(summary(report))
    for reason in report.get("not_written") or []:  # a full disk at the end: the verdict above still stands
        click.echo(f"  NOT WRITTEN: {reason}")
    click.echo(f"  report:  {report['report_path']}" + ("  (may be missing or older: see NOT WRITTEN)"
                                                       if report.get("not_written") else ""))
    return model_file_status(report)


def _run_determinism(model_file: Path, out_dir: Path, device: str | None, force: bool, seed: int,
                     quiet: bool, script_args: tuple[str, ...] | None = None) -> int:
    """``--question determinism``: its report, its summary lines, exit 0 (runs equal), 1 (runs
    differ), 4 (a graph not checked). ``script_args`` (a plain script, run once with its graphs
    captured): the script's arguments."""
    from .api import determinism_file, determinism_script
    from .output.determinism import summary_lines

    if script_args is not None:
        from .verdict.inductor_adapter import check_cache_dir

        _guarded(check_cache_dir)  # before the script imports Inductor
        report = _guarded(lambda: determinism_script(model_file, script_args, out_dir, force))
    else:
        report = _guarded(lambda: determinism_file(model_file, out_dir, device, force, seed))
    for line in summary_lines(report):
        click.echo(line)
    click.echo(f"  report:  {report['report_path']}")
    return exit_status(report["verdict"])


def model_file_status(report: dict[str, Any]) -> int:
    """The exit status of a finished model-file run: NaN/Inf fed in by the inputs is an input
    problem (exit 2, no bug report), never a compiler finding."""
    from .output.bug_report import is_input_problem

    if is_input_problem(report):
        click.echo("bisect-accuracy: error: the model's inputs hold NaN/Inf (see 'input:' above): an input "
                   "problem, not a compiler bug; no bug report written", err=True)
        return EXIT_USAGE
    return exit_status(report["verdict"])


def watchdog_deadline(timeout_s: float | None) -> float | None:
    """When --timeout's watchdog stops a call that never returns: the timeout and a grace (the
    budget's own checks stop a run that returns in time, with its verdict so far; the repro's
    verification is given at least 30 s past the budget, so the grace is longer)."""
    return None if timeout_s is None else _STARTED + timeout_s + max(35.0, 0.1 * timeout_s)


def _model_file_error(error: BaseException, out_dir: Path, model_file: Path | None = None) -> int:
    """The one-line message and exit status of a model-file run that ended by an exception."""
    from .errors import BisectError, Interrupted, UsageError
    from .output.folder import OutputError

    if isinstance(error, BisectError) and not isinstance(error, OutputError) and model_file is not None:
        _error_report(out_dir, model_file, str(error))

    if isinstance(error, Interrupted):
        report = out_dir / "report.json"
        where = f"; what was learned is in {report}" if report.is_file() else ""
        if error.name == "timeout":
            stage = _stage_of(report)
            click.echo(f"bisect-accuracy: --timeout reached: a call into the model did not return (stage: {stage}); "
                       f"stopped with no verdict{where}", err=True)
            return error.exit_code
        click.echo(f"bisect-accuracy: interrupted by {error.name}{where}", err=True)
        return error.exit_code
    if isinstance(error, KeyboardInterrupt):  # raised before our handler was installed
        click.echo("bisect-accuracy: interrupted", err=True)
        return 130
    if isinstance(error, SystemExit):  # the model's own code called sys.exit while we ran it
        message = (f"the model called sys.exit({error.code!r}) while being run: the run ended early, nothing "
                   "after that call was checked")
        if model_file is not None:
            _error_report(out_dir, model_file, message)
        click.echo(f"bisect-accuracy: error: {message}", err=True)
        return EXIT_USAGE
    if isinstance(error, UsageError):
        click.echo(f"bisect-accuracy: error: {error}", err=True)
        return EXIT_USAGE
    if isinstance(error, BisectError):
        click.echo(f"bisect-accuracy: {error}", err=True)
        return EXIT_USAGE
    return _internal_error(out_dir, error)


def _error_report(out_dir: Path, model_file: Path | None, message: str, kind: str = "usage",
                  log: bytes | None = None) -> bool:
    """A usage error (exit 2) or an internal error (exit 3) leaves a report too when the output
    folder is usable (a usage error: when it already exists; verdict ``error``, every other key
    null), and the internal error's
    traceback as a file the manifest lists; an unusable (or busy) folder is left alone."""
    from .output.folder import OutputError, OutputFolder

    status = EXIT_USAGE if kind == "usage" else EXIT_INTERNAL
    if kind == "usage" and not out_dir.is_dir():
        return False  # a usage error never creates the folder
    try:
        with OutputFolder(out_dir) as folder:
            if log is not None:
                folder.write_bytes("internal-error.log", log)
            folder.write_report({"schema": 1, "verdict": "error", "model": str(model_file) if model_file else None,
                                 "error": {"kind": kind, "message": message, "exit_status": status}})
        return True
    except OutputError:
        return False


def _stage_of(report: Path) -> str:
    import json

    try:
        return str((json.loads(report.read_text()).get("interrupted") or {}).get("stage") or "?")
    except (OSError, ValueError):
        return "?"


def exit_status(verdict: str) -> int:
    return {"clean": EXIT_CLEAN, "incomplete": EXIT_INCOMPLETE, "interrupted": 130}.get(verdict, EXIT_FOUND)


def _run_script(script: Path, script_args: tuple[str, ...], settings: ScriptSettings, quiet: bool,
                verbose: bool) -> int:
    """Script mode. Everything the tool says goes to stderr (the script owns stdout); neither torch
    nor the root logger is touched before the script runs (it sets them up as it would alone).
    The output folder is taken before the script starts; the script's own Ctrl-C stays its own
    (its traceback, exit 130); SIGTERM ends it with a report (exit 143)."""
    from .errors import UsageError
    from .interrupts import shut_down_compile_workers, signals_interrupt
    from .output.folder import OutputFolder
    from .progress import Progress
    from .script.messages import log_to_stderr
    from .script.ranks import rank_dir, rank_from_environment
    from .script.runner import run_script

    log_to_stderr(logging.INFO if verbose else logging.WARNING)
    try:
        folder = OutputFolder(rank_dir(settings.out_dir.absolute(), rank_from_environment()), settings.force).open()
    except UsageError as error:
        click.echo(f"bisect-accuracy: error: {error}", err=True)
        return EXIT_USAGE
    progress = Progress(enabled=not quiet)
    try:
        with signals_interrupt(sigint=False):
            outcome = run_script(script, script_args, settings, progress, folder)
    except Exception as error:
        return _internal_error(settings.out_dir, error)
    finally:
        progress.close()
        folder.close()
        shut_down_compile_workers()
    from .script.session import script_summary

    sys.stdout.flush()
    if outcome.message:
        sys.stderr.write(outcome.message if outcome.message.endswith("\n") else outcome.message + "\n")
    click.echo(script_summary(outcome.report), err=True)
    return _script_status(outcome)


def _script_status(outcome: Any) -> int:
    script = outcome.report["script"]
    if outcome.internal_error:
        return EXIT_INTERNAL
    if outcome.stopped or outcome.report["verdict"] in FINDINGS:
        return EXIT_FOUND
    if outcome.interrupted:
        return outcome.exit_code
    if script["graphs_compiled"] == 0 and script.get("aot_inductor"):
        # Inductor did compile: never "compiled nothing", never clean; not checked (exit 4)
        from .script.messages import AOTI_NOT_CHECKED
        click.echo(f"bisect-accuracy: {AOTI_NOT_CHECKED}", err=True)
        return EXIT_INCOMPLETE if outcome.exit_code == 0 else outcome.exit_code
    if outcome.report["verdict"] == "incomplete":
        # a graph whose checked calls compared nothing: no verdict on it (a failing script's own status first)
        return EXIT_INCOMPLETE if outcome.exit_code == 0 else outcome.exit_code
    if script["graphs_compiled"] == 0:
        # Nothing checked is never a pass: a script that succeeded without compiling is a usage
        # error; one that failed keeps its own status (its failure comes first).
        click.echo("bisect-accuracy: " + ("error: " if outcome.exit_code == 0 else "note: ")
                   + "the script compiled nothing (no torch.compile, nn.Module.compile or torch._dynamo.optimize "
                   "call ran): nothing was checked", err=True)
        return EXIT_USAGE if outcome.exit_code == 0 else outcome.exit_code
    if script["exit_code_collides"]:
        click.echo(f"bisect-accuracy: note: exit status {outcome.exit_code} is the script's own (report.json "
                   f"script.exit_code; script.internal_error is null: this tool did not fail)", err=True)
    return outcome.exit_code


def _internal_error(out_dir: Path, error: BaseException) -> int:
    from .output.folder import OutputError, write_atomically

    log_path = out_dir / "internal-error.log"
    log = "".join(traceback.format_exception(error)).encode()
    try:
        if not _error_report(out_dir, None, f"{type(error).__name__}: {error}", "internal", log):
            write_atomically(log_path, log)
        where = f"traceback written to {log_path}"
    except OutputError as write_error:
        where = f"no traceback written ({write_error})"
    click.echo(f"bisect-accuracy: internal error: {type(error).__name__}: {error}\n  {where}", err=True)
    return EXIT_INTERNAL


@main.command("report")
@click.argument("out_dir", type=click.Path(path_type=Path))
def report_command(out_dir: Path) -> None:
    """Re-render OUT/report.html (and, for a finding, OUT/bug_report.md) from OUT/report.json."""
    from .errors import UsageError
    from .output.views import rerender

    try:
        written = rerender(out_dir)
    except UsageError as error:
        click.echo(f"bisect-accuracy: error: {error}", err=True)
        sys.exit(EXIT_USAGE)
    for path in written:
        click.echo(f"bisect-accuracy: wrote {path}")
    from .output.integrity import EDITED, repro_edited
    from .output.views import load_report

    if repro_edited(load_report(out_dir), out_dir):
        click.echo(f"bisect-accuracy: note: {out_dir / 'repro.py'} was {EDITED}: the recorded verification is "
                   "not claimed for it", err=True)


@main.command("install-hook")
def install_hook_command() -> None:
    """Install the start-up hook into this interpreter's site-packages, so that
    BISECT_ACCURACY_LEVEL=<n> python train.py works (it does nothing while the variable is unset)."""
    from .script.hook import install_hook

    try:
        path = install_hook()
    except OSError as error:
        click.echo(f"bisect-accuracy: error: cannot write the hook: {error}", err=True)
        sys.exit(EXIT_USAGE)
    click.echo(f"bisect-accuracy: start-up hook installed: {path}")


@main.command("uninstall-hook")
def uninstall_hook_command() -> None:
    """Remove the start-up hook from this interpreter's site-packages."""
    from .script.hook import uninstall_hook

    try:
        path = uninstall_hook()
    except OSError as error:
        click.echo(f"bisect-accuracy: error: cannot remove the hook: {error}", err=True)
        sys.exit(EXIT_USAGE)
    click.echo(f"bisect-accuracy: start-up hook removed: {path}" if path
               else "bisect-accuracy: no start-up hook installed")


@main.command("record", context_settings={"ignore_unknown_options": True})
@click.argument("model_file", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="The bundle folder to write (manifest.json, values.pt).")
@click.option("--value-cap", type=click.IntRange(min=0), default=1_000_000, show_default=True,
              help="Tensors with more elements are recorded as digests only.")
@click.option("--device", default=None, help="Run the model there (e.g. cuda).")
@click.option("--force", is_flag=True,
              help="Use an --out folder holding files named like ours that this tool did not write (moved to "
                   "OUT/previous/<n>, never overwritten; a folder this tool did not write is never moved).")
def record_command(model_file: Path, script_args: tuple[str, ...], out_dir: Path, value_cap: int,
                   device: str | None, force: bool) -> None:
    """Record what this environment computes for every op of MODEL_FILE (for `compare` elsewhere),
    or of the graphs a plain script compiles (run once with SCRIPT_ARGS; put its own options after `--`)."""
    from .api import record_environment

    manifest = _guarded(lambda: record_environment(model_file, out_dir, value_cap, device, force, script_args))
    nodes = sum(len(g["nodes"]) for g in manifest["graphs"])
    for line in manifest["settings"].get("graphs_not_recorded", []):
        click.echo(f"bisect-accuracy: not recorded: {line}")
    click.echo(f"bisect-accuracy: recorded {len(manifest['graphs'])} graph(s), {nodes} ops, "
               f"torch {manifest['environment']['torch']}: {out_dir}")


@main.command("compare")
@click.argument("bundle", type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write comparison.json and the bisection repro of the first changed op here.")
@click.option("--model", "model_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The model file (default: the path the bundle was recorded from).")
@click.option("--setting", "settings", multiple=True, metavar="KEY=VALUE",
              help="Flip an Inductor config key (max_autotune=True) or tf32=on|off for this side.")
@click.option("--device", default=None, help="Run the model there (e.g. cuda).")
@click.option("--force", is_flag=True,
              help="Use an --out folder holding files named like ours that this tool did not write (moved to "
                   "OUT/previous/<n>, never overwritten; a folder this tool did not write is never moved).")
def compare_command(bundle: Path, out_dir: Path | None, model_file: Path | None, settings: tuple[str, ...],
                    device: str | None, force: bool) -> None:
    """Recompute a recorded bundle here; name each op whose eager or compiled result changed.
    Exit 0 no change, 1 changes found, 2 bad input."""
    from .api import compare_environment

    comparison, lines = _guarded(lambda: compare_environment(bundle, out_dir, model_file, settings, device, force))
    for line in lines:
        click.echo(line)
    sys.exit(EXIT_FOUND if comparison.changed else EXIT_CLEAN)


def _guarded(call: Any) -> Any:
    """Run ``call``; bad input is one line and exit 2, never a traceback."""
    from .errors import BisectError

    try:
        return call()
    except BisectError as error:
        click.echo(f"bisect-accuracy: error: {error}", err=True)
        sys.exit(EXIT_USAGE)
    except Exception as error:
        click.echo(f"bisect-accuracy: internal error: {type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}", err=True)
        sys.exit(EXIT_INTERNAL)


# Set by a model-file run: its process may end without the interpreter's C-level teardown.
_FAST_EXIT = False
# When the command started (time.monotonic()): --timeout counts from here.
_STARTED = time.monotonic()


def entry() -> None:
    """The console script: :func:`main`, then, after a model-file run, the exit without the
    interpreter's teardown of torch and the compiled kernels (about a second). ``atexit``
    handlers still run and output is flushed; script mode (the user's own program, maybe with
    threads to join) always exits the usual way. ``run`` is supervised: it runs in a child process
    (``supervise.py``), so a native crash of compiled code still ends with a report."""
    from .supervise import supervised

    status = supervised(sys.argv[1:])
    if status is not None:
        sys.exit(status)
    try:
        main()
    except SystemExit as exit:
        if not _FAST_EXIT:
            raise
        code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        if not isinstance(exit.code, (int, type(None))):
            print(exit.code, file=sys.stderr)
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


if __name__ == "__main__":
    entry()
