"""Shared set-up: every test process gets its own Inductor cache (a patched lowering compiled
once is served from the on-disk cache to the next compile of the same graph), and nothing a test
writes lands outside its temporary folders."""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

# The suite's compiled kernels, in one folder every test process's Inductor cache links to
# (``seeded_cache_dir``). Inductor names a compiled kernel (and its ISA probes, and the wrapper code)
# by the hash of its own source and compile command, and builds it under a file lock: a kernel a
# planted lowering or codegen changed has other source, so another name, and is never served for
# the unplanted one. What is keyed by the *graph* (the FX graph and AOTAutograd caches: a planted
# lowering is not in their key) stays in each cache folder of its own. A C++ kernel is ~6 CPU-seconds
# of g++ here (the prefix header); the same model's kernels were built again in every process that
# compiled it (the tool, its workers, its repro, the test's own runs).
# Every folder the suite makes outside pytest's own tmp_path (caches shared by processes, copies run
# away from the tool's tree) lives under one root, removed when the suite's process ends.
_SUITE_TMP = Path(tempfile.mkdtemp(prefix="bisect-tests-"))
atexit.register(shutil.rmtree, _SUITE_TMP, ignore_errors=True)


def suite_tempdir(prefix: str) -> Path:
    """A fresh folder under the suite's temporary root (see ``_SUITE_TMP``)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=_SUITE_TMP))


_KERNELS = suite_tempdir("kernels-")
# Inductor's two-character folders (``codecache.get_path``: characters 1-2 of a lower-case base32
# hash) and its lock folder.
_BASE32 = "abcdefghijklmnopqrstuvwxyz234567"
_KERNEL_FOLDERS = tuple(a + b for a in _BASE32 for b in _BASE32) + ("locks",)
for _name in _KERNEL_FOLDERS:
    (_KERNELS / _name).mkdir()


def seeded_cache_dir(path: Path | str) -> Path:
    """A fresh Inductor cache folder (no graph compiled in it: a planted lowering is never served
    from it) whose compiled kernels are the suite's (above): a link to the shared folder for each of
    Inductor's kernel folders."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    for name in _KERNEL_FOLDERS:
        link = path / name
        if not link.exists():
            link.symlink_to(_KERNELS / name, target_is_directory=True)
    return path


