"""``compress_ratio=4``, plain and with the overlapping compressor, on the rungs users run
(``ascend:triton-quant``, the default, and ``ascend:fused``), judged by the float64 oracle.

With overlap a window is the ``2C = 8`` rows ``p - 7 .. p`` of the 2048-wide state: the older
four give ``kv_a``/``score_a``, the newer four ``kv_b``/``score_b``; the first window of a request
(``p = 3``) has its older half at negative positions, masked. Each case runs the unsplit kernel
(one core) or the split pieces and their merge (``ASCEND_KVC_VECTOR_CORES`` above 1), at block
sizes below, equal to and above the window, as a call and as a step (``compress_step``).
"""

import pytest
import torch

from ascend_kvc import api, boundaries, c128_256_512_compress, compress_step, step
from ascend_kvc.oracle import check_cache
from ascend_kvc.stages import plan
from ascend_kvc.stages.work_split import MIN_PIECE_ROWS
from ascend_kvc.workloads import make_step_workload, make_workload

from launches import record_triton_launches

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ROUTES = ["ascend:triton-quant", "ascend:fused"]
WINDOWS = pytest.mark.parametrize("overlap", [False, True], ids=["ratio4", "overlap"])
UNSPLIT = {"ascend:fused": ["_fused_compress_kernel"],
           "ascend:triton-quant": ["_gather_to_bf16_kernel", "_quantize_bf16_kernel", "_byte_scatter_kernel"]}
SPLIT = {"ascend:fused": ["_window_piece_kernel", "_merge_to_slot_kernel"],
         "ascend:triton-quant": ["_window_piece_kernel", "_merge_to_bf16_kernel", "_quantize_bf16_kernel",
                                 "_byte_scatter_kernel"]}


@pytest.fixture
def cores(monkeypatch):
    """Set ``ASCEND_KVC_VECTOR_CORES`` for one test (plans made under another count are dropped).

    ``short_pieces``: a program of a split may read fewer than ``MIN_PIECE_ROWS`` (8) rows. A plain
    ratio-4 call otherwise never splits (pieces of 8 rows or more hold two windows, never busier
    than one window a program), but its split kernels must still compute it."""
    def set_cores(n, short_pieces=False):
        monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", str(n))
        monkeypatch.setattr(plan, "MIN_PIECE_ROWS", 1 if short_pieces else MIN_PIECE_ROWS)
        api.clear_launch_plans()
        step.clear_step_plans()
    yield set_cores
    api.clear_launch_plans()
    step.clear_step_plans()


def _workload(overlap, block_size, seed, num_reqs=2, tokens=48, **kw):
    """``num_reqs`` requests at positions 0.., shuffled blocks and slots, a random cache."""
    return make_workload(num_reqs, tokens, 4, block_size=block_size, shuffle=True, nonzero_cache=True, seed=seed,
                         device=DEVICE, overlap=overlap, **kw)


def _check(args, got, before, what, outputs):
    report = check_cache(args, got, before)
    assert report.ok, f"{what}: {report}"
    assert report.num_outputs_written == outputs, what


def _run(w, route):
    before = w.kv_cache.clone()
    with record_triton_launches() as launches:
        got = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route, **w.format_kwargs())
    return before, got, launches


# (block size, cores, split with ratio 4, split with overlap): blocks of 1 and 2 rows, of 3 (not
# dividing the window), of one window (8), and larger than it. Plain ratio-4 windows split (with
# short pieces) only where the piece tile is shorter than the window (block sizes 1 and 2);
# overlap's 8-row piece tiles split every call on two cores or more.
LAYOUTS = [(1, 8, True, True), (2, 5, True, True), (3, 1, False, False), (8, 5, False, True), (64, 8, False, True),
           (128, 3, False, True)]


@pytest.mark.parametrize("route", ROUTES)
@WINDOWS
@pytest.mark.parametrize("block_size,n_cores,split_plain,split_overlap", LAYOUTS,
                         ids=[f"bs{b}-cores{c}" for b, c, _, _ in LAYOUTS])
