"""The Makefile on both kinds of host, without either: ``make -n`` (print, run nothing) in a copy of
the checkout's Makefile, with a fake ``python3`` first on PATH.

A CPU host (CI: no CANN, no torch-npu) must build exactly what it always has; an Ascend host
(CANN sourced, so ``ASCEND_HOME_PATH`` is set, or a ``python3`` that finds ``torch_npu``) must
build its own environment from torch 2.7.1's CPU build and the ``[npu,test,bench]`` extras, never
``[cpu]``, build none of the x86-only side folders, and run its tests, its smoke check and the
bench in that environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")

# What `make -n test` runs on a fresh CPU host: the recipe CI runs (then `make audit`).
CPU_TEST_RECIPE = [
    "test -x .venv/bin/python || python3 -m venv .venv",
    ".venv/bin/python -m pip install -q --disable-pip-version-check -e '.[cpu,test,bench]'",
    "touch .venv/.installed",
    ".venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --target .ascend-triton "
    "triton-ascend==3.2.0 ascendnpu-ir==1.2.0 pybind11",
    "touch .ascend-triton/.installed-3.2.0-1.2.0",
    "rm -rf .ascend-numpy",
    ".venv/bin/python -m pip install -q --disable-pip-version-check --no-deps --target .ascend-numpy numpy==1.26.4",
    "touch .ascend-numpy/.installed-1.26.4",
    "ASCEND_KVC_REQUIRE_TRITON_ASCEND=1 ASCEND_KVC_AUDIT_SCOPE=quick .venv/bin/python -m pytest -q -n auto",
]


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A fresh copy of what the Makefile reads: no environment built yet."""
    root = tmp_path / "checkout"
    (root / "tests").mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(REPO / name, root / name)
    for test in (REPO / "tests").glob("test_*.py"):
        shutil.copy(test, root / "tests" / test.name)
    return root


def _fake_python(tmp_path: Path, with_torch_npu: bool) -> Path:
    """A folder holding ``python3``: this interpreter without site-packages, so that it finds
    ``torch_npu`` only when a stand-in package is put on its path."""
    bin_dir = tmp_path / ("bin-npu" if with_torch_npu else "bin-cpu")
    bin_dir.mkdir()
    path = ""
    if with_torch_npu:
        site = tmp_path / "site"
        (site / "torch_npu").mkdir(parents=True)
        (site / "torch_npu" / "__init__.py").write_text("raise ImportError('a stand-in: find it, never import it')\n")
        path = f"PYTHONPATH={site} "
    script = bin_dir / "python3"
    script.write_text(f"#!/bin/sh\n{path}exec {sys.executable} -S \"$@\"\n")
    script.chmod(0o755)
    return bin_dir


