"""Every Triton route and Ascend stage against the byte oracle.

On a CPU-only machine these run the very same kernels under TRITON_INTERPRET=1 (small shapes);
with a CUDA GPU present they run compiled on it, and the ``cuda`` tests add official sizes.
"""

import pytest
import torch

from ascend_kvc import ASCEND_STAGES, c128_256_512_compress
from ascend_kvc.indexing import plan_for
from ascend_kvc.oracle import check_cache
from ascend_kvc.workloads import SMALL_CASES, make_workload

from cases import general_case, run_and_check

ON_NPU = hasattr(torch, "npu") and torch.npu.is_available()
DEVICE = "cuda" if torch.cuda.is_available() else "npu" if ON_NPU else "cpu"
# The gpgpu route is the NVIDIA-like fallback; on an NPU only the Ascend ladder is promised.
FALLBACK = [] if ON_NPU else ["gpgpu"]
TRITON_ROUTES = [f"ascend:{s}" for s in ASCEND_STAGES] + FALLBACK


def _small(C, block_size=8, **kw):
    # Interpreter-sized: the window loop runs C / block_size steps per program.
    kw.setdefault("num_reqs", 2 if C < 512 else 1)
    kw.setdefault("outputs_per_req", 2)
    return general_case(C, block_size, device=DEVICE, **kw)


@pytest.mark.parametrize("route", TRITON_ROUTES)
@pytest.mark.parametrize("C", [128, 256, 512])
def test_route_matches_oracle(route, C):
    report = run_and_check(_small(C, seed=C), route)
    assert report.num_outputs_written >= 1


# One-row blocks under the interpreter are slow on the BLOCK_D=64 rungs (128 steps times 8 tiles);
# the 512-wide rungs walk the same one-row blocks with the same window loop.
_SLOW_ONE_ROW = ("ascend:block-gather", "ascend:block-gather-nomask")


@pytest.mark.parametrize("route,block_size", [
    (route, bs) for route in ["ascend:block-gather", "ascend:block-gather-nomask", "ascend:byte-scatter", "ascend",
                              "ascend:fused", *FALLBACK]
    for bs in (1, 3, 16, 64) if not (bs == 1 and route in _SLOW_ONE_ROW)])
def test_route_block_sizes(route, block_size):
    run_and_check(_small(128, block_size, seed=block_size, num_reqs=1, outputs_per_req=3), route)


BLOCK_CENTRIC = [f"ascend:{s}" for s in ASCEND_STAGES if s not in ("random-gather", "pre-gather")]

# block_size -> boundary positions (C = 128): windows that start at a block boundary, lie inside
# one block (interior, or ending at the block's last row), or cross several blocks.
_WINDOWS = {
    1: [127, 130],
    64: [127, 191, 150],
    128: [127, 255, 200],
    130: [127, 259, 200],  # ROW_TILE divides no block: every block ends in a partial tile
    256: [200, 255, 383],
    4096: [300],  # a whole block is larger than Triton's largest tile
}


def _windows_at(block_size, positions, C=128, seed=0):
    """One request; one output per position, each with its own slot, in a shuffled table."""
    L = max(positions) + 1
    w = make_workload(1, L, C, block_size=block_size, shuffle=True, nonzero_cache=True, seed=seed, device=DEVICE)
    w.boundary_token_indices = torch.tensor(positions, dtype=torch.int64, device=DEVICE)
    mapping = torch.full((L,), -1, dtype=torch.int64)
    mapping[positions] = torch.randperm(w.kv_cache.shape[0] * 64, generator=torch.Generator().manual_seed(seed))[
        :len(positions)]
    w.kv_slot_mapping = mapping.to(DEVICE)
    return w


@pytest.mark.parametrize("route,block_size", [(route, bs) for route in BLOCK_CENTRIC for bs in sorted(_WINDOWS)
                                              if not (bs == 1 and route in _SLOW_ONE_ROW)])
def test_block_centric_windows_at_block_edges(route, block_size):
    report = run_and_check(_windows_at(block_size, _WINDOWS[block_size], seed=block_size), route)
    assert report.num_outputs_written == len(_WINDOWS[block_size])


