"""The test suite's own harness: what ``tests/conftest.py`` gives every planted process."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import planting_path


def test_the_plant_runs_in_every_interpreter_that_can_compile_and_in_no_other(tmp_path: Path) -> None:
    """The probe is Inductor's own text (``VecISA._avx_py_load``): should torch change its form, the
    plant would run in every probe again (about 3 CPU-seconds each, six a process) and this fails.
    The supervisor, ``pip`` and ``collect_env`` as the tool starts them (each a torch import saved)."""
    from torch._inductor.cpu_vec_isa import VecISA

    from bisect_engine.output.bug_report import _COLLECT_ENV
    from bisect_engine.supervise import SUPERVISED

    log = tmp_path / "planted.txt"
    case = tmp_path / "case.py"
    case.write_text(f"import sys\nopen({str(log)!r}, 'a').write(sys.orig_argv[-1] + '\\n')\n")
    env = {**os.environ, "PYTHONPATH": planting_path(case, tmp_path / "site", dict(os.environ))}
    env.pop(SUPERVISED, None)
    tool = tmp_path / "bin" / "bisect-accuracy"
    tool.parent.mkdir()
    tool.write_text("")
    runs = {"program": ([sys.executable, "-c", "pass"], {}),
            "probe": ([sys.executable, "-c", VecISA._avx_py_load.replace("__lib_path__", "libc.so.6")], {}),
            "supervisor": ([sys.executable, str(tool), "run", "supervisor"], {}),
            "run": ([sys.executable, str(tool), "run", "run"], {SUPERVISED: "1"}),
            "pip": ([sys.executable, "-m", "pip", "--version"], {}),
            "collect_env": ([sys.executable, "-c", _COLLECT_ENV.replace("runpy.run_module(", "dict(name=")], {})}
    for name, (command, extra) in runs.items():
        done = subprocess.run(command, env={**env, **extra}, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (name, done.stderr)
    planted = log.read_text().splitlines()
    assert planted == ["pass", "run"], planted
