"""Script-mode levels and settings, read from the command line or from environment variables.

Each level is a named stage and includes the ones below it:

    0 off       nothing happens
    1 record    write each Dynamo graph's code and the real inputs of its checked calls under OUT
    2 check     run each checked call eagerly (and in fp64) too and judge the compiled result
    3 localise  on the first divergence: the op, node, source line and Inductor subsystem
    4 repro     also write the minimal repro and verify it in fresh processes

Pure and light: the start-up hook imports this module before torch exists, so nothing here may
import torch (or anything else outside the standard library).
"""
from __future__ import annotations

import enum
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

ENV_PREFIX = "BISECT_ACCURACY_"
LEVEL_VARIABLE = ENV_PREFIX + "LEVEL"
OUT_VARIABLE = ENV_PREFIX + "OUT"
CHECK_EVERY_VARIABLE = ENV_PREFIX + "CHECK_EVERY"
STOP_VARIABLE = ENV_PREFIX + "STOP"
VERIFY_RUNS_VARIABLE = ENV_PREFIX + "VERIFY_RUNS"
MAX_COMPILES_VARIABLE = ENV_PREFIX + "MAX_COMPILES"
TIMEOUT_VARIABLE = ENV_PREFIX + "TIMEOUT"
SUMMARY_WAIT_VARIABLE = ENV_PREFIX + "SUMMARY_WAIT"
MAX_RECORD_VARIABLE = ENV_PREFIX + "MAX_RECORD_MB"
MAX_RECORD_FILES_VARIABLE = ENV_PREFIX + "MAX_RECORD_FILES"
ORACLE_VARIABLE = ENV_PREFIX + "ORACLE"  # "bitwise": the sign of a zero counts (the CLI's --oracle bitwise)
SCRIPT_ORACLES = ("outputs", "bitwise")  # the --oracle values script mode honours
ROOT_PID_VARIABLE = ENV_PREFIX + "ROOT_PID"  # set by the first process of a session; its children write apart
DEFAULT_OUT = "bisect-accuracy-out"


class Level(enum.IntEnum):
    OFF = 0
    RECORD = 1
    CHECK = 2
    LOCALISE = 3
    REPRO = 4

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> "Level":
        """A level from ``"2"`` or ``"check"`` (any case); ``ValueError`` naming the choices."""
        text = text.strip().lower()
        for level in cls:
            if text in (str(int(level)), level.label):
                return level
        choices = ", ".join(f"{int(level)} {level.label}" for level in cls)
        raise ValueError(f"{LEVEL_VARIABLE}={text!r}: expected one of {choices}")


@dataclass(frozen=True)
class ScriptSettings:
    """What a script-mode run does, from the CLI's options or the environment."""

    level: Level = Level.REPRO
    out_dir: Path = Path(DEFAULT_OUT)
    check_every: int = 0  # 0: the first call of each graph only; N: calls 1, 1+N, 1+2N, ...
    stop_on_divergence: bool = False
    verify_runs: int = 3
    stage: str = "repro"  # the pipeline stage localisation stops after (level 3: "subsystem")
    max_compiles: int | None = None
    timeout_s: float | None = None
    summary_wait_s: float = 30.0  # how long rank 0 waits for the other ranks' status at exit
    force: bool = False  # use an output folder holding files named like ours that we did not write
    max_record_mb: float = 256.0  # level 1: stop saving call inputs past this many MB
    max_record_files: int = 100  # level 1: ... or past this many saved calls
    trace: bool = False  # --trace: torch's structured trace of the run kept in OUT/trace/
    oracle: str = "outputs"  # --oracle bitwise: every call's outputs exactly eager's, the sign of a zero included

    def checks_call(self, call: int) -> bool:
        """Whether a graph's ``call``-th call (1-based) is checked."""
        if call == 1:
            return True
        return self.check_every > 0 and (call - 1) % self.check_every == 0


def stage_for(level: Level, stage: str | None = None) -> str:
    """The pipeline stage a level stops after; level 3 never writes a repro."""
    if level >= Level.REPRO:
        return stage or "repro"
    return "localise" if stage == "localise" else "subsystem"


def level_from_environment(environ: Mapping[str, str] = os.environ) -> Level:
    text = environ.get(LEVEL_VARIABLE, "").strip()
    return Level.parse(text) if text else Level.OFF


def settings_from_environment(environ: Mapping[str, str] = os.environ) -> ScriptSettings:
    """Settings from ``BISECT_ACCURACY_*`` variables; ``ValueError`` on a malformed value."""
    level = level_from_environment(environ)
    out_dir = Path(environ.get(OUT_VARIABLE, "").strip() or DEFAULT_OUT)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"{OUT_VARIABLE}={str(out_dir)!r}: expected a folder (or a path to create one); it names a file")
    return ScriptSettings(
        level=level,
        out_dir=out_dir,
        check_every=_int(environ, CHECK_EVERY_VARIABLE, 0),
        stop_on_divergence=_flag(environ, STOP_VARIABLE),
        verify_runs=_int(environ, VERIFY_RUNS_VARIABLE, 3),
        stage=stage_for(level),
        max_compiles=_int(environ, MAX_COMPILES_VARIABLE, 0) or None,
        timeout_s=_number(environ, TIMEOUT_VARIABLE),
        summary_wait_s=_or(_number(environ, SUMMARY_WAIT_VARIABLE), 30.0),
        max_record_mb=_or(_number(environ, MAX_RECORD_VARIABLE), 256.0),
        max_record_files=_int(environ, MAX_RECORD_FILES_VARIABLE, 100),
        oracle=_oracle(environ),
    )


def _oracle(environ: Mapping[str, str]) -> str:
    text = environ.get(ORACLE_VARIABLE, "").strip() or "outputs"
    if text not in SCRIPT_ORACLES:
        raise ValueError(f"{ORACLE_VARIABLE}={text!r}: expected one of {', '.join(SCRIPT_ORACLES)}")
    return text


def _number(environ: Mapping[str, str], name: str, accepted: str = "a number such as 2.5") -> float | None:
    """The variable as a finite non-negative number, None when unset."""
    text = environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name}={text!r}: expected {accepted} (a finite number, 0 or more)")
    return value


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _int(environ: Mapping[str, str], name: str, default: int) -> int:
    value = _number(environ, name, "a whole number such as 3")
    if value is not None and value != int(value):
        raise ValueError(f"{name}={environ.get(name, '').strip()!r}: expected a whole number such as 3 "
                         "(a finite number, 0 or more)")
    return default if value is None else int(value)


def _flag(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def clear_environment(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> dict[str, str]:
    """Remove every ``BISECT_ACCURACY_*`` variable (the tool's own subprocesses must not start the
    hook); returns what was removed so a caller can put it back."""
    removed = {name: value for name, value in environ.items() if name.startswith(ENV_PREFIX)}
    for name in removed:
        del environ[name]
    return removed
