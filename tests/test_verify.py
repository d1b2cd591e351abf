"""Repro verification: each run is ``python -P repro.py`` from an empty working folder, started
ahead of time or not, and only the repro's own verdict line with exit 1 counts as reproduced."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bisect_engine.output.repro import Interpreters, run_outcome, verify_repro

SCRIPTS = {
    "exit_one.py": "import sys\nprint('hello', sys.argv[0].endswith('exit_one.py'), __name__)\nsys.exit(1)\n",
    "falls_off.py": "import os, sys\nprint(os.path.dirname(os.path.abspath(__file__)) in sys.path, os.listdir('.'))\n",
    "exit_text.py": "import sys\nsys.exit('cannot go on')\n",
    "raises.py": "raise ValueError('boom')\n",
    "exit_125.py": "import sys, atexit\natexit.register(lambda: print('atexit ran'))\nsys.exit(125)\n",
    "reproduces.py": "import sys\nprint('repro: REPRODUCED: it differs')\nsys.exit(1)\n",
    "does_not.py": "import sys\nprint('repro: NOT REPRODUCED: it agrees')\nsys.exit(0)\n",
    "syntax.py": "print('repro: REPRODUCED: never printed'\n",
    "imports_numpy.py": "import numpy\nprint('repro: REPRODUCED: numpy imported', numpy.__name__)\nraise SystemExit(1)\n",
}


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("scripts")
    for name, text in SCRIPTS.items():
        (folder / name).write_text(text)
    # A module planted in the output folder must never be imported by a verification run.
    (folder / "numpy.py").write_text("import sys\nprint('PLANTED MODULE RAN')\nsys.exit(1)\n")
    return folder


@pytest.fixture(scope="module")
def interpreters():
    # Nothing preloaded: these scripts import no torch, and a torch import costs seconds a run.
    started = Interpreters(len(SCRIPTS) + 1, preload=())  # one more than the scripts: never used
    started.start()
    yield started
    started.close()


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_run_is_python_P_from_an_empty_folder(scripts: Path, interpreters: Interpreters, name: str,
                                                tmp_path: Path) -> None:
    path = scripts / name
    plain = subprocess.run([sys.executable, "-P", str(path)], cwd=tmp_path, capture_output=True, text=True)
    check = verify_repro(path, runs=1, interpreters=interpreters)
    run = check.runs[0]
    assert run["launch"] == "prestarted python -P repro.py, from an empty working folder"
    assert run["exit"] == plain.returncode
    assert "PLANTED MODULE RAN" not in run["output_tail"] + plain.stdout
    for line in (plain.stdout + plain.stderr).strip().splitlines()[-1:]:
        assert line in run["output_tail"]


@pytest.mark.parametrize(("name", "outcome", "status"), [
    ("reproduces.py", "reproduced", "REPRODUCED"),
    ("does_not.py", "not_reproduced", "NOT_REPRODUCED"),
    ("exit_one.py", "cannot_run", "CANNOT_RUN"),  # exit 1 without the verdict line: a crash, not a repro
    ("raises.py", "cannot_run", "CANNOT_RUN"),
    ("syntax.py", "cannot_run", "CANNOT_RUN"),
    ("exit_125.py", "cannot_run", "CANNOT_RUN"),
])
def test_only_the_repros_own_verdict_counts(scripts: Path, name: str, outcome: str, status: str) -> None:
    check = verify_repro(scripts / name, runs=1, preload=())
    assert (check.runs[0]["outcome"], check.status) == (outcome, status), check.runs[0]["output_tail"]


def test_run_outcome_needs_marker_and_status() -> None:
    assert run_outcome(1, "x\nrepro: REPRODUCED: yes\n") == "reproduced"
    assert run_outcome(1, "repro: NOT REPRODUCED: no\n") == "cannot_run"
    assert run_outcome(0, "repro: REPRODUCED: yes\n") == "cannot_run"
    assert run_outcome(1, "Traceback ...\nValueError\n") == "cannot_run"


def test_close_ends_interpreters_never_used(interpreters: Interpreters) -> None:
    spare = list(interpreters._processes)
    assert spare
    folder = interpreters.cwd
    interpreters.close()
    assert [p.returncode for p in spare] == [0] * len(spare)
    assert not Path(folder).exists()


def test_runs_past_the_prestarted_ones_start_fresh_interpreters(scripts: Path) -> None:
    one = Interpreters(1, preload=())
    one.start()
    check = verify_repro(scripts / "reproduces.py", runs=2, interpreters=one)
    one.close()
    assert [r["outcome"] for r in check.runs] == ["reproduced", "reproduced"] and check.status == "REPRODUCED"
    assert sorted(r["launch"].startswith("prestarted") for r in check.runs) == [False, True]


def test_interpreters_preload_torch_by_default() -> None:
    started = Interpreters(1)
    started.start()
    process, prestarted = started.take()
    assert prestarted and "torch._inductor.compile_fx" in started.preload
    process.kill()
    process.communicate()
    started.close()


CPU_ISA_CACHED = ("import sys\nfrom torch._inductor import cpu_vec_isa\n"
                  "print('repro: REPRODUCED: cached', cpu_vec_isa.valid_vec_isa_list.cache_info().currsize)\nsys.exit(1)\n")


# detected here (True): the interpreter warms; the test below covers it (it detects here first, then
# asserts the warm-up's cached answer), under a config, at the cost of one warm-up instead of two.
@pytest.mark.parametrize("detected_here", [False])
def test_an_interpreter_warms_the_cpu_isa_only_where_this_process_has_it(tmp_path: Path, detected_here: bool) -> None:
    from torch._inductor import cpu_vec_isa

    script = tmp_path / "isa.py"
    script.write_text(CPU_ISA_CACHED)
    cpu_vec_isa.valid_vec_isa_list.cache_clear()
    if detected_here:
        cpu_vec_isa.valid_vec_isa_list()
    warm = Interpreters(1, preload=("torch",), warm_config={})
    warm.start()
    check = verify_repro(script, runs=1, interpreters=warm)
    warm.close()
    assert check.status == "REPRODUCED" and f"cached {int(detected_here)}" in check.runs[0]["output_tail"]


def test_an_interpreter_warms_under_the_config_it_is_given(tmp_path: Path) -> None:
    """The warm-up's cached ISA answer is the one under the repro's config (here: no ISA is ok). The
    config also turns the precompiled header off: the header the warm-up builds for a config is the
    next test's subject, and building one for scalar flags, used by no other test, cost ~95 s."""
    from torch._inductor import cpu_vec_isa

    script = tmp_path / "isa.py"
    script.write_text(CPU_ISA_CACHED.replace("cache_info().currsize)", "cache_info().currsize, "
                                             "len(cpu_vec_isa.valid_vec_isa_list()))"))
    cpu_vec_isa.valid_vec_isa_list()
    config = {"cpp.vec_isa_ok": False, "cpp_cache_precompile_headers": False}
    warm = Interpreters(1, preload=("torch",), warm_config=config)
    warm.start()
    check = verify_repro(script, runs=1, interpreters=warm)
    warm.close()
    assert check.status == "REPRODUCED" and "cached 1 0" in check.runs[0]["output_tail"]


