"""triton-ascend 3.2.0's interpreter itself: the speed shims change nothing, and its known faults.

Faults of the 3.2 interpreter found while running this project's kernels (each is a strict xfail
below that asserts the correct behaviour: when a triton-ascend release fixes one, its test
XPASSes, fails, and this list and the README need updating):

1. ``x.to(tl.bfloat16)`` from fp32 truncates the mantissa instead of rounding to nearest even,
   also with ``fp_downcast_rounding="rtne"`` (``InterpreterBuilder.cast_impl`` ignores the rounding
   mode). Triton 3.8's interpreter does the same. The kernels never rely on it: bf16 rounding is
   done with integer bit operations (``triton_helpers.bf16_rne_bits``).
2. bf16 -> fp32 of subnormal bf16 values is wrong (0x0001 becomes 0.0, 0x0003 becomes 2^-127);
   Triton 3.8's interpreter too. A bf16 state cache holding subnormals would be read wrongly
   under the interpreter only; no test input holds them.
3. ``~`` on a bool tensor raises ``InterpreterError: 'InterpreterBuilder' object has no attribute
   'get_int1_ty'`` (triton-ascend's patched ``to_ir``). The kernels use ``tl.where`` instead.
4. ``tl.maximum(NaN, 1.0)`` (default ``propagate_nan``) returns NaN: ``create_maxnumf`` is
   ``np.maximum``. Compiled code (LLVM ``maxnum``) and Triton 3.8's interpreter return 1.0. It
   only changes the garbage a NaN window writes into its own slot.

Not faults in the values, but why this folder needs its set-up: the interpreter calls ``int()`` on
one-element arrays, which numpy 2 refuses (``TypeError: only 0-dimensional arrays can be
converted to Python scalars``), hence numpy 1.26.4 in ``.ascend-numpy/``; and triton-ascend's
``tl.max``/``tl.min`` take the interpreter's per-element Python loop (see conftest.py's shim).
"""

from __future__ import annotations

import math

import pytest
import torch
import triton
import triton.language as tl

from ascend_kvc import c128_256_512_compress
from ascend_kvc.oracle import check_cache

import interpreter_shim
import reduce_shim
from cases import general_case


# --- the speed shim changes no value --------------------------------------------------------------

@triton.jit
def _reductions_kernel(x_ptr, i_ptr, out_ptr, out_i_ptr, R: tl.constexpr, D: tl.constexpr):
    r = tl.arange(0, R)
    d = tl.arange(0, D)
    x = tl.load(x_ptr + r[:, None] * D + d[None, :])
    tl.store(out_ptr + d, tl.max(x, axis=0))
    tl.store(out_ptr + D + d, tl.min(x, axis=0))
    tl.store(out_ptr + 2 * D + r, tl.max(x, axis=1))
    tl.store(out_ptr + 2 * D + R + r, tl.min(x, axis=1))
    xi = tl.load(i_ptr + r[:, None] * D + d[None, :])
    tl.store(out_i_ptr + d, tl.max(xi, axis=0))
    tl.store(out_i_ptr + D + d, tl.min(xi, axis=0))


def _reductions() -> tuple[torch.Tensor, torch.Tensor]:
    R, D = 4, 8
    special = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-45, -3.5, 2.0 ** 100]
    g = torch.Generator().manual_seed(0)
    x = torch.randn(R, D, generator=g)
    x[0] = torch.tensor(special)
    x[1, ::2] = -0.0
    x[2, 1::2] = 0.0
    x[3, 5] = math.nan
    xi = torch.randint(-2**31, 2**31 - 1, (R, D), generator=g, dtype=torch.int32)
    out = torch.empty(2 * D + 2 * R)
    out_i = torch.empty(2 * D, dtype=torch.int32)
    _reductions_kernel[(1,)](x, xi, out, out_i, R=R, D=D)
    return out.view(torch.int32), out_i


def test_shim_reductions_are_bit_identical(generic_reduce):
    """tl.max/tl.min on NaN, infinities, signed zeros, subnormals and int32: same bits either way."""
    slow = _reductions()
    with reduce_shim.active():
        fast = _reductions()
    assert torch.equal(slow[0], fast[0]) and torch.equal(slow[1], fast[1])


