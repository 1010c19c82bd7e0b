"""The Ascend kernels under triton-ascend 3.2.0's own interpreter (tests/triton_ascend/, a subprocess).

The rest of the suite runs the kernels under community Triton 3.8's interpreter. triton-ascend
3.2.0 is the Triton an NPU host runs (its language patches, its semantics); its interpreter runs
on x86 too, given numpy < 2. Community Triton and triton-ascend both install the package
``triton``, and .venv keeps numpy 2, so ``make`` installs triton-ascend into ``.ascend-triton/``
(shared with the lowering audit) and numpy 1.26.4 into ``.ascend-numpy/``, and this test runs
pytest on tests/triton_ascend/ in a child process with ``PYTHONPATH`` = .ascend-numpy, then
.ascend-triton, then the checkout; ``TRITON_INTERPRET=1``; no CUDA device visible.

Without the side folders (a plain ``pytest`` without ``make``) the test skips and says why; under
``make test`` (``ASCEND_KVC_REQUIRE_TRITON_ASCEND=1``) a missing folder is a failure. Any failing
test in the child fails this one with the tail of the child's output. About a minute on one core.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from ascend_kvc import ASCEND_STAGES
from tools.ascend_lowering.driver import REPO, ascend_triton_path

REQUIRE_ENV = "ASCEND_KVC_REQUIRE_TRITON_ASCEND"
INNER = "tests/triton_ascend"
TIMEOUT_S = 900


def ascend_numpy_path() -> Path:
    """The side folder holding numpy < 2 for triton-ascend's interpreter (``make`` fills it)."""
    return Path(os.environ.get("ASCEND_NUMPY_PATH", REPO / ".ascend-numpy"))


def missing_side_folders() -> list[str]:
    problems = []
    if not (ascend_triton_path() / "triton").is_dir():
        problems.append(f"triton-ascend not found in {ascend_triton_path()}")
    numpy_dist = list(ascend_numpy_path().glob("numpy-1.*.dist-info"))
    if not (ascend_numpy_path() / "numpy").is_dir() or not numpy_dist:
        problems.append(f"numpy < 2 not found in {ascend_numpy_path()}")
    return problems


def interpreter_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ascend_numpy_path()), str(ascend_triton_path()), str(REPO)]
        + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["TRITON_INTERPRET"] = "1"
    env["CUDA_VISIBLE_DEVICES"] = ""  # CPU tensors only: triton-ascend cannot launch on a GPU
    env.pop("ASCEND_KVC_VECTOR_CORES", None)  # the child sets it where a test asks for it
    env.pop("PYTEST_ADDOPTS", None)
    return env


def outcomes(junit: Path) -> dict[str, str]:
    """Test name -> passed / failed / error / xfailed / skipped, from the child's JUnit XML."""
    result = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed" if child.tag == "failure" else "error"
            elif child.tag == "skipped":
                outcome = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
        result[name] = outcome
    return result


def test_ascend_kernels_under_triton_ascend_interpreter(tmp_path):
    missing = missing_side_folders()
    if missing:
        reason = "; ".join(missing) + " (`make test` installs them)"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{REQUIRE_ENV}=1 but {reason}")
        pytest.skip(reason)
    junit = tmp_path / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEX", f"--junitxml={junit}", INNER]
    proc = subprocess.run(cmd, cwd=REPO, env=interpreter_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, (
        f"tests/triton_ascend/ under triton-ascend 3.2.0's interpreter failed (exit {proc.returncode}):\n"
        + output[-6000:])
    # Nothing skipped (the xfails are the known interpreter faults), and the child saw the same
    # ladder as this process (its fuzz test has one case per stage, named by the stage).
    result = outcomes(junit)
    odd = {name: outcome for name, outcome in result.items() if outcome not in ("passed", "xfailed")}
    assert not odd, f"{odd}\n{output[-3000:]}"
    for stage in ASCEND_STAGES:
        name = f"tests.triton_ascend.test_ta_ladder::test_fuzz_examples[{stage}]"
        assert result.get(name) == "passed", f"{name}: {result.get(name, 'not run')}\n{output[-3000:]}"
