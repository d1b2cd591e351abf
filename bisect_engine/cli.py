"""The command line: parse options, call the API, print a summary, map errors to exit codes.

Exit status: 0 clean, 1 divergence / NaN / crash found, 2 usage or input error, 3 internal error.
"""
from __future__ import annotations

import logging
import sys
import traceback
import warnings
from pathlib import Path

import click

EXIT_CLEAN, EXIT_FOUND, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Find the op that makes torch.compile (Inductor) disagree with eager, or make NaN/Inf."""


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("model_file", type=click.Path(dir_okay=False, path_type=Path))
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
@click.option("--verify-runs", type=click.IntRange(min=0), default=3, show_default=True,
              help="Run the emitted repro this many times in fresh processes (0: do not verify).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar; only the summary.")
@click.option("--verbose", "-v", is_flag=True, help="Log each step and its duration to stderr.")
def run(model_file: Path, out_dir: Path, max_compiles: int | None, timeout_s: float | None,
        seed: int, stage: str, rng: str, verify_runs: int, quiet: bool, verbose: bool) -> None:
    """Bisect MODEL_FILE: a file defining get_model() and get_inputs() (see README)."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(name)s: %(message)s")
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    from .errors import BisectError, UsageError
    from .api import bisect_file
    from .pipeline import Options
    from .progress import Progress
    from .report import summary

    options = Options(max_compiles=max_compiles, timeout_s=timeout_s, seed=seed, rng=rng, stage=stage)
    try:
        report = bisect_file(model_file, out_dir, options, Progress(enabled=not quiet),
                             verify_runs if stage == "repro" else -1)
    except UsageError as error:
        click.echo(f"bisect-accuracy: error: {error}", err=True)
        sys.exit(EXIT_USAGE)
    except BisectError as error:
        click.echo(f"bisect-accuracy: {error}", err=True)
        sys.exit(EXIT_USAGE)
    except Exception as error:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "internal-error.log").write_text(traceback.format_exc())
        click.echo(f"bisect-accuracy: internal error: {type(error).__name__}: {error}\n"
                   f"  traceback written to {out_dir / 'internal-error.log'}", err=True)
        sys.exit(EXIT_INTERNAL)
    click.echo(summary(report))
    click.echo(f"  report:  {report['report_path']}")
    sys.exit(EXIT_CLEAN if report["verdict"] == "clean" else EXIT_FOUND)


if __name__ == "__main__":
    main()
