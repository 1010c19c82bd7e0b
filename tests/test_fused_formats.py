"""``ascend:fused`` writes every cache format: int8 and fp8_e4m3 slots into pages of any number of
slots, and bf16 rows, unsplit and split, as a call and as a step, judged by the independent float64
oracle; its e4m3 rounding (integer bit operations) against ``torch.float8_e4m3fn``."""

import pytest
import torch
import triton
import triton.language as tl

from ascend_kvc import RouteUnavailableError, c128_256_512_compress, compress_step
from ascend_kvc.api import clear_launch_plans
from ascend_kvc.oracle import check_cache, e4m3_value, scale_exponent_f64
from ascend_kvc.slot_bytes import e4m3_bits, e4m3_scale_exponent
from ascend_kvc.workloads import make_workload

from cases import check_slot_past_the_cache_is_skipped
from launches import record_triton_launches
from test_golden import FILL, GOLDEN_SLOT, GOLDEN_SLOT_BYTES, golden_inputs
from test_golden_formats import (BF16_GOLDEN_ROW_BYTES, FP8_GOLDEN_SLOT_BYTES, _first_difference, bf16_inputs,
                                 expected_pages, fp8_inputs)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FORMATS = ["int8", "fp8_e4m3", "bf16"]


def _case(kv_format, slots_per_page, seed=0, block_size=8, state_dtype=torch.float32):
    """One request of 384 tokens at C = 128: 3 outputs, shuffled blocks and slots, a random cache."""
    return make_workload(1, 384, 128, block_size=block_size, shuffle=True, nonzero_cache=True, seed=seed,
                         device=DEVICE, state_dtype=state_dtype, kv_format=kv_format, slots_per_page=slots_per_page)


def _check(w, got, before, what):
    report = check_cache(w.checked_args(), got, before)
    assert report.ok, f"{what}: {report}"
    assert report.num_outputs_written == w.num_outputs == 3, what


@pytest.mark.parametrize("cores", [1, 8], ids=["unsplit", "split"])
@pytest.mark.parametrize("slots_per_page", [1, 2, 64, 128])
@pytest.mark.parametrize("kv_format", FORMATS)
def test_fused_matches_the_truth(kv_format, slots_per_page, cores, monkeypatch):
    """Every format and page width, the unsplit kernel (one core) and the split pieces' merge (8)."""
    monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", str(cores))
    clear_launch_plans()
    w = _case(kv_format, slots_per_page, seed=slots_per_page + cores,
              state_dtype=torch.bfloat16 if slots_per_page == 2 else torch.float32)
    before = w.kv_cache.clone()
    with record_triton_launches() as launches:
        got = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route="ascend:fused", **w.format_kwargs())
    want = ["_window_piece_kernel", "_merge_to_slot_kernel"] if cores > 1 else ["_fused_compress_kernel"]
    assert [name for name, _ in launches] == want
    _check(w, got, before, f"{kv_format}, P={slots_per_page}, cores={cores}")


@pytest.mark.parametrize("kv_format", FORMATS)
def test_fused_step_and_new_cache_match_the_truth(kv_format, monkeypatch):
    """``compress_step`` on ``ascend:fused`` (the boundaries found on the device) and ``out=None``."""
    monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", "8")
    clear_launch_plans()
    w = _case(kv_format, 3, seed=11)
    before = w.kv_cache.clone()
    out = w.kv_cache.clone()
    compress_step(w.state_cache, w.token_to_req, w.positions, w.block_table, w.rms_norm_weight, w.cos_sin_cache,
                  w.kv_slot_mapping, out, block_size=w.block_size, compress_ratio=w.compress_ratio,
                  rms_norm_eps=w.rms_norm_eps, route="ascend:fused", **w.format_kwargs())
    _check(w, out, before, f"step, {kv_format}")
    new = c128_256_512_compress(*w.args(), route="ascend:fused", **w.format_kwargs())
    _check(w, new, torch.zeros_like(before), f"out=None, {kv_format}")


def test_fused_bf16_rows_of_a_four_dimensional_cache():
    """The ``[num_blocks, block_size, 1, 512]`` bf16 cache: slot ``s`` is row ``s`` of its ``[-1, 512]`` view."""
    w = _case("bf16", 4, seed=5)
    w.kv_cache = w.kv_cache.unsqueeze(2)
    assert w.kv_cache.dim() == 4
    before = w.kv_cache.clone()
    got = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route="ascend:fused", **w.format_kwargs())
    _check(w, got, before, "bf16 4-d")


def test_fused_bf16_rows_of_a_strided_cache():
    """Rows wider than 512 values apart (a cache sliced out of a wider one): ``kv_s0`` is the view's row stride."""
    w = _case("bf16", 4, seed=6)
    wide = torch.randn(*w.kv_cache.shape[:-1], 640, device=DEVICE).to(torch.bfloat16)
    wide[..., :512] = w.kv_cache
    before = wide.clone()
    got = c128_256_512_compress(*w.args(), out=wide[..., :512], route="ascend:fused", **w.format_kwargs())
    _check(w, got, before[..., :512], "bf16 strided rows")
    assert torch.equal(wide[..., 512:], before[..., 512:])  # nothing past a row's 512 values is touched


