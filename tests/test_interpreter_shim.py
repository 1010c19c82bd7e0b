"""The interpreter speed shim (tests/interpreter_shim.py) is in, does its work and changes no value."""

import os

import pytest
import torch
import triton
import triton.language as tl

import interpreter_shim
from ascend_kvc import c128_256_512_compress

from cases import general_case

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1" or not interpreter_shim.supported(),
    reason="the shim is for community Triton 3.8's CPU interpreter")


@triton.jit
def _scaled_row_stats(x, scale):
    return tl.max(x, axis=0) * scale, tl.sum(x, axis=0) * scale


@triton.jit
def _helpers_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):  # in [programs, BLOCK] fp32, out [programs, 2]
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + pid * BLOCK + offs, mask=offs < n, other=float("-inf"))
    hi, _ = _scaled_row_stats(x, 2.0)
    _, total = _scaled_row_stats(tl.where(offs < n, x, 0.0), 0.5)
    acc = tl.zeros([BLOCK], dtype=tl.float32) + total
    tl.store(out_ptr + pid * 2, hi)
    tl.store(out_ptr + pid * 2 + 1, tl.max(acc, axis=0))


def _helpers(x: torch.Tensor, n: int) -> torch.Tensor:
    out = torch.empty(x.shape[0], 2)
    _helpers_kernel[(x.shape[0],)](x, out, n, BLOCK=x.shape[1])
    return out


def test_shim_is_installed_for_this_run():
    if os.environ.get(interpreter_shim.DISABLE_ENV) == "0":
        pytest.skip(f"{interpreter_shim.DISABLE_ENV}=0 leaves the shim out")
    assert interpreter_shim.installed()


def test_kernel_with_helpers_gives_the_same_values_and_skips_repeats():
    x = torch.randn(5, 64, generator=torch.Generator().manual_seed(0))
    with interpreter_shim.removed():
        plain = _helpers(x, 50)
    shimmed_before = dict(interpreter_shim.STATS)
    with interpreter_shim.active():
        shimmed = _helpers(x, 50)
        skipped = interpreter_shim.STATS["skipped"] - shimmed_before["skipped"]
    assert torch.equal(plain, shimmed)
    want = torch.stack([x[:, :50].amax(1) * 2.0, x[:, :50].sum(1) * 0.5], dim=1)
    torch.testing.assert_close(shimmed, want)
    # 5 programs x 5 helper calls (2 of ours, tl.max twice, tl.sum, tl.zeros: 6), each one's
    # modules patched by the launch or by an earlier call; at most the first call per module runs.
    assert skipped >= 5 * 6 - 2, skipped
    # The launch restored what it patched: the language is Triton's own again.
    assert tl.core.is_builtin(tl.load) and tl.core.is_builtin(tl.tensor.__add__)


@pytest.mark.parametrize("route", ["ascend:block-gather", "ascend", "gpgpu"])
def test_operator_bytes_are_the_same_without_the_shim(route):
    w = general_case(128, 8, seed=3, num_reqs=1, outputs_per_req=2)
    with interpreter_shim.removed():
        plain = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route)
    with interpreter_shim.active():
        shimmed = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route)
    assert torch.equal(plain, shimmed)


def test_overflow_sanitizer_is_off_only_while_its_verdict_is_ignored():
    """The interpreter's int32 overflow sanitizer feeds ``device_assert``, which reads it only with
    ``debug`` on: the shim turns it off with ``debug`` off, keeps it with ``debug`` on, and puts
    Triton's options back when it is removed."""
    import dataclasses

    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    with interpreter_shim.removed():
        shipped = builder.options
        assert shipped.sanitize_overflow and not shipped.debug
        try:
            interpreter_shim.install()
            assert builder.options.sanitize_overflow is False
            assert dataclasses.replace(builder.options, sanitize_overflow=True) == shipped
            interpreter_shim.uninstall()
            assert builder.options is shipped
            builder.options = dataclasses.replace(shipped, debug=True)
            interpreter_shim.install()
            assert builder.options.sanitize_overflow and builder.options.debug
        finally:
            interpreter_shim.uninstall()
            builder.options = shipped


def test_numpy_dtypes_are_the_interpreters():
    """The shim's remembered ``_get_np_dtype`` gives the interpreter's answer for every scalar,
    pointer and block type, asked twice (the second from its table)."""
    from triton.runtime import interpreter

    types = interpreter_shim.np_dtype_probe_types()
    with interpreter_shim.removed():
        shipped = [interpreter._get_np_dtype(t) for t in types]
    with interpreter_shim.active():
        assert interpreter._get_np_dtype is not interpreter_shim._STATE["np_dtype"]
        for _ in range(2):
            assert [interpreter._get_np_dtype(t) for t in types] == shipped


@pytest.mark.parametrize("was", [False, True], ids=["out", "in"])
@pytest.mark.parametrize("on", [False, True], ids=["removed", "active"])
def test_a_toggled_shim_is_as_asked_inside_and_as_it_was_after(on, was):
    """``toggled`` (behind both shims' ``active`` and ``removed``): the shim in or out as asked
    within the block, and as it was before it afterwards, also when the block raises."""
    state = {"in": was}
    shim = (lambda: state["in"], lambda: state.update({"in": True}), lambda: state.update({"in": False}))
    with interpreter_shim.toggled(on, *shim):
        assert state["in"] is on
    assert state["in"] is was
    with pytest.raises(RuntimeError), interpreter_shim.toggled(on, *shim):
        raise RuntimeError
    assert state["in"] is was