def test_call_matches_the_truth(route, overlap, block_size, n_cores, split_plain, split_overlap, cores):
    cores(n_cores, short_pieces=not overlap)
    w = _workload(overlap, block_size, seed=block_size + n_cores,
                  state_dtype=torch.bfloat16 if block_size == 3 else torch.float32)
    before, got, launches = _run(w, route)
    split = split_overlap if overlap else split_plain
    assert [name for name, _ in launches] == (SPLIT if split else UNSPLIT)[route]
    assert all(kw["OVERLAP"] == overlap for name, kw in launches if "OVERLAP" in kw)
    _check(w.checked_args(), got, before, f"{route}, overlap={overlap}, bs={block_size}, cores={n_cores}", 12)


@pytest.mark.parametrize("kv_format,slots_per_page", [("fp8_e4m3", 3), ("bf16", 1)])  # int8: above
@WINDOWS
@pytest.mark.parametrize("n_cores", [1, 5], ids=["unsplit", "split"])
def test_fused_formats_match_the_truth(kv_format, slots_per_page, overlap, n_cores, cores):
    cores(n_cores, short_pieces=not overlap)
    w = _workload(overlap, 2, seed=n_cores + slots_per_page, kv_format=kv_format, slots_per_page=slots_per_page)
    before, got, launches = _run(w, "ascend:fused")
    assert [name for name, _ in launches] == (SPLIT if n_cores > 1 else UNSPLIT)["ascend:fused"]
    _check(w.checked_args(), got, before, f"{kv_format}, overlap={overlap}, cores={n_cores}", 12)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("block_size,n_cores", [(1, 1), (1, 8), (8, 8)])
def test_first_windows_mask_negative_positions(route, block_size, n_cores, cores):
    """Six requests of 8 tokens: outputs at p = 3 (older half at positions -4..-1, masked) and
    p = 7 (no masked row). With one-row blocks an unmasked older half would read the previous
    request's table entries (or before the table), with splits its pieces may hold only masked rows."""
    cores(n_cores)
    w = _workload(True, block_size, seed=7 + block_size + n_cores, num_reqs=6)
    assert sorted(set(w.positions[w.boundary_token_indices].tolist())) == [3, 7]
    before, got, _ = _run(w, route)
    _check(w.checked_args(), got, before, f"{route}, first windows, bs={block_size}, cores={n_cores}", 12)


def _boundary_tokens(sw) -> torch.Tensor:
    """The contract's rule in Python ints: ``(p + 1) % 4 == 0`` and a slot."""
    pos, slot = sw.positions.tolist(), sw.kv_slot_mapping.tolist()
    return torch.tensor([t for t in range(len(pos)) if (pos[t] + 1) % 4 == 0 and slot[t] >= 0],
                        dtype=torch.int64, device=sw.positions.device)


@pytest.mark.parametrize("route", ROUTES)
@WINDOWS
@pytest.mark.parametrize("n_cores", [1, 5], ids=["unsplit", "split"])
def test_step_matches_the_truth(route, overlap, n_cores, cores, monkeypatch):
    """A step of a prefill from position 0, a span from 5, and two decode tokens (one closes a
    window); the boundaries are found on the device, which hands them to the split kernels (on 5
    cores: the 8 or 9 outputs of ratio 4 would leave cores idle; overlap's wider piece tiles split
    every count) or to the unsplit gather (one core)."""
    cores(n_cores, short_pieces=not overlap)
    monkeypatch.setattr(boundaries, "TILE_MAX_REQUESTS", 0)  # the search's path, not token tiles
    sw = make_step_workload([(0, 21), (5, 11), (31, 1), (32, 1)], 4, block_size=8 if overlap else 2, seed=n_cores,
                            device=DEVICE, overlap=overlap, skip_fraction=0.1)
    boundary = _boundary_tokens(sw)
    assert boundary.numel() >= 6
    before = sw.kv_cache.clone()
    with record_triton_launches() as launches:
        compress_step(*sw.args(), **sw.kwargs(), route=route)
    assert ("_window_piece_kernel" in [name for name, _ in launches]) == (n_cores > 1)
    _check(sw.as_operator(boundary).checked_args(), sw.kv_cache, before, f"step, {route}, overlap={overlap}",
           boundary.numel())