@pytest.mark.parametrize("route", ["ascend", "ascend:triton-quant", "ascend:byte-scatter"])
def test_other_rungs_still_refuse_the_formats(route):
    w = _case("fp8_e4m3", 64)
    with pytest.raises(RouteUnavailableError, match="kv_format='fp8_e4m3'"):
        c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route, **w.format_kwargs())
    w = _case("int8", 2)
    with pytest.raises(RouteUnavailableError, match="2 slots a page"):
        c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route, **w.format_kwargs())


@pytest.mark.parametrize("route", ["ascend:byte-scatter", "ascend:block-d512", "ascend:random-gather"])
@pytest.mark.parametrize("overlap", [False, True], ids=["ratio4", "overlap"])
def test_study_rungs_refuse_ratio_4_and_overlap(route, overlap):
    """The rungs users run compute compress_ratio=4 (tests/test_overlap_kernels.py); the study rungs
    refuse it, naming what they cannot compute, and write nothing."""
    w = make_workload(1, 45, 4, block_size=8, seed=1, device=DEVICE, overlap=overlap)
    out = w.kv_cache.clone()
    with pytest.raises(RouteUnavailableError, match="overlap=True" if overlap else "compress_ratio=4"):
        c128_256_512_compress(*w.args(), out=out, route=route, **w.format_kwargs())
    assert torch.equal(out, w.kv_cache)


@triton.jit
def _e4m3_kernel(x_ptr, byte_ptr, exponent_ptr, n, BLOCK: tl.constexpr):
    k = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + k, mask=k < n, other=0.0)
    tl.store(byte_ptr + k, e4m3_bits(x), mask=k < n)
    tl.store(exponent_ptr + k, e4m3_scale_exponent(tl.abs(x)), mask=k < n)


