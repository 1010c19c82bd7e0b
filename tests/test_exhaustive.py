"""Exhaustive and edge tests: the scale exponent over every bf16 value, window geometry at block
edges, and RoPE rows at the end of cos_sin_cache."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
import triton
import triton.language as tl

from ascend_kvc import ASCEND_STAGES, c128_256_512_compress
from ascend_kvc.oracle import scale_exponent_f64
from ascend_kvc.triton_helpers import pow2_scale_exponent
from ascend_kvc.workloads import make_workload

from cases import run_and_check

ON_NPU = hasattr(torch, "npu") and torch.npu.is_available()
DEVICE = "cuda" if torch.cuda.is_available() else "npu" if ON_NPU else "cpu"
FALLBACK = [] if ON_NPU else ["gpgpu"]
# The routes whose window walk differs: per-row lookups, pre-gather, masked and unmasked block
# tiles, the fused-RMSNorm default, the split gather (and the fused rung where it exists).
EDGE_ROUTES = ["reference", "ascend:random-gather", "ascend:pre-gather", "ascend:block-gather",
               "ascend:block-gather-nomask", "ascend", *FALLBACK]
if "fused" in ASCEND_STAGES:
    EDGE_ROUTES.append("ascend:fused")
# Every stage resolves its indices in one of these ways: per-row, framework pre-gather, block
# tiles (all block stages share resolve_output), the split gather.
ROPE_ROUTES = ["reference", "ascend:random-gather", "ascend:pre-gather", "ascend:block-gather", "ascend", *FALLBACK]


# --- the scale exponent over every finite non-negative bf16 value ------------------------------

def _all_nonnegative_finite_bf16() -> torch.Tensor:
    """Every bf16 bit pattern from +0 up to the largest finite value (0x7f7f), as float32."""
    bits = torch.arange(0, 0x7F80, dtype=torch.int32) << 16
    return bits.view(torch.float32)


def _exact_exponent(a: float) -> int:
    """The least integer e with 127 * 2^e >= max(a, 1e-4), in exact rational arithmetic."""
    target = max(Fraction(a), Fraction(1, 10000))
    e = math.frexp(float(target))[1] - 7
    while 127 * Fraction(2) ** e < target:
        e += 1
    while 127 * Fraction(2) ** (e - 1) >= target:
        e -= 1
    return e


@pytest.fixture(scope="module")
def exponent_truth():
    amax = _all_nonnegative_finite_bf16()
    return amax, torch.tensor([_exact_exponent(a) for a in amax.tolist()], dtype=torch.int32)


@triton.jit
def _exponent_kernel(amax_ptr, e_ptr, n, BLOCK: tl.constexpr):  # in [n] float32, out [n] int32
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(e_ptr + offs, pow2_scale_exponent(tl.load(amax_ptr + offs, mask=mask, other=0.0)), mask=mask)


def _triton_exponents(amax: torch.Tensor) -> torch.Tensor:
    a = amax.to(DEVICE)
    e = torch.empty(a.shape, dtype=torch.int32, device=DEVICE)
    block = 32768
    _exponent_kernel[(triton.cdiv(a.numel(), block),)](a, e, a.numel(), BLOCK=block)
    return e.cpu()


def _report(name, got, amax, want):
    bad = (got != want).nonzero().squeeze(1)
    if bad.numel():
        i = int(bad[0])
        return (f"{name}: {bad.numel()} bf16 values wrong; first amax={amax[i].item()!r} "
                f"(bits {int(amax[i:i + 1].view(torch.int32)) >> 16:#06x}): got {int(got[i])}, want {int(want[i])}")
    return ""


def test_exponent_truth_sanity(exponent_truth):
    amax, want = exponent_truth
    assert amax.numel() == 0x7F80
    assert _exact_exponent(1.0) == -6 and _exact_exponent(1.9921875) == -5 and _exact_exponent(0.0) == -20
    assert _exact_exponent(127.0) == 0 and _exact_exponent(127.5) == 1 and _exact_exponent(3e38) > 120


def test_triton_exponent_every_bf16(exponent_truth):
    amax, want = exponent_truth
    got = _triton_exponents(amax)
    assert not _report("triton_helpers.pow2_scale_exponent", got, amax, want)


def test_torch_exponent_every_bf16(exponent_truth):
    from ascend_kvc.reference import _pow2_exponent_from_bits

    amax, want = exponent_truth
    got = _pow2_exponent_from_bits(amax)
    assert not _report("reference._pow2_exponent_from_bits", got, amax, want)
    # The reference's baseline formula (log2) on this backend, where it must agree off the boundaries.
    baseline = torch.ceil(torch.log2(amax.clamp_min(1e-4) / 127)).to(torch.int32)
    exact_powers = (amax.double().clamp_min(1e-4) / 127).log2().frac() == 0
    assert not _report("ceil(log2(amax / 127))", baseline[~exact_powers], amax[~exact_powers], want[~exact_powers])


def test_oracle_exponent_every_bf16(exponent_truth):
    amax, want = exponent_truth
    got = scale_exponent_f64(amax.double()).to(torch.int32)
    assert not _report("oracle.scale_exponent_f64", got, amax, want)


# --- window geometry at block edges -----------------------------------------------------------

def _edge_case(C: int, block_size: int, positions: list[int], seed: int = 0):
    """One request whose boundary tokens sit at ``positions``; shuffled table, non-zero cache."""
    L = max(positions) + 1 + block_size
    w = make_workload(1, L, C, block_size=block_size, shuffle=True, nonzero_cache=True, seed=seed, device=DEVICE)
    g = torch.Generator().manual_seed(seed)
    slots = torch.randperm(w.kv_cache.shape[0] * 64, generator=g)[:len(positions)]
    mapping = torch.full((L,), -1, dtype=torch.int64)
    mapping[positions] = slots
    w.boundary_token_indices = torch.tensor(positions, device=DEVICE)
    w.kv_slot_mapping = mapping.to(DEVICE)
    return w


# block_size -> boundary positions (C = 128) and what each exercises.
EDGE_GEOMETRIES = {
    1: [127, 200],  # one row per block: 128 lookups
    8: [127, 135, 140],  # window starting at a block boundary (0, 8) and not (13)
    128: [127, 255, 300],  # window exactly one block (twice), then across two
    200: [127, 150, 199, 330],  # inside one block: at its start, in its middle, ending at its end; across two
    256: [200, 255, 400],  # inside one block, ending at its end; across two
}


# Block size 1 under the interpreter is slow on the BLOCK_D=64 block stages (128 steps times 8 tiles);
# block-d512 ("ascend") walks the same one-row blocks with the same code.
_EDGE_PARAMS = [(route, bs) for route in EDGE_ROUTES for bs in EDGE_GEOMETRIES
                if not (bs == 1 and route.startswith("ascend:block-gather"))]


@pytest.mark.parametrize("route,block_size", _EDGE_PARAMS)
def test_window_at_block_edges(route, block_size):
    w = _edge_case(128, block_size, EDGE_GEOMETRIES[block_size], seed=block_size)
    report = run_and_check(w, route)
    assert report.num_outputs_written == len(EDGE_GEOMETRIES[block_size])


# --- RoPE row at the end of cos_sin_cache -------------------------------------------------------

def _rope_edge_case():
    w = _edge_case(128, 8, [127, 255, 300], seed=5)  # rope rows 0, 128, 256
    return w


@pytest.mark.parametrize("route", ROPE_ROUTES)
def test_rope_row_is_the_last_row(route):
    w = _rope_edge_case()
    w.cos_sin_cache = w.cos_sin_cache[:257].clone()  # row 256 = max_pos - 1: valid
    w.cos_sin_cache[256] = torch.linspace(-1, 1, 64, device=DEVICE)  # a row unlike its neighbours
    report = run_and_check(w, route)
    assert report.num_outputs_written == 3


@pytest.mark.parametrize("route,n_cores", [
    *((route, None) for route in ["reference", *(f"ascend:{s}" for s in ASCEND_STAGES), *FALLBACK]),
    ("ascend", 1), ("ascend:fused", 1),  # the unsplit whole-window kernels (the default splits here)
])
def test_rope_row_of_boundaries_at_multiples_of_C(route, n_cores, cores):
    """Boundary tokens at p = 256 and 384 (p % C == 0, the first position of a block of C) take
    RoPE rows 256 and 384, not the row of the C positions before: ``(p // C) * C``."""
    if n_cores is not None:
        cores(n_cores)
    report = run_and_check(_edge_case(128, 8, [127, 256, 384], seed=6), route)
    assert report.num_outputs_written == 3


@pytest.mark.parametrize("route", ROPE_ROUTES)
def test_rope_row_one_past_the_end(route):
    w = _rope_edge_case()
    w.cos_sin_cache = w.cos_sin_cache[:256].clone()  # row 256 = max_pos: invalid for output 2
    with pytest.raises(ValueError, match=r"cos_sin_cache: output 2 "):
        c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route)
    report = run_and_check(w, route, validate=False)  # output 2 skipped, its slot untouched
    assert report.num_outputs_written == 2


@pytest.mark.parametrize("route", ROPE_ROUTES)
def test_empty_cos_sin_cache_writes_nothing(route):
    w = _rope_edge_case()
    w.cos_sin_cache = w.cos_sin_cache[:0]
    out = w.kv_cache.clone()
    c128_256_512_compress(*w.args(), out=out, route=route, validate=False)
    assert torch.equal(out, w.kv_cache)
    with pytest.raises(ValueError, match=r"cos_sin_cache: output 0 "):
        c128_256_512_compress(*w.args(), out=out, route=route)