def make_n(checkout: Path, tmp_path: Path, target: str, *, torch_npu: bool = False, ascend_home: str | None = None,
           args: tuple[str, ...] = ()) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ASCEND_HOME_PATH", "HOST_KIND", "PYTHON", "MAKEFLAGS")}
    env["PATH"] = f"{_fake_python(tmp_path, torch_npu)}{os.pathsep}{env.get('PATH', '')}"
    if ascend_home is not None:
        env["ASCEND_HOME_PATH"] = ascend_home
    proc = subprocess.run(["make", "-n", "--no-print-directory", target, *args], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_cpu_host_builds_and_tests_as_ci_always_has(checkout, tmp_path):
    assert make_n(checkout, tmp_path, "test") == CPU_TEST_RECIPE


def test_cpu_host_audit_compiles_the_whole_matrix_then_tests_it(checkout, tmp_path):
    lines = make_n(checkout, tmp_path, "audit")
    assert lines[-2:] == [".venv/bin/python -m tools.ascend_lowering",
                          "ASCEND_KVC_AUDIT_SCOPE=full .venv/bin/python -m pytest -q -m audit"]
    assert "--no-deps --target .ascend-triton" in "\n".join(lines[:-2])  # the side install first


def test_cpu_host_bench_uses_the_cpu_environment(checkout, tmp_path):
    lines = make_n(checkout, tmp_path, "bench")
    assert lines[1] == ".venv/bin/python -m pip install -q --disable-pip-version-check -e '.[cpu,test,bench]'"
    assert lines[-1].startswith(".venv/bin/python -m bench --report")


@pytest.mark.parametrize("host", ["torch_npu", "cann"])
def test_ascend_host_builds_the_npu_environment_and_tests_on_it(checkout, tmp_path, host):
    lines = make_n(checkout, tmp_path, "test", torch_npu=host == "torch_npu",
                   ascend_home="/usr/local/Ascend/ascend-toolkit/latest" if host == "cann" else None)
    text = "\n".join(lines)
    assert "[cpu" not in text and ".venv/" not in text, text  # never the CPU extras, never the CPU environment
    assert ".ascend-triton" not in text and "ascendnpu-ir" not in text and ".ascend-numpy" not in text, text
    torch_line = next(k for k, line in enumerate(lines) if "--index-url https://download.pytorch.org/whl/cpu" in line)
    assert lines[torch_line].startswith(".venv-npu/bin/python -m pip install") and "'torch==2.7.1'" in lines[torch_line]
    extras_line = next(k for k, line in enumerate(lines) if ".[npu,test,bench]" in line)
    assert extras_line > torch_line, "the extras are installed before torch's CPU build"
    assert "-c .venv-npu/torch-constraint.txt" in lines[extras_line]
    pytest_line = next(line for line in lines if " -m pytest" in line)
    assert pytest_line.startswith(".venv-npu/bin/python -m pytest") and "-n auto" not in pytest_line
    run = pytest_line.split()
    assert "tests/test_routes.py" in run and "tests/test_golden.py" in run and "tests/test_install.py" in run
    assert "tests/test_ascend_stages.py" not in run  # a CPU-interpreter module
    assert lines[-1] == ".venv-npu/bin/python -m ascend_kvc.npu_check"


def test_ascend_host_bench_runs_in_the_npu_environment(checkout, tmp_path):
    lines = make_n(checkout, tmp_path, "bench", torch_npu=True)
    assert lines[-1].startswith(".venv-npu/bin/python -m bench --report")
    assert not any("[cpu" in line for line in lines)


def test_host_kind_overrides_detection_and_is_checked(checkout, tmp_path):
    assert make_n(checkout, tmp_path, "test", torch_npu=True, args=("HOST_KIND=cpu",)) == CPU_TEST_RECIPE
    assert make_n(checkout, tmp_path, "host", args=("HOST_KIND=npu",)) == [
        'echo "HOST_KIND=npu VENV=.venv-npu EXTRAS=npu,test,bench"']
    proc = subprocess.run(["make", "-n", "host", "HOST_KIND=gpu"], cwd=checkout, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0 and "HOST_KIND must be cpu or npu, got 'gpu'" in proc.stderr


def test_empty_ascend_home_path_is_no_ascend_host(checkout, tmp_path):
    assert make_n(checkout, tmp_path, "test", ascend_home="") == CPU_TEST_RECIPE


def _prerequisites(checkout: Path, tmp_path: Path, *, compiler: bool, python: tuple[int, int] | None = None):
    """``make npu-prerequisites`` run for real, with only a fake ``python3`` (and ``g++``) on PATH."""
    bin_dir = tmp_path / "bin-prereq"
    bin_dir.mkdir(parents=True)
    site = tmp_path / "site-prereq"
    site.mkdir()
    if python is not None:  # an interpreter that says it is another version
        (site / "sitecustomize.py").write_text("import sys\n"
                                               f"sys.version_info = ({python[0]}, {python[1]}, 0, 'final', 0)\n")
    (bin_dir / "python3").write_text(f"#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} \"$@\"\n")
    if compiler:
        (bin_dir / "g++").write_text("#!/bin/sh\nexit 0\n")
    for script in bin_dir.iterdir():
        script.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "HOST_KIND", "MAKEFLAGS", "PYTHONPATH")}
    env["PATH"] = str(bin_dir)  # make runs its recipes with /bin/sh, by that path
    return subprocess.run([shutil.which("make"), "--no-print-directory", "npu-prerequisites", "HOST_KIND=npu"],
                          cwd=checkout, env=env, capture_output=True, text=True, timeout=60)


def test_ascend_host_prerequisites_are_checked_before_anything_installs(checkout, tmp_path):
    import sysconfig

    if not Path(sysconfig.get_paths()["include"], "Python.h").is_file():
        pytest.skip("this interpreter has no Python headers")
    if not (3, 9) <= sys.version_info[:2] <= (3, 11):
        pytest.skip("this interpreter is not one triton-ascend 3.2.0 supports")
    ok = _prerequisites(checkout, tmp_path / "ok", compiler=True)
    assert ok.returncode == 0, ok.stderr
    no_compiler = _prerequisites(checkout, tmp_path / "no-compiler", compiler=False)
    assert no_compiler.returncode != 0
    assert "triton-ascend 3.2.0 needs a C++ compiler" in no_compiler.stderr
    too_new = _prerequisites(checkout, tmp_path / "too-new", compiler=True, python=(3, 12))
    assert too_new.returncode != 0 and "Python 3.9 to 3.11 (this is 3.12" in too_new.stderr
    stamp_deps = make_n(checkout, tmp_path, "venv", args=("HOST_KIND=npu",))
    assert stamp_deps[0].startswith("python3 -c \"import os, shutil, sys, sysconfig;")
