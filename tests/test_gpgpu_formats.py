"""Route ``gpgpu`` beyond the challenge's layout: ``compress_ratio=4`` (windows of 4 rows, shorter
than a step of the gather's tile), the overlapping ratio-4 compressor (2C rows of 2048-wide state),
``kv_format`` ``"fp8_e4m3"`` and ``"bf16"``, and pages of any number of slots; as a call and as a
step (``compress_step``), judged by the independent float64 oracle and by the hand-derived golden
bytes of ``test_golden_formats``."""

import pytest
import torch

from ascend_kvc import c128_256_512_compress, compress_step
from ascend_kvc.api import clear_launch_plans
from ascend_kvc.oracle import check_cache
from ascend_kvc.workloads import make_workload
from gpgpu_fallback import route as gpgpu_route
from gpgpu_fallback import tuning
from tools import memcheck

from cases import check_slot_past_the_cache_is_skipped, general_case, run_and_check
from launches import record_triton_launches
from test_golden import FILL, GOLDEN_SLOT, GOLDEN_SLOT_BYTES, golden_inputs
from test_golden_formats import (BF16_GOLDEN_ROW_BYTES, FP8_GOLDEN_SLOT_BYTES, _first_difference, _on_device,
                                 bf16_inputs, expected_pages, fp8_inputs, overlap_inputs)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.mark.parametrize("overlap", [False, True], ids=["plain", "overlap"])
@pytest.mark.parametrize("block_size", [1, 3, 4, 8, 64])
def test_ratio_4_at_every_block_size(block_size, overlap):
    """Windows of 4 (or 8 overlapping) rows at unaligned boundaries, p = C - 1 among them (the
    overlap's first window: its older rows at negative positions), a skipped slot, shuffled blocks."""
    w = general_case(4, block_size, seed=block_size, num_reqs=2, outputs_per_req=3, device=DEVICE, overlap=overlap)
    assert w.state_cache.shape[-1] == (2048 if overlap else 1024)
    report = run_and_check(w, "gpgpu")
    assert report.num_outputs_written >= 4


@pytest.mark.parametrize("steps", [8, 16], ids=["8-row-steps", "16-row-steps"])
@pytest.mark.parametrize("pieces", ["planned", "one"])
@pytest.mark.parametrize("overlap", [False, True], ids=["plain", "overlap"])
@pytest.mark.parametrize("block_size", [3, 8, 64])
def test_sm90_ratio_4_tiles_on_any_device(block_size, overlap, pieces, steps, monkeypatch):
    """The H100/H200 table's ratio-4 tiles (one program a whole head; 16-row steps for a few
    outputs, 8-row steps for more), wherever the suite runs: the CPU interpreter computes them as
    the GPU does. With the window in ``one`` piece, as a prefill chunk's thousands of outputs plan
    it, each program stores its output from its registers; with the pieces planned for these few
    outputs, the last one merges them."""
    used = []
    table = {t.rows_per_step: t for _, t in tuning.TILES_BY_RATIO[("cuda:sm90", 4)]}
    monkeypatch.setattr(gpgpu_route, "device_kind", lambda dev: "cuda:sm90")
    monkeypatch.setattr(gpgpu_route, "tiles_for", lambda *a: used.append(table[steps]) or used[-1])
    if pieces == "one":
        monkeypatch.setattr(gpgpu_route, "window_splits", lambda *a: 1)
    clear_launch_plans()
    w = general_case(4, block_size, seed=40 + block_size, num_reqs=2, outputs_per_req=3, device=DEVICE,
                     overlap=overlap)
    run_and_check(w, "gpgpu")
    assert used and all(t is table[steps] for t in used) and used[0].block_d == 512
    clear_launch_plans()


# (kv_format, slots a page, C, overlap, block_size): every format with several page widths, at
# ratio 128 and 4, plain and overlapping, block sizes that split a window anywhere.
CALLS = [
    ("fp8_e4m3", 1, 128, False, 8),
    ("fp8_e4m3", 2, 128, False, 3),
    ("fp8_e4m3", 3, 4, False, 8),
    ("fp8_e4m3", 64, 4, True, 3),
    ("fp8_e4m3", 128, 256, False, 64),
    ("int8", 1, 128, False, 5),
    ("int8", 5, 4, True, 8),
    ("int8", 128, 4, False, 1),
    ("bf16", 4, 128, False, 8),
    ("bf16", 2, 4, True, 1),
    ("bf16", 8, 4, False, 64),
]


def _workload(kv_format, slots_per_page, C, overlap, block_size, seed):
    tokens = 3 * C if C > 4 else 24
    return make_workload(1, tokens, C, block_size=block_size, shuffle=True, nonzero_cache=True, seed=seed,
                         device=DEVICE, kv_format=kv_format, overlap=overlap, slots_per_page=slots_per_page,
                         state_dtype=torch.bfloat16 if seed % 3 == 0 else torch.float32)