@pytest.mark.parametrize("route", TRITON_ROUTES)
def test_table_entries_outside_the_window_are_not_read(route):
    """Windows that start at a block boundary, with the table entry just before each window
    freed (-1) and each row padded with -1 past its last block: no output may read (or count as
    bad) an entry outside its window. Request 1's window at p = C - 1 starts at its row's first
    entry, right after request 0's padded last one."""
    C, bs, L = 128, 8, 512
    w = make_workload(2, 2 * L, C, block_size=bs, shuffle=True, nonzero_cache=True, seed=17, device=DEVICE)
    positions = [(0, 255), (1, 127), (1, 511)]  # windows from columns 16, 0 and 48
    tokens = [r * L + p for r, p in positions]
    w.boundary_token_indices = torch.tensor(tokens, dtype=torch.int64, device=DEVICE)
    mapping = torch.full((2 * L,), -1, dtype=torch.int64)
    mapping[tokens] = torch.randperm(w.kv_cache.shape[0] * 64, generator=torch.Generator().manual_seed(17))[:3]
    w.kv_slot_mapping = mapping.to(DEVICE)
    w.block_table[0, 15] = -1  # just before request 0's window
    w.block_table[0, 32:] = -1  # request 0 ends at p = 255: padding
    w.block_table[1, 47] = -1  # just before the window of p = 511
    report = run_and_check(w, route)
    assert report.num_outputs_written == 3


@pytest.mark.parametrize("route", ["ascend:random-gather", "ascend:pre-gather", "ascend", "ascend:fused", *FALLBACK])
def test_route_int32_indices_and_fresh_out(route):
    run_and_check(_small(256, 8, seed=31, index_dtype=torch.int32), route, inplace=False)


@pytest.mark.parametrize("route", ["ascend", "ascend:fused", *FALLBACK])
def test_route_int64_block_table_and_strided_state(route):
    w = _small(128, 8, seed=41)
    w.block_table = w.block_table.long()
    wide = torch.randn(w.state_cache.shape[0], 8, 1536, device=DEVICE)
    wide[:, :, 256:1280] = w.state_cache
    w.state_cache = wide[:, :, 256:1280]
    run_and_check(w, route)


@pytest.mark.parametrize("route", ["ascend", "ascend:fused", *FALLBACK])
def test_route_bf16_state_cache(route):
    run_and_check(_small(128, 8, seed=51, state_dtype=torch.bfloat16), route)


@pytest.mark.parametrize("route", ["ascend", "ascend:fused", *FALLBACK])
def test_route_peaky_scores_tiny_values(route):
    run_and_check(_small(256, 8, seed=61, score_scale=40.0, value_scale=1e-6), route)


@pytest.mark.parametrize("route", ["ascend", "ascend:fused", *FALLBACK])
def test_route_official_small_shapes(route):
    for case in SMALL_CASES:
        w = make_workload(*case, shuffle=True, nonzero_cache=True, seed=5, device=DEVICE)
        report = run_and_check(w, route)
        assert report.num_outputs_written == w.num_outputs


