"""Repro verification: prestarted interpreters run a script exactly as ``python script.py`` does."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bisect_engine.output.repro import Interpreters, verify_repro

SCRIPTS = {
    "exit_one.py": "import sys\nprint('hello', sys.argv[0].endswith('exit_one.py'), __name__)\nsys.exit(1)\n",
    "falls_off.py": "import os, sys\nprint(os.path.dirname(os.path.abspath(__file__)) == sys.path[0])\n",
    "exit_text.py": "import sys\nsys.exit('cannot go on')\n",
    "raises.py": "raise ValueError('boom')\n",
    "exit_125.py": "import sys, atexit\natexit.register(lambda: print('atexit ran'))\nsys.exit(125)\n",
}


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("scripts")
    for name, text in SCRIPTS.items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture(scope="module")
def interpreters(scripts: Path):
    started = Interpreters(len(SCRIPTS) + 1, scripts)  # one more than the scripts: never used
    started.start()
    yield started
    started.close()


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_prestarted_run_matches_plain_python(scripts: Path, interpreters: Interpreters, name: str) -> None:
    path = scripts / name
    plain = subprocess.run([sys.executable, name], cwd=scripts, capture_output=True, text=True)
    check = verify_repro(path, runs=1, interpreters=interpreters)
    run = check.runs[0]
    assert run["launch"].startswith("prestarted")
    assert run["exit"] == plain.returncode
    assert plain.stdout + plain.stderr, name
    for line in (plain.stdout + plain.stderr).strip().splitlines()[-1:]:
        assert line in run["output_tail"]


def test_close_ends_interpreters_never_used(interpreters: Interpreters) -> None:
    spare = list(interpreters._processes)
    assert spare
    interpreters.close()
    assert [p.returncode for p in spare] == [0] * len(spare)


def test_runs_past_the_prestarted_ones_use_plain_python(scripts: Path) -> None:
    one = Interpreters(1, scripts)
    one.start()
    check = verify_repro(scripts / "exit_one.py", runs=2, interpreters=one)
    one.close()
    assert [r["exit"] for r in check.runs] == [1, 1] and check.status == "REPRODUCED"
    assert sorted(r["launch"].startswith("prestarted") for r in check.runs) == [False, True]