def test_the_repro_interpreter_warms_under_the_users_config_and_never_under_an_unwritable_cpp_key() -> None:
    from types import SimpleNamespace

    from bisect_engine.api import repro_warm_config

    def spec(config: dict, unrenderable: list, options: dict) -> SimpleNamespace:
        return SimpleNamespace(inductor_config=config, unrenderable_config=unrenderable, compile_options=options)

    assert repro_warm_config(spec({"max_autotune": True}, [], {"triton.cudagraphs": False})) == {
        "max_autotune": True, "triton.cudagraphs": False}
    assert repro_warm_config(spec({"cpp.vec_isa_ok": False}, [], {"cpp.simdlen": 1})) == {
        "cpp.vec_isa_ok": False, "cpp.simdlen": 1}
    assert repro_warm_config(spec({}, ["cpp.cxx"], {})) is None
    assert repro_warm_config(spec({}, ["post_grad_custom_pre_pass"], {})) == {}
    assert repro_warm_config(spec({"cpp.simdlen": object()}, [], {})) is None


def test_the_cpu_isa_detection_thread_leaves_the_answer_cached() -> None:
    from torch._inductor import cpu_vec_isa

    from bisect_engine.verdict.inductor_adapter import start_cpu_isa_detection

    thread = start_cpu_isa_detection()
    thread.join(timeout=300)
    assert not thread.is_alive() and cpu_vec_isa.valid_vec_isa_list.cache_info().currsize == 1


