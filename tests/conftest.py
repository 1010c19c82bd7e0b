"""Test set-up: without a GPU or NPU, Triton routes run under the CPU interpreter.

TRITON_INTERPRET must be set before the first kernel is defined; ascend_kvc defines its kernels
lazily, on a route's first use, so setting it here (before any test runs) is enough.
"""

import os

import pytest
import torch


def _has_npu() -> bool:
    # torch-npu registers torch.npu when it is installed (it auto-loads with torch).
    return hasattr(torch, "npu") and torch.npu.is_available()


if not torch.cuda.is_available() and not _has_npu():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_configure(config):
    # Community Triton's interpreter re-patches triton.language on every jit-helper call; the shim
    # skips the repeats (no value changes: tests/interpreter_shim.py, tests/test_interpreter_shim.py).
    if os.environ.get("TRITON_INTERPRET") == "1" and os.environ.get("ASCEND_KVC_INTERPRETER_SHIM") != "0":
        import interpreter_shim

        interpreter_shim.install()

# tests/triton_ascend/ runs in its own process under triton-ascend's interpreter, started by
# tests/test_triton_ascend_interpreter.py; named on the command line, it is collected as usual.
collect_ignore = ["triton_ascend"]

# The longest tests under the CPU interpreter (tens of seconds each). They run first, so that with
# ``-n auto`` no worker picks one up near the end while the others sit idle.
SLOW_FIRST = ("test_ascend_kernels_under_triton_ascend_interpreter", "test_fuzz_valid_inputs_match_the_truth",
              "test_fuzz_bad_index_values")


@pytest.fixture(autouse=True)
def _triton_interpret_kept():
    """A test that runs the bench's main with ``--device cpu`` in this process sets TRITON_INTERPRET
    (the CLI must, before its kernels are defined). On a GPU machine that would leave every kernel
    defined later in this worker interpreted, beside compiled helpers: put the variable back."""
    before = os.environ.get("TRITON_INTERPRET")
    yield
    if os.environ.get("TRITON_INTERPRET") != before:
        if before is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = before


@pytest.fixture
def cores(monkeypatch):
    """Set ``ASCEND_KVC_VECTOR_CORES`` for one test (plans made under another count are dropped).
    ``tests/test_overlap_kernels.py`` has its own, which can also allow short pieces."""
    from ascend_kvc import api

    def set_cores(n):
        monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", str(n))
        api.clear_launch_plans()
    yield set_cores
    api.clear_launch_plans()


@pytest.fixture(scope="session")
def audit_installed():
    """Skip without triton-ascend and bishengir-compile in .ascend-triton/ (``make`` installs
    them); in CI a missing install is a failure."""
    from tools import ascend_lowering as audit

    try:
        audit.driver.check_install()
    except RuntimeError as exc:
        if os.environ.get("CI"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def audit_report(audit_installed):
    """The lowering audit, once per test process (compiled results are cached under
    build/ascend-audit/): the whole matrix, or with ``ASCEND_KVC_AUDIT_SCOPE=quick`` (``make
    test``) every stage once (``tools.ascend_lowering.matrix.SCOPES``)."""
    from tools import ascend_lowering as audit
    from tools.ascend_lowering import matrix as mx

    return audit.run_audit(scope=mx.scope_from_env())


def pytest_collection_modifyitems(config, items):
    skip_cuda = pytest.mark.skip(reason="no CUDA GPU on this machine")
    skip_npu = pytest.mark.skip(reason="no Ascend NPU (torch-npu) on this machine")
    for item in items:
        if item.get_closest_marker("cuda") is not None and not torch.cuda.is_available():
            item.add_marker(skip_cuda)
        if item.get_closest_marker("npu") is not None and not _has_npu():
            item.add_marker(skip_npu)
    items.sort(key=lambda item: getattr(item, "originalname", item.name) not in SLOW_FIRST)  # stable