def _corrupt_every_way(w):
    """Give outputs 0, 2, 3, ... each one defect; output 1 is skipped (slot -1) by general_case."""
    tok = [int(t) for t in w.boundary_token_indices]
    num_blocks = w.state_cache.shape[0]
    defects = [
        lambda t: w.positions.__setitem__(t, 3),  # p < C - 1
        lambda t: w.token_to_req.__setitem__(t, 99),  # request outside block_table
        lambda t: w.kv_slot_mapping.__setitem__(t, w.kv_cache.shape[0] * 64 + 5),  # slot past the cache
        lambda t: w.positions.__setitem__(t, w.block_table.shape[1] * w.block_size + 1),  # column past table
        lambda t: w.block_table.__setitem__(  # a block id outside state_cache (middle of window)
            (int(w.token_to_req[t]), (int(w.positions[t]) - 60) // w.block_size), num_blocks + 7),
        lambda t: w.block_table.__setitem__(  # a negative block id (first block of window)
            (int(w.token_to_req[t]), (int(w.positions[t]) - 127) // w.block_size), -3),
    ]
    victims = [tok[0]] + tok[2:2 + len(defects) - 1]
    for t, defect in zip(victims, defects):
        defect(t)
    bad_outputs = [0] + list(range(2, 2 + len(victims) - 1))
    w.boundary_token_indices = torch.cat([w.boundary_token_indices, torch.tensor(
        [w.token_to_req.shape[0], -5], dtype=w.boundary_token_indices.dtype, device=DEVICE)])  # indices outside tokens
    return bad_outputs


@pytest.mark.parametrize("route", ["reference", *TRITON_ROUTES])
def test_validate_false_skips_bad_outputs_and_writes_the_rest(route):
    w = general_case(128, 8, seed=71, num_reqs=3, outputs_per_req=4, device=DEVICE)
    bad = _corrupt_every_way(w)
    with pytest.raises(ValueError):
        c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route)
    valid = plan_for(w.checked_args()).valid.tolist()
    assert not any(valid[i] for i in bad) and not any(valid[-2:])
    report = run_and_check(w, route, validate=False)  # bad outputs' slots must stay untouched
    assert report.num_outputs_written >= 2


_ACCELERATOR_CASES = [
    *(pytest.param("cuda", r, marks=pytest.mark.cuda, id=f"cuda-{r}") for r in TRITON_ROUTES),
    *(pytest.param("npu", f"ascend:{s}", marks=pytest.mark.npu, id=f"npu-ascend:{s}") for s in ASCEND_STAGES),
]


@pytest.mark.parametrize("device,route", _ACCELERATOR_CASES)
@pytest.mark.parametrize("C", [128, 256, 512])
def test_accelerator_official_case(device, route, C):
    """An official 8192-token case, shuffled and in place, compiled on the accelerator."""
    w = make_workload(1, 8192, C, shuffle=True, nonzero_cache=True, seed=C, device=device)
    before = w.kv_cache.clone()
    got = c128_256_512_compress(*w.args(), out=w.kv_cache, route=route)
    report = check_cache(w.checked_args(), got, before)
    assert report.ok, str(report)


@pytest.mark.cuda
def test_cuda_graph_capture_gpgpu():
    w = make_workload(4, 32768, 256, shuffle=True, seed=3, device="cuda")
    out = w.kv_cache.clone()
    c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)  # compile outside capture
    graph = torch.cuda.CUDAGraph()
    out.zero_()
    with torch.cuda.graph(graph):
        c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)
    graph.replay()
    torch.cuda.synchronize()
    assert check_cache(w.checked_args(), out, torch.zeros_like(out)).ok


@pytest.mark.parametrize("route", ["reference", "ascend", "ascend:fused", *FALLBACK])
def test_out_with_padded_rows_keeps_the_padding(route):
    w = _small(128, 8, seed=81)
    wide = torch.randint(0, 256, (w.kv_cache.shape[0], 37376 + 100), dtype=torch.uint8, device=DEVICE)
    wide[:, :37376] = w.kv_cache
    padding = wide[:, 37376:].clone()
    out = wide[:, :37376]  # rows 37476 bytes apart, as a slice of a larger engine buffer would be
    before = out.clone()
    c128_256_512_compress(*w.args(), out=out, route=route)
    assert torch.equal(wide[:, 37376:], padding)
    report = check_cache(w.checked_args(), out, before)
    assert report.ok, str(report)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN casts and reductions, on purpose
@pytest.mark.parametrize("route", ["reference", "ascend", "ascend:fused", *FALLBACK])
def test_non_finite_state_only_touches_its_own_slot(route):
    w = make_workload(2, 512, 128, shuffle=True, nonzero_cache=True, seed=91, device=DEVICE)  # disjoint windows
    clean = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route, validate=False)
    tok = int(w.boundary_token_indices[1])
    r, p = int(w.token_to_req[tok]), int(w.positions[tok])
    w.state_cache[int(w.block_table[r, (p - 40) // 8])] = float("nan")  # a block only output 1 reads
    dirty = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route, validate=False)
    slot = int(w.kv_slot_mapping[tok])
    page, o = divmod(slot, 64)
    own = torch.zeros_like(clean, dtype=torch.bool)
    own[page, o * 576:(o + 1) * 576] = True
    own[page, 36864 + o * 8:36864 + (o + 1) * 8] = True
    assert torch.equal(clean[~own], dirty[~own])


@pytest.mark.parametrize("route", ["reference", *TRITON_ROUTES])
def test_nothing_to_read_writes_nothing(route):
    w = _small(128, 8, seed=3)
    w.block_table = w.block_table[:0]  # no request has any block
    out = w.kv_cache.clone()
    assert c128_256_512_compress(*w.args(), out=out, route=route, validate=False) is out
    assert torch.equal(out, w.kv_cache)
    with pytest.raises(ValueError, match="token_to_req: output 0"):
        c128_256_512_compress(*w.args(), out=out, route=route)


@pytest.mark.parametrize("route", ["ascend", "ascend:fused", *FALLBACK])
def test_strided_index_tensors_and_weight(route):
    w = _small(128, 8, seed=93)

    def spread(t):  # the same values, every other element of a buffer twice the size
        buf = torch.empty(2 * t.numel(), dtype=t.dtype, device=t.device)
        buf[::2] = t
        return buf[::2]

    for name in ("token_to_req", "positions", "boundary_token_indices", "kv_slot_mapping", "rms_norm_weight"):
        setattr(w, name, spread(getattr(w, name)))
        assert not getattr(w, name).is_contiguous()
    run_and_check(w, route)
