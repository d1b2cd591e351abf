"""The package installs alone: the wheel built from this checkout (offline, ``pip wheel --no-deps``)
holds every module, the report schema and both entry points (the ``bisect-accuracy`` command and
the pytest plugin); installed into a fresh venv (torch and the other dependencies reached through a
``.pth`` line naming this venv's site-packages, so nothing is downloaded), it gives a working CLI
(``--version``), the start-up hook, the Python API and the plugin, all from the installed copy,
never from this checkout. The demo case through the installed CLI (a full run) only with
``BISECT_CORPUS=all``: the checks before it cover what the wheel holds.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder, source = tmp_path_factory.mktemp("wheel"), tmp_path_factory.mktemp("source")
    # built from a copy of what the wheel is made of: setuptools writes build/ and *.egg-info beside it
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "bisect_engine", source / "bisect_engine", ignore=shutil.ignore_patterns("__pycache__"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "--wheel-dir", str(folder), str(source)], capture_output=True, text=True, timeout=300,
                           cwd=folder)
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    (wheel,) = folder.glob("bisect_accuracy-*.whl")
    return wheel


def test_the_wheel_holds_every_module_the_schema_and_both_entry_points(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "bisect_engine").rglob("*.py")}
    assert modules - names == set()
    assert "bisect_engine/output/report.schema.json" in names
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "bisect-accuracy = bisect_engine.cli:entry" in text
    assert "[pytest11]\nbisect_accuracy = bisect_engine.pytest_plugin" in text


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("fresh") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                              "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stdout[-2000:] + install.stderr[-2000:]
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # torch, click, tqdm, networkx, pytest: this venv's copies (after the fresh venv's own packages)
    (Path(site) / "dependencies_from_the_test_venv.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


def _run(venv: Path, *command: str, cwd: Path, timeout: int = 300, **extra: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")} | extra
    return subprocess.run([str(venv / "bin" / command[0]), *command[1:]], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=environment)


def test_the_installed_wheel_gives_the_cli_the_hook_the_api_and_the_plugin(fresh_venv: Path, tmp_path: Path) -> None:
    version = _run(fresh_venv, "bisect-accuracy", "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("bisect-accuracy 0.1.0 (torch "), version.stderr
    hook = _run(fresh_venv, "bisect-accuracy", "install-hook", cwd=tmp_path)
    assert hook.returncode == 0 and str(fresh_venv) in hook.stdout, hook.stdout + hook.stderr
    api = _run(fresh_venv, "python", "-c",
               "import bisect_engine, sys; from bisect_engine import check, assert_compiled_matches, CheckResult; "
               "print(bisect_engine.__file__, bisect_engine.__version__, 'torch' in sys.modules)", cwd=tmp_path)
    location, package_version, torch_loaded = api.stdout.split()
    assert Path(location).is_relative_to(fresh_venv) and package_version == "0.1.0", api.stdout + api.stderr
    assert torch_loaded == "False"  # the API loads torch when it runs, not on import
    plugin = _run(fresh_venv, "python", "-m", "pytest", "--help", cwd=tmp_path)
    assert "--bisect-accuracy-out=DIR" in plugin.stdout, plugin.stdout[-2000:] + plugin.stderr[-2000:]


@pytest.mark.e2e
@pytest.mark.skipif(os.environ.get("BISECT_CORPUS", "ci") != "all", reason="a full run: BISECT_CORPUS=all runs it")
def test_the_installed_cli_finds_the_demo_bug(fresh_venv: Path, tmp_path: Path) -> None:
    from conftest import seeded_cache_dir

    run = _run(fresh_venv, "bisect-accuracy", "run", str(ROOT / "repro_cases" / "relu_bug.py"), "--out",
               str(tmp_path / "out"), "-q", "--verify-runs", "1", cwd=tmp_path, timeout=900,
               TORCHINDUCTOR_CACHE_DIR=str(seeded_cache_dir(tmp_path / "cache")))
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert "culprit: aten.relu.default" in run.stdout


def test_make_demo_installs_nothing_outside_the_venv() -> None:
    """Every recipe ``make demo`` would run on a fresh clone (``-B``: as if nothing were built):
    no system package manager; Chromium for the browser tests is ``make browser``'s, which ``make test`` runs."""
    demo = subprocess.run(["make", "-n", "-B", "demo"], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert "pip install" in demo and not any(tool in demo for tool in ("apt-get", "apt ", "sudo", "dnf ", "yum "))
    test = subprocess.run(["make", "-n", "-B", "test"], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert "apt-get install -y -q chromium" in test
