"""Set-up for tests/triton_ascend/: the Ascend kernels under triton-ascend 3.2.0's own interpreter.

These tests run only in a process whose ``import triton`` is triton-ascend 3.2.0 from the side
folder ``.ascend-triton/`` with numpy < 2 from ``.ascend-numpy/`` (both put first on
``PYTHONPATH``): tests/test_triton_ascend_interpreter.py starts that process. The main run does
not collect this folder (``collect_ignore`` in tests/conftest.py); naming it on the command line
in the wrong environment stops here with what is wrong, before any test runs.

Three speed shims, the only changes to the interpreter; none changes a value.

Repeated language patching: the 3.2 interpreter patches ``triton.language`` for the interpreter
each time a kernel or a ``@triton.jit`` helper runs, and never undoes it, so every patch after the
first of a module does nothing but scan it again (thousands of times a launch).
``_skip_repeated_language_patches`` lets only the first patch of each module set run (the
modules a function sees found once, ``interpreter_shim.lang_modules``).
``ASCEND_KVC_TA_REPATCH=1`` turns it off.

Numpy dtypes: the interpreter's ``_get_np_dtype`` builds its table of Triton types (hashing each)
on every call, 12% of this folder's time; ``interpreter_shim.remembered_np_dtype`` asks it once a
type. ``ASCEND_KVC_TA_NP_DTYPES=1`` turns it off.

Reductions: triton-ascend replaces
``tl.max``/``tl.min`` with versions whose combine functions (``_elementwise_max_default``,
``_elementwise_min``, in ``triton.triton_patch.language.standard``) the 3.2 interpreter does not
recognise, so every such reduction falls back to its per-element Python loop
(``ReduceOps.generic_reduce``): 10-20 times slower on these kernels, several minutes for this
folder. The shim sends those reductions to the numpy path the interpreter already uses for
community Triton's ``tl.max``/``tl.min`` (``ReduceOps.min_max`` with ``np.max``/``np.min``). The
loop combines with ``tl.maximum``/``tl.minimum``, which the 3.2 interpreter evaluates as
``np.maximum``/``np.minimum`` (NaN-propagating, like ``np.max``/``np.min``), so results are
equal; test_ta_interpreter.py checks that on NaN, infinities and signed zeros and on a whole
operator call. ``ASCEND_KVC_TA_GENERIC_REDUCE=1`` turns the shim off.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ["TRITON_INTERPRET"] = "1"  # before any kernel is defined (ascend_kvc defines them lazily)

HERE = Path(__file__).resolve().parent
for folder in (HERE.parent, HERE):  # cases.py and the main tests' case builders; reduce_shim.py
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import interpreter_shim  # noqa: E402  (its version-independent helpers; its install() is for Triton 3.8)
import reduce_shim  # noqa: E402


def _environment_problems() -> list[str]:
    import numpy
    import torch
    import triton

    from tools.ascend_lowering.driver import ascend_triton_path

    side = ascend_triton_path().resolve()
    problems = []
    triton_file = Path(triton.__file__).resolve()
    if side not in triton_file.parents:
        problems.append(f"triton is {triton_file}, not triton-ascend from {side}")
    if not triton.__version__.startswith("3.2"):
        problems.append(f"triton.__version__ is {triton.__version__}, not 3.2.x")
    if int(numpy.__version__.split(".")[0]) >= 2:
        problems.append(f"numpy is {numpy.__version__} ({numpy.__file__}); triton-ascend 3.2.0's interpreter "
                        "needs numpy < 2 (make installs 1.26.4 into .ascend-numpy/)")
    if torch.cuda.is_available():
        problems.append("a CUDA device is visible; these tests run on CPU tensors only (CUDA_VISIBLE_DEVICES='')")
    return problems


def _skip_repeated_language_patches():
    from triton.runtime import interpreter

    original, patched = interpreter._patch_lang, set()

    def patch_lang(fn):
        modules = interpreter_shim.lang_modules(fn)
        if modules and modules <= patched:
            return
        original(fn)
        patched.update(modules)

    interpreter._patch_lang = patch_lang


def pytest_configure(config):
    problems = _environment_problems()
    if problems:
        raise pytest.UsageError(
            "tests/triton_ascend/ runs under triton-ascend 3.2.0's interpreter only; start it with "
            "`pytest tests/test_triton_ascend_interpreter.py` (which sets PYTHONPATH): " + "; ".join(problems))
    if os.environ.get("ASCEND_KVC_TA_GENERIC_REDUCE") != "1":
        reduce_shim.install()
    if os.environ.get("ASCEND_KVC_TA_REPATCH") != "1":
        _skip_repeated_language_patches()
    if os.environ.get("ASCEND_KVC_TA_NP_DTYPES") != "1":
        from triton.runtime import interpreter

        interpreter._get_np_dtype = interpreter_shim.remembered_np_dtype(interpreter._get_np_dtype)
    for line in _QUIET:
        config.addinivalue_line("filterwarnings", line)


# The 3.2 interpreter calls ``int()`` on one-element arrays (the reason for numpy 1.26: numpy 2
# refuses it), and numpy 1.25+ warns each time, thousands of times a test.
_QUIET = ("ignore:Conversion of an array with ndim > 0 to a scalar is deprecated:DeprecationWarning",)


@pytest.fixture
def generic_reduce():
    """Within the test, every reduction takes the 3.2 interpreter's own path (the shim is off)."""
    with reduce_shim.removed():
        yield