def _judge(w, got, before, what):
    report = check_cache(w.checked_args(), got, before)
    assert report.ok, f"{what}: {report}"
    assert report.num_outputs_written == w.num_outputs > 0, what


@pytest.mark.parametrize("kv_format,slots_per_page,C,overlap,block_size", CALLS)
def test_formats_and_page_widths_match_the_truth(kv_format, slots_per_page, C, overlap, block_size):
    w = _workload(kv_format, slots_per_page, C, overlap, block_size, seed=slots_per_page + block_size)
    before = w.kv_cache.clone()
    with record_triton_launches() as launches:
        got = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route="gpgpu", **w.format_kwargs())
    assert [name for name, _ in launches] == ["_window_compress_kernel"]  # still one launch
    _judge(w, got, before, f"{kv_format}, P={slots_per_page}, C={C}, overlap={overlap}, bs={block_size}")


@pytest.mark.parametrize("path", ["per-token", "inline", "token-tiles", "search"])
@pytest.mark.parametrize("kv_format,slots_per_page,C,overlap,block_size", [
    ("fp8_e4m3", 3, 128, False, 8),
    ("bf16", 4, 4, True, 3),
    ("int8", 2, 4, False, 8),
])
def test_step_and_new_cache_match_the_truth(kv_format, slots_per_page, C, overlap, block_size, path):
    """``compress_step`` finds the boundaries on the device: inside the kernel, by each program
    for its own token or by every program for a small step, by each program in its own tile of
    tokens past ``STEP_INLINE_TOKENS``, or with the search's own launch before it (``ticket_search``; more
    requests than ``STEP_TILE_MAX_REQUESTS``); and ``out=None``."""
    inline = path == "inline"
    clear_launch_plans()
    w = _workload(kv_format, slots_per_page, C, overlap, block_size, seed=7 + slots_per_page)
    before = w.kv_cache.clone()
    out = w.kv_cache.clone()
    with memcheck.gpgpu_step_path(path), record_triton_launches() as launches:
        compress_step(w.state_cache, w.token_to_req, w.positions, w.block_table, w.rms_norm_weight, w.cos_sin_cache,
                      w.kv_slot_mapping, out, block_size=w.block_size, compress_ratio=w.compress_ratio,
                      rms_norm_eps=w.rms_norm_eps, route="gpgpu", **w.format_kwargs())
    names = [name for name, _ in launches]
    assert names == ["_ticket_list_kernel"] * (path == "search") + ["_window_compress_kernel"], names
    _judge(w, out, before, f"step, {kv_format}, C={C}, overlap={overlap}")
    if inline:
        new = c128_256_512_compress(*w.args(), route="gpgpu", **w.format_kwargs())
        _judge(w, new, torch.zeros_like(before), f"out=None, {kv_format}")


# The hand-derived golden bytes (test_golden_formats), written by gpgpu byte for byte.
@pytest.mark.parametrize("slots_per_page", [1, 2, 128])
def test_fp8_golden_bytes(slots_per_page):
    kw = fp8_inputs(3, 255, slots_per_page)
    got = c128_256_512_compress(**_on_device(kw, DEVICE), out=kw["kv_cache"].to(DEVICE), route="gpgpu",
                                kv_format="fp8_e4m3").cpu()
    want = expected_pages(kw["kv_cache"], FP8_GOLDEN_SLOT_BYTES)
    assert torch.equal(got, want), f"P={slots_per_page}: {_first_difference(got, want)}"


def test_int8_golden_bytes_in_one_slot_pages():
    kw = golden_inputs(4, 255)
    kw["kv_cache"] = torch.full((GOLDEN_SLOT + 2, 584), FILL, dtype=torch.uint8)
    got = c128_256_512_compress(**_on_device(kw, DEVICE), out=kw["kv_cache"].to(DEVICE), route="gpgpu").cpu()
    want = expected_pages(kw["kv_cache"], GOLDEN_SLOT_BYTES)
    assert torch.equal(got, want), _first_difference(got, want)


@pytest.mark.parametrize("four_d", [False, True])
def test_bf16_golden_row(four_d):
    kw = bf16_inputs(4, 255, four_d)
    before = kw["kv_cache"].clone()
    got = c128_256_512_compress(**_on_device(kw, DEVICE), out=before.to(DEVICE), route="gpgpu", kv_format="bf16").cpu()
    rows, want = got.view(-1, 512), before.view(-1, 512).clone()
    want[GOLDEN_SLOT] = torch.tensor(list(BF16_GOLDEN_ROW_BYTES), dtype=torch.uint8).view(torch.bfloat16)
    assert torch.equal(rows.view(torch.int16), want.view(torch.int16)), \
        _first_difference(rows.view(torch.int16), want.view(torch.int16))