def _device_e4m3(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.to(DEVICE).contiguous()
    byte = torch.empty(x.shape, dtype=torch.int32, device=DEVICE)
    exponent = torch.empty_like(byte)
    block = 1024
    _e4m3_kernel[(triton.cdiv(x.numel(), block),)](x, byte, exponent, x.numel(), BLOCK=block)
    return byte.cpu(), exponent.cpu()


def _sweep() -> torch.Tensor:
    """fp32 values of |x| <= 448: every e4m3 value, every midpoint between neighbours (ties) and a
    hair either side of it, every bf16 value, fp32 subnormals and zeros, random bit patterns."""
    every = e4m3_value(torch.arange(256, dtype=torch.uint8))
    pos = every[~every.isnan() & (every >= 0)].unique().sort().values.float()
    mids = (pos[1:] + pos[:-1]) / 2
    near = torch.cat([mids, mids.nextafter(torch.zeros_like(mids)), mids.nextafter(torch.full_like(mids, 1e3))])
    bf16 = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()
    g = torch.Generator().manual_seed(0)
    rand = torch.randint(-2**31, 2**31 - 1, (200000,), generator=g,
                         dtype=torch.int64).to(torch.int32).view(torch.float32)
    tiny = torch.tensor([0.0, -0.0, 1e-45, -1e-45, 1e-40, -3e-39, 2.0**-126, 2.0**-10, -(2.0**-10), 2.0**-149])
    x = torch.cat([pos, -pos, near, -near, bf16, rand, tiny])
    return x[x.isfinite() & (x.abs() <= 448)]


def test_e4m3_device_rounding_agrees_with_torch_float8():
    """``slot_bytes.e4m3_bits`` (integer operations on the fp32 bits) byte for byte against
    torch's own float8_e4m3fn conversion, a second implementation; the sign of zero included."""
    x = _sweep()
    ours, _ = _device_e4m3(x)
    theirs = x.to(torch.float8_e4m3fn).view(torch.uint8).to(torch.int32)
    bad = ours != theirs
    assert not bad.any(), (f"{int(bad.sum())} of {x.numel()} differ; first x={x[bad][0].item()!r}: "
                           f"ours {int(ours[bad][0]):#04x}, torch {int(theirs[bad][0]):#04x}")


def test_e4m3_saturates_past_448():
    ours, _ = _device_e4m3(torch.tensor([448.0, 449.0, 464.0, 1e30, -500.0]))
    assert ours.tolist() == [0x7E, 0x7E, 0x7E, 0x7E, 0xFE]


def test_e4m3_scale_exponent_is_the_oracles():
    """The least ``e`` with ``448 * 2^e >= max(amax, 1e-4)``, against the oracle's float64 answer
    (which also says which exponent a bf16 amax at a power-of-two boundary takes)."""
    bf16 = torch.arange(0, 32768, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float()
    amax = torch.cat([bf16[bf16.isfinite() & (bf16 < 2.0**100)], torch.tensor([1e-4, 0.99999e-4, 448.0, 449.0])])
    _, ours = _device_e4m3(amax)
    want = scale_exponent_f64(amax.double(), 448.0)
    assert torch.equal(ours, want.to(torch.int32)), amax[ours != want.to(torch.int32)][:5]


def _on_device(kw: dict) -> dict:
    return {k: v.to(DEVICE) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}


# The hand-derived golden slots (test_golden_formats: e4m3 saturation, ties to even, subnormals,
# -0, the 1e-4 floor; bf16 ties), written by ``ascend:fused`` byte for byte.
@pytest.mark.parametrize("slots_per_page", [1, 2, 64, 128])
@pytest.mark.parametrize("block_size,p", [(4, 255), (3, 255)])
def test_fused_fp8_golden_bytes(block_size, p, slots_per_page):
    kw = fp8_inputs(block_size, p, slots_per_page)
    got = c128_256_512_compress(**_on_device(kw), out=kw["kv_cache"].to(DEVICE), route="ascend:fused",
                                kv_format="fp8_e4m3").cpu()
    want = expected_pages(kw["kv_cache"], FP8_GOLDEN_SLOT_BYTES)
    assert torch.equal(got, want), f"P={slots_per_page}: {_first_difference(got, want)}"


@pytest.mark.parametrize("slots_per_page", [1, 128])
def test_fused_int8_golden_bytes_at_other_page_widths(slots_per_page):
    kw = golden_inputs(3, 255)
    kw["kv_cache"] = torch.full((GOLDEN_SLOT // slots_per_page + 2, slots_per_page * 584), FILL, dtype=torch.uint8)
    got = c128_256_512_compress(**_on_device(kw), out=kw["kv_cache"].to(DEVICE), route="ascend:fused").cpu()
    want = expected_pages(kw["kv_cache"], GOLDEN_SLOT_BYTES)
    assert torch.equal(got, want), f"P={slots_per_page}: {_first_difference(got, want)}"


@pytest.mark.parametrize("four_d", [False, True])
def test_fused_bf16_golden_row(four_d):
    kw = bf16_inputs(4, 255, four_d)
    before = kw["kv_cache"].clone()
    got = c128_256_512_compress(**_on_device(kw), out=before.to(DEVICE), route="ascend:fused", kv_format="bf16").cpu()
    rows, want = got.view(-1, 512), before.view(-1, 512).clone()
    want[GOLDEN_SLOT] = torch.tensor(list(BF16_GOLDEN_ROW_BYTES), dtype=torch.uint8).view(torch.bfloat16)
    assert torch.equal(rows.view(torch.int16), want.view(torch.int16)), \
        _first_difference(rows.view(torch.int16), want.view(torch.int16))


@pytest.mark.parametrize("kv_format,slots_per_page", [("fp8_e4m3", 2), ("bf16", 4)])
def test_fused_skips_a_slot_past_the_cache(kv_format, slots_per_page):
    check_slot_past_the_cache_is_skipped(_case(kv_format, slots_per_page, seed=21), "ascend:fused")


@pytest.mark.parametrize("device_type,kv_format,overlap,expected,refused", [
    ("cuda", "fp8_e4m3", False, "gpgpu", None),                # vLLM's slot on a GPU: gpgpu writes it itself
    ("cuda", "bf16", True, "gpgpu", None),                     # and the overlapping compressor
    ("npu", "bf16", False, "ascend:fused", "kv_format"),       # vLLM-Ascend's rows on a 910B
    ("npu", "int8", True, "ascend:triton-quant", None),        # the default computes the overlap itself
    ("npu", "fp8_e4m3", True, "ascend:fused", "kv_format"),    # the default computes overlap, not e4m3
    ("cpu", "fp8_e4m3", False, "reference", "kv_format"),      # CPU tensors: the reference, as for every format
])
def test_auto_picks_fused_for_the_formats_it_writes(device_type, kv_format, overlap, expected, refused):
    """route='auto' chose gpgpu/ascend by device; gpgpu computes every format and the overlap, the
    default the overlap; for a format the default refuses it falls to fused on an NPU, and to the
    reference route only where fused cannot compute the arguments."""
    from types import SimpleNamespace

    from ascend_kvc import routes

    args = SimpleNamespace(device=SimpleNamespace(type=device_type), kv_format=kv_format, overlap=overlap,
                           compress_ratio=4 if overlap else 128, slots_per_page=64,
                           kv_cache=torch.empty(1, 64 * 584, dtype=torch.uint8))
    first = routes.ROUTES["gpgpu" if device_type == "cuda" else "ascend:triton-quant"]
    assert routes.for_arguments("auto", first, args).name == expected
    if refused is None:
        assert routes.for_arguments(first.name, first, args) is first
        return
    with pytest.raises(routes.RouteUnavailableError, match=refused):
        routes.for_arguments(first.name, first, args)