@pytest.mark.parametrize(("load", "started"), [(0.1, True), (64.0, False)])
def test_the_cpu_isa_warm_up_starts_only_with_idle_cpus(monkeypatch: pytest.MonkeyPatch, load: float,
                                                        started: bool) -> None:
    from bisect_engine.verdict import inductor_adapter

    monkeypatch.setattr(inductor_adapter, "_runnable_now", lambda: load)
    monkeypatch.setattr(inductor_adapter, "start_cpu_isa_detection", lambda: "thread")
    assert (inductor_adapter.warm_cpu_isa() == "thread") is started


def test_the_cpus_taken_now_are_read_from_the_instant_count_less_this_thread(monkeypatch: pytest.MonkeyPatch,
                                                                              tmp_path: Path) -> None:
    from bisect_engine.verdict import inductor_adapter

    if not Path("/proc/loadavg").exists():
        pytest.skip("no /proc/loadavg here")
    real_open = open
    figures = tmp_path / "loadavg"
    monkeypatch.setattr("builtins.open", lambda path, *a, **k: real_open(figures if path == "/proc/loadavg" else path,
                                                                          *a, **k))
    figures.write_text("3.10 2.50 2.00 1/812 4242\n")  # a long job just ended: the average is high, nothing runs
    assert inductor_adapter._runnable_now() == 0
    figures.write_text("0.10 0.20 0.30 5/812 4242\n")
    assert inductor_adapter._runnable_now() == 4


def test_the_toolchain_warm_up_imports_nothing_beside_the_capture(tmp_path: Path) -> None:
    """What its thread runs imports no module beyond those imported before it starts (a first import
    there, beside Dynamo's own, can hand the capture a partly initialised module)."""
    from conftest import seeded_cache_dir

    script = tmp_path / "imports.py"
    script.write_text(WARM_IMPORTS_CHECK)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(seeded_cache_dir(tmp_path / "inductor"))}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "new modules: []", done.stdout


WARM_IMPORTS_CHECK = """
import importlib, sys
import torch
from bisect_engine.verdict import inductor_adapter
for module in inductor_adapter.WARM_IMPORTS:
    importlib.import_module(module)
before = set(sys.modules)
inductor_adapter._warm_toolchain()
print("new modules:", sorted(set(sys.modules) - before))
"""


def test_the_toolchain_warm_up_precompiles_the_header_the_first_kernel_uses(tmp_path: Path) -> None:
    """After the warm-up thread, the first real C++ kernel of the process asks for the precompiled
    header the warm-up made (same header, same flags: a hit in the process's cache of them), and
    for no other."""
    from conftest import seeded_cache_dir

    script = tmp_path / "warm.py"
    script.write_text(WARM_THEN_COMPILE)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(seeded_cache_dir(tmp_path / "inductor"))}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["headers", "1", "1", "hits", "1"], done.stdout


WARM_THEN_COMPILE = """
import torch
from torch._inductor import codecache
from bisect_engine.verdict.inductor_adapter import start_cpu_isa_detection
start_cpu_isa_detection().join()
before = codecache._precompile_header.cache_info()
torch.compile(lambda x: torch.relu(x) + 1)(torch.randn(64))
after = codecache._precompile_header.cache_info()
print("headers", before.currsize, after.currsize, "hits", after.hits)
"""


@pytest.mark.parametrize("users", [None, "ACTIVE"])
def test_the_verifying_runs_let_openmp_threads_sleep_while_they_wait_unless_the_user_says(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, users: str | None) -> None:
    """The runs go at once (three by default) beside the search: spinning threads would take the
    cores the others need. In script mode the tool's process is the program's, so this is where it is set."""
    if users is None:
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    else:
        monkeypatch.setenv("OMP_WAIT_POLICY", users)
    script = tmp_path / "policy.py"
    script.write_text("import os, sys\nprint('repro: REPRODUCED: policy', os.environ.get('OMP_WAIT_POLICY'))\n"
                      "sys.exit(1)\n")
    check = verify_repro(script, runs=1, preload=())
    assert check.status == "REPRODUCED", check.runs
    assert f"policy {users or 'PASSIVE'}" in check.runs[0]["output_tail"]
    assert os.environ.get("OMP_WAIT_POLICY") == users  # this process's own left as it was