@pytest.mark.parametrize("block_size,slots_per_page", [(4, 64), (3, 1), (1, 2)])
def test_overlap_golden_bytes(block_size, slots_per_page):
    """kv_a/score_a of the older 4 rows, kv_b/score_b of the newer 4: the int8 golden slot; pooling
    only the newer rows flips every sign, swapping the halves reads the 1000s."""
    kw = overlap_inputs(block_size, slots_per_page)
    got = c128_256_512_compress(**_on_device(kw, DEVICE), out=kw["kv_cache"].to(DEVICE), route="gpgpu",
                                overlap=True).cpu()
    want = expected_pages(kw["kv_cache"], GOLDEN_SLOT_BYTES)
    assert torch.equal(got, want), _first_difference(got, want)


def test_short_windows_get_short_steps_and_long_ones_the_tables():
    """A window of 4 or 8 rows is gathered in steps cut to the blocks it can touch (no 32-row tile
    of masked rows); windows of 128 rows or more keep exactly the tuned table's steps, so the
    challenge's kernels are the ones measured."""
    kinds = {kind for kind, _ in tuning.TILES_BY_RATIO} | set(tuning.TILES)
    for kind in kinds:
        for C in (128, 256, 512):
            for n in (1, 16, 200, 10**6):
                tiles = tuning.tiles_for(kind, C, n)
                for bs in (*range(1, 70), 100, 128, 256, 3000):
                    assert tuning.window_steps(tiles, bs, C) == tuning.window_steps(tiles, bs), (kind, C, n, bs)
    tiles = tuning.tiles_for("default", 4)
    assert tuning.window_steps(tiles, 8, 4) == tuning.WindowSteps(blocks=2, rows=8, chunked=False)
    assert tuning.window_steps(tiles, 1, 4) == tuning.WindowSteps(blocks=8, rows=1, chunked=False)
    assert tuning.window_steps(tiles, 3, 8) == tuning.WindowSteps(blocks=4, rows=4, chunked=False)
    assert tuning.window_steps(tiles, 64, 4) == tuning.WindowSteps(blocks=1, rows=4, chunked=True)
    assert tuning.window_steps(tiles, 64, 8) == tuning.WindowSteps(blocks=1, rows=8, chunked=True)


@pytest.mark.parametrize("kv_format,slots_per_page,C,overlap", [
    ("fp8_e4m3", 2, 4, True), ("bf16", 4, 128, False), ("int8", 3, 4, False)])
def test_skips_a_slot_past_the_cache(kv_format, slots_per_page, C, overlap):
    check_slot_past_the_cache_is_skipped(_workload(kv_format, slots_per_page, C, overlap, 8, seed=21), "gpgpu")


@pytest.mark.parametrize("block_size", [4, 3])
def test_overlap_skips_a_bad_block_in_the_older_rows(block_size):
    """``validate=False`` with a block id outside ``state_cache`` in the column that holds one
    window's older (kv_a) rows: every output whose 2C rows touch that column writes nothing, the
    others are exact (the older rows' lookups are checked like the newer ones')."""
    w = _workload("int8", 64, 4, True, block_size, seed=4)
    p = 19  # older rows 12..15, newer 16..19
    bad_col = (p - 7) // block_size
    w.block_table[0, bad_col] = w.state_cache.shape[0]
    before = w.kv_cache.clone()
    got = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route="gpgpu", validate=False,
                                **w.format_kwargs())
    touched = 0
    for b in w.boundary_token_indices.tolist():
        q = int(w.positions[b])
        if any(t // block_size == bad_col for t in range(max(q - 7, 0), q + 1)):
            w.kv_slot_mapping[b] = -1  # the truth: skipped
            touched += 1
    assert 1 <= touched < w.num_outputs
    report = check_cache(w.checked_args(), got, before)
    assert report.ok and report.num_outputs_written == w.num_outputs - touched, report


@pytest.mark.skipif(DEVICE != "cpu", reason="only Triton's interpreter computes the kernels with numpy")
@pytest.mark.parametrize("kv_format,slots_per_page,overlap", [("fp8_e4m3", 2, True), ("bf16", 4, False)])
def test_quiet_under_numpy_error_checks(kv_format, slots_per_page, overlap):
    """Under the interpreter (numpy computes every op): no floating-point warning from the
    overlap's masked older rows of the first window, the e4m3 or bf16 stores, or a skipped slot."""
    import warnings

    import numpy as np

    w = _workload(kv_format, slots_per_page, 4, overlap, 3, seed=9)
    w.kv_slot_mapping[w.boundary_token_indices[2]] = -1
    before = w.kv_cache.clone()
    with warnings.catch_warnings(), np.errstate(divide="raise", over="raise", invalid="raise"):
        warnings.simplefilter("error")
        got = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route="gpgpu", validate=False,
                                    **w.format_kwargs())
    report = check_cache(w.checked_args(), got, before)
    assert report.ok and report.num_outputs_written == w.num_outputs - 1, report