@pytest.mark.parametrize("route", ["ascend", "ascend:fused"])
def test_shim_changes_no_byte_of_a_call(route, generic_reduce):
    """One whole call through the interpreter's own reductions writes the bytes the shim writes."""
    w = general_case(128, 8, seed=3, num_reqs=1, outputs_per_req=1)
    slow = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route)
    assert check_cache(w.checked_args(), slow, w.kv_cache).ok
    with reduce_shim.active():
        fast = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route)
    assert torch.equal(slow, fast)


def test_remembered_numpy_dtypes_are_the_interpreters():
    """conftest.py's remembered ``_get_np_dtype`` gives the 3.2 interpreter's own answer for every
    scalar, pointer and block type, asked twice (the second from its table)."""
    from triton.runtime import interpreter

    np_dtype = interpreter._get_np_dtype
    shipped = getattr(np_dtype, "original", np_dtype)
    types = interpreter_shim.np_dtype_probe_types()
    for _ in range(2):
        assert [np_dtype(t) for t in types] == [shipped(t) for t in types]


# --- known faults of the 3.2 interpreter (strict xfails: they assert the right answer) ------------

@triton.jit
def _to_bf16_kernel(x_ptr, y_ptr, N: tl.constexpr, RTNE: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(x_ptr + i)
    if RTNE:
        y = x.to(tl.bfloat16, fp_downcast_rounding="rtne")
    else:
        y = x.to(tl.bfloat16)
    tl.store(y_ptr + i, y)


@triton.jit
def _to_fp32_kernel(x_ptr, y_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(y_ptr + i, tl.load(x_ptr + i).to(tl.float32))


@triton.jit
def _not_kernel(x_ptr, y_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(y_ptr + i, tl.where(~(tl.load(x_ptr + i) > 0), 1, 0))


@triton.jit
def _maximum_kernel(x_ptr, y_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(y_ptr + i, tl.maximum(tl.load(x_ptr + i), 1.0))


@pytest.mark.xfail(strict=True, reason="3.2 interpreter fault 1: fp32 -> bf16 truncates")
@pytest.mark.parametrize("rtne", [False, True])
def test_fp32_to_bf16_rounds_to_nearest_even(rtne):
    # 0.3, 0.1 and 0.6 round up; 1 + 3 * 2^-8 is a tie that rounds to even (up).
    x = torch.tensor([0.3, 0.1, 0.6, 1 + 3 * 2**-8, 2.0 - 2**-9, 1.0, -0.3, 4.0 - 2**-8])
    y = torch.empty(8, dtype=torch.bfloat16)
    _to_bf16_kernel[(1,)](x, y, N=8, RTNE=rtne)
    assert torch.equal(y.view(torch.int16), x.to(torch.bfloat16).view(torch.int16))


@pytest.mark.xfail(strict=True, reason="3.2 interpreter fault 2: bf16 subnormals -> fp32 are wrong")
def test_bf16_subnormals_to_fp32():
    x = torch.tensor([1, 3, 0x7F, -32767, 0x80, 0x3F80, 0, 0], dtype=torch.int16).view(torch.bfloat16)
    y = torch.empty(8)
    _to_fp32_kernel[(1,)](x, y, N=8)
    assert torch.equal(y, x.float())


@pytest.mark.xfail(strict=True, raises=triton.runtime.errors.InterpreterError,
                   reason="3.2 interpreter fault 3: '~' on a bool tensor (no get_int1_ty)")
def test_invert_a_bool_tensor():
    x = torch.tensor([1.0, -1.0, 0.0, 2.0])
    y = torch.empty(4, dtype=torch.int32)
    _not_kernel[(1,)](x, y, N=4)
    assert y.tolist() == [0, 1, 1, 0]


@pytest.mark.xfail(strict=True, reason="3.2 interpreter fault 4: tl.maximum(NaN, x) is NaN (maxnumf as np.maximum)")
def test_maximum_ignores_nan_by_default():
    x = torch.tensor([math.nan, 0.5, 2.0, -1.0])
    y = torch.empty(4)
    _maximum_kernel[(1,)](x, y, N=4)
    assert y.tolist() == [1.0, 1.0, 2.0, 1.0]