# Before anything imports torch: a private Inductor/Triton cache for this test process (its kernels
# the suite's). Child processes inherit it unless a test gives them one of their own.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(seeded_cache_dir(suite_tempdir("inductor-"))))
# The suite runs three torch processes at once (this one and two background runs) on a small
# machine: with OpenMP's default of one thread per CPU each, their threads outnumber the CPUs and
# spin while they wait (three end-to-end runs at once took 11 % less CPU with one thread each).
# One intra-op thread per process unless the environment says otherwise; the verdicts, ops and
# compiles were the same either way.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture
def fresh_inductor_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh cache folder, for a subprocess that plants a bug."""
    return str(seeded_cache_dir(tmp_path_factory.mktemp("inductor-cache")))


def planting_path(case: Path, site_dir: Path, environ: "dict[str, str]", extra: str = "") -> str:
    """The PYTHONPATH under which every fresh process imports ``case`` at start-up (a
    ``sitecustomize`` in ``site_dir``), so its ``plant()`` runs there: the tool's, its verifiers'
    and the repro's. ``extra``: more start-up lines."""
    site_dir.mkdir(parents=True, exist_ok=True)
    plant = ("import importlib.util as _u\n"
             f"_spec = _u.spec_from_file_location('_planted_case', {str(case)!r})\n"
             "_module = _u.module_from_spec(_spec)\n"
             "_spec.loader.exec_module(_module)\n" + extra)
    (site_dir / "sitecustomize.py").write_text(unless_isa_probe(plant))
    return os.pathsep.join([str(site_dir), environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)


def unless_isa_probe(start_up: str) -> str:
    """``start_up`` (``sitecustomize`` lines) run in every fresh interpreter that can compile, not in
    those that never do, where a plant only imports its case and so torch and Inductor (3-8
    CPU-seconds each): Inductor's CPU-ISA load probes (``python -c "...cdll.LoadLibrary(...)"``, one
    per ISA in every process whose first C++ compile asks ``cpu_vec_isa.valid_vec_isa_list``; they
    only ``dlopen`` a built check; a relu repro took 24.6 s with the plant in its probes, 6.7 s
    without), the tool's torch-free supervisor (``bisect_engine.supervise``: the run itself is its
    child, marked ``BISECT_SUPERVISED_CHILD``), and ``collect_env`` with the ``pip list`` it starts
    (the bug report's versions). None of their answers depends on the plant."""
    body = "".join(f"    {line}\n" if line else "\n" for line in start_up.splitlines())
    return ("import os as _os, sys as _sys\n"
            "_argv = getattr(_sys, 'orig_argv', ())\n"
            "if not (any('cdll.LoadLibrary' in _a or 'torch.utils.collect_env' in _a for _a in _argv)\n"
            "        or '-mpip' in _argv or _argv[1:3] == ['-m', 'pip']\n"
            "        or ('run' in _argv and 'BISECT_SUPERVISED_CHILD' not in _os.environ\n"
            "            and any(_a.endswith(('bisect_engine.cli', 'bisect-accuracy')) for _a in _argv))):\n" + body)


# Wall seconds of each end-to-end case (tests/test_e2e.py fills it): printed after the run, so the
# suite's time can be budgeted case by case (make test must stay under 15 minutes on 2 cores).
E2E_SECONDS: dict[str, float] = {}
# Wall seconds of every background job (the end-to-end cases' own, above, among them), by key.
JOB_SECONDS: dict[str, float] = {}


# BISECT_TEST_TIMES: the CPU-seconds of the subprocesses each thread waited for (``os.wait4``'s
# usage: a child's own and its reaped descendants'), so a run on a loaded machine still says what
# each test and background job cost; the suite is CPU-bound, so its wall time follows their sum.
_CHILD_CPU: dict[str, float] = {}
_JOB_OF_THREAD = threading.local()


def _count_children_cpu() -> None:
    import subprocess

    def try_wait(self: Any, wait_flags: int) -> tuple[int, int]:
        try:
            pid, status, usage = os.wait4(self.pid, wait_flags)
        except ChildProcessError:
            return self.pid, 0  # as subprocess's own: reaped elsewhere
        if pid:
            key = getattr(_JOB_OF_THREAD, "key", "main")
            _CHILD_CPU[key] = _CHILD_CPU.get(key, 0.0) + usage.ru_utime + usage.ru_stime
        return pid, status

    subprocess.Popen._try_wait = try_wait  # type: ignore[attr-defined]


_OWN_CPU = [time.process_time()]
if os.environ.get("BISECT_TEST_TIMES"):
    _count_children_cpu()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """BISECT_TEST_TIMES=FILE: each test phase's seconds appended to FILE as it ends (a run cut short
    by a timeout still says where its time went; ``--durations`` prints only at the end): wall, then
    CPU-seconds (this process's, all its threads, and the subprocesses the main thread waited for), outcome."""
    path = os.environ.get("BISECT_TEST_TIMES")
    if path:
        own = time.process_time()
        cpu = own - _OWN_CPU[0] + _CHILD_CPU.pop("main", 0.0)
        _OWN_CPU[0] = own
        with open(path, "a") as times:
            times.write(f"{report.duration:.2f}\t{report.when}\t{report.nodeid}\t{cpu:.2f}\t{report.outcome}\n")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if E2E_SECONDS:
        terminalreporter.write_sep("-", "end-to-end cases, wall seconds (two at a time)")
        for stem, seconds in sorted(E2E_SECONDS.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{seconds:7.1f}  {stem}")
    if JOB_SECONDS:
        terminalreporter.write_sep("-", f"background jobs, wall seconds ({WORKERS} at a time; "
                                        f"{sum(JOB_SECONDS.values()):.0f} s in all)")
        if _TIMELINE:
            start = _TIMELINE.get("pool started", 0.0)
            terminalreporter.write_line("  " + ", ".join(f"{name} at {at - start:.0f} s"
                                                         for name, at in sorted(_TIMELINE.items(), key=lambda i: i[1])))
        for key, seconds in sorted(JOB_SECONDS.items(), key=lambda item: -item[1]):
            cpu = f"  ({_CHILD_CPU[key]:.0f} CPU-s)" if key in _CHILD_CPU else ""
            terminalreporter.write_line(f"{seconds:7.1f}  {key}{cpu}")


@dataclass(frozen=True)
class Job:
    """A slow subprocess run a test module declares (``background_jobs(session)``): started as soon
    as collection ends, so the end-to-end runs go on while the in-process tests do."""
    key: str
    cost: float  # rough seconds: the dearest start first, so the pool's last job ends soon after the rest
    run: Callable[[], Any]


# Two at a time fits a 2-core CI machine; BISECT_TEST_WORKERS raises it on bigger ones.
WORKERS = int(os.environ.get("BISECT_TEST_WORKERS", "2"))
_FUTURES: dict[str, Future[Any]] = {}
_POOLS: list[ThreadPoolExecutor] = []


def fixtures_read(session: pytest.Session, module: Any) -> set[str]:
    """The fixtures the selected tests of ``module`` read: which of its runs its ``background_jobs``
    starts."""
    return {name for item in session.items if getattr(item, "module", None) is module
            for name in getattr(item, "fixturenames", ())}


# The fixtures that wait for background runs (in the modules that declare ``background_jobs``).
BACKGROUND_FIXTURES = {"case_runs", "runs", "model_runs", "script_runs", "worker_runs", "suite_run", "notebook",
                       "relu_report", "own_runs", "aoti_attention", "many_local"}


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests that read background runs go last (in their order), so the in-process tests run
    while the pool works instead of waiting behind the first of them."""
    reads = [item for item in items if hasattr(getattr(item, "module", None), "background_jobs")
             and BACKGROUND_FIXTURES & set(getattr(item, "fixturenames", ()))]
    if reads:
        items[:] = [item for item in items if item not in reads] + reads


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    jobs: list[Job] = []
    modules: list[Any] = []
    for item in session.items:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "background_jobs") and module not in modules:
            modules.append(module)
            jobs += module.background_jobs(session)
    if not jobs:
        return
    _import_before_threads()
    pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="background-run")
    _TIMELINE["pool started"] = time.perf_counter()
    _POOLS.append(pool)
    for job in sorted(jobs, key=lambda job: -job.cost):
        _FUTURES[job.key] = pool.submit(_timed, job)


def _timed(job: Job) -> Any:
    started = time.perf_counter()
    _JOB_OF_THREAD.key = job.key
    try:
        return job.run()
    finally:
        _JOB_OF_THREAD.key = "main"
        JOB_SECONDS[job.key] = time.perf_counter() - started
        _TIMELINE["last job ended"] = time.perf_counter()


# When the pool started, when its last job ended and when a test first waited for it: which of
# the two (the pool or the in-process tests) sets the suite's wall time.
_TIMELINE: dict[str, float] = {}


def _import_before_threads() -> None:
    """Import, in the main thread, the torch modules a background job's own code reaches (its
    cache seeding imports the engine's workers module): torch's Dynamo and Inductor import each
    other, and a background thread importing one while a test imports the other met a partially
    initialised ``torch._inductor.utils`` ("cannot import name 'IndentedBuffer'", seen once)."""
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401

    import bisect_engine.localise.workers  # noqa: F401


_PARSING = threading.Lock()


def parse_python(source: str) -> "ast.Module":
    """``ast.parse`` one thread at a time: CPython 3.11's AST constructor keeps its recursion depth
    per interpreter, so two threads parsing at once (a background run reading its case's
    ``EXPECTED`` while a test walks the package) raise "AST constructor recursion depth mismatch"."""
    import ast

    with _PARSING:
        return ast.parse(source)


def background_result(key: str, run: Callable[[], Any]) -> Any:
    """The background run's result (waited for), or ``run()`` here when it was never started."""
    future = _FUTURES.get(key)
    if future is None:
        return run()
    if not future.done():
        _TIMELINE.setdefault("a test first waited", time.perf_counter())
    return future.result()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for pool in _POOLS:
        pool.shutdown(wait=False, cancel_futures=True)


def stub_versions(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """``bug_report.md``'s Versions as ``text``, without running collect_env."""
    from bisect_engine.output.bug_report import Versions

    monkeypatch.setattr(Versions, "start", lambda self: None)
    monkeypatch.setattr(Versions, "text", lambda self, timeout_s=60: text)
