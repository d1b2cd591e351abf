"""The test suite's own harness: what ``tests/conftest.py`` gives every planted process."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import planting_path


def test_the_plant_runs_in_every_interpreter_but_inductors_isa_load_probes(tmp_path: Path) -> None:
    """The probe is Inductor's own text (``VecISA._avx_py_load``): should torch change its form, the
    plant would run in every probe again (about 3 CPU-seconds each, six a process) and this fails."""
    from torch._inductor.cpu_vec_isa import VecISA

    case = tmp_path / "case.py"
    case.write_text("import os\nos.environ['PLANTED_HERE'] = '1'\n")
    env = {**os.environ, "PYTHONPATH": planting_path(case, tmp_path / "site", dict(os.environ))}
    said = "import os\nprint(os.environ.get('PLANTED_HERE', '0'))\n"
    probe = VecISA._avx_py_load.replace("__lib_path__", "libc.so.6") + said
    runs = {name: subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
            for name, code in {"program": said, "probe": probe}.items()}
    assert {name: run.stdout.strip() for name, run in runs.items()} == {"program": "1", "probe": "0"}, runs
