"""validate=False on every kind of bad index (guarded buffers), non-finite state, determinism."""

import pytest
import torch

from ascend_kvc import ASCEND_STAGES, c128_256_512_compress
from ascend_kvc.workloads import make_workload
from tools import memcheck

ON_NPU = hasattr(torch, "npu") and torch.npu.is_available()
DEVICE = "cuda" if torch.cuda.is_available() else "npu" if ON_NPU else "cpu"
FALLBACK = [] if ON_NPU else ["gpgpu"]
ALL_ROUTES = ["reference", *(f"ascend:{s}" for s in ASCEND_STAGES), *FALLBACK]

# Under the interpreter a scenario costs about a second: every scenario on the reference, the
# default Ascend route and gpgpu, the combined one on every other stage. tools/memcheck.py runs
# them all, at every C and several block sizes.
_FULL = ["reference", "ascend", *FALLBACK]
_MEMCHECK = [
    *((route, name) for route in _FULL for name in memcheck._scenarios()),
    *((route, "every_defect_at_once") for route in ALL_ROUTES if route not in _FULL),
]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("route,scenario", _MEMCHECK)
def test_guarded_bad_indices_validate_false(route, scenario):
    problem = memcheck.check_scenario(route, scenario, memcheck._scenarios()[scenario], 128, 8, DEVICE)
    assert not problem, problem


def _own_slot_mask(cache, slot):
    page, o = divmod(slot, 64)
    own = torch.zeros_like(cache, dtype=torch.bool)
    own[page, o * 576:(o + 1) * 576] = True
    own[page, 36864 + o * 8:36864 + (o + 1) * 8] = True
    return own


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN casts and reductions, on purpose
@pytest.mark.parametrize("route,bad_value", [
    *((route, float("nan")) for route in ALL_ROUTES),
    *((route, v) for route in ("reference", "ascend", *FALLBACK) for v in (float("inf"), float("-inf"))),
])
def test_non_finite_state_only_touches_its_own_slot(route, bad_value):
    w = make_workload(2, 256, 128, shuffle=True, nonzero_cache=True, seed=92, device=DEVICE)  # disjoint windows
    clean = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route, validate=False)
    tok = int(w.boundary_token_indices[1])
    r, p = int(w.token_to_req[tok]), int(w.positions[tok])
    blk = int(w.block_table[r, (p - 40) // 8])  # a block only output 1 (request 1) reads
    w.state_cache[blk, 3, 7] = bad_value  # one value
    w.state_cache[blk, 5, 512 + 9] = bad_value  # one score
    dirty = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route, validate=False)
    own = _own_slot_mask(clean, int(w.kv_slot_mapping[tok]))
    assert torch.equal(clean[~own], dirty[~own])


@pytest.mark.parametrize("route", ALL_ROUTES)
def test_two_calls_give_identical_bytes(route):
    w = make_workload(1, 256, 128, block_size=8, shuffle=True, nonzero_cache=True, seed=93, device=DEVICE)
    first = c128_256_512_compress(*w.args(), route=route)
    second = c128_256_512_compress(*w.args(), route=route)
    assert torch.equal(first, second)


@pytest.mark.cuda
@pytest.mark.parametrize("route", ["gpgpu", "ascend"])
def test_two_streams_on_disjoint_slots_match_serial_calls(route):
    """Two halves of the outputs, launched on two CUDA streams at once, write what serial calls write."""
    w = make_workload(4, 32768, 128, shuffle=True, nonzero_cache=True, seed=94, device="cuda")
    half = w.num_outputs // 2
    parts = [w.boundary_token_indices[:half], w.boundary_token_indices[half:]]

    def call(boundary, out):
        args = list(w.args())
        args[3] = boundary
        c128_256_512_compress(*args, out=out, route=route, validate=False)

    serial = w.kv_cache.clone()
    for part in parts:
        call(part, serial)
    concurrent = w.kv_cache.clone()
    call(parts[0], concurrent.clone())  # compile outside the race
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    torch.cuda.synchronize()
    for stream, part in zip(streams, parts):
        with torch.cuda.stream(stream):
            call(part, concurrent)
    torch.cuda.synchronize()
    assert torch.equal(serial, concurrent)


@pytest.mark.parametrize("route", ["reference", "ascend", *FALLBACK])
def test_shared_slot_with_validate_false_holds_writers_bytes(route):
    """Two outputs mapped to one slot: rejected with validate=True; with validate=False every byte
    of that slot is one writer's byte (which one is not promised) and every other slot is exact."""
    from cases import general_case
    from ascend_kvc.oracle import check_cache

    w = general_case(128, 8, seed=95, device=DEVICE, skip_some=False)
    t0, t2 = int(w.boundary_token_indices[0]), int(w.boundary_token_indices[2])
    w.kv_slot_mapping[t2] = w.kv_slot_mapping[t0]
    with pytest.raises(ValueError, match="kv_slot_mapping: outputs 0 and 2"):
        c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route)
    got = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route, validate=False)
    report = check_cache(w.checked_args(), got, w.kv_cache)
    assert report.ok and report.notes, str(report)
    page, o = divmod(int(w.kv_slot_mapping[t0]), 64)
    got[page, 36864 + o * 8 + 7] = 1  # a pad byte neither writer writes
    assert not check_cache(w.checked_args(), got, w.kv_cache).ok


def test_oracle_accepts_a_shared_slot_whose_bytes_mix_both_writers():
    """On a GPU two writers of one slot race byte by byte (an index_put with repeated indices,
    or two programs): the scales of one writer may sit beside the int8 values of the other. The
    oracle must accept every byte that is one writer's, judged at that writer's own scale."""
    from cases import general_case
    from ascend_kvc.oracle import check_cache

    w = general_case(128, 8, seed=95, device="cpu", skip_some=False)
    t0, t2 = int(w.boundary_token_indices[0]), int(w.boundary_token_indices[2])
    slot = int(w.kv_slot_mapping[t0])
    w.kv_slot_mapping[t2] = slot
    page, o = divmod(slot, 64)
    payload = slice(o * 576, o * 576 + 448)  # the int8 values
    alone = []
    for keep in (t0, t2):  # each writer's bytes, the other output skipped
        mapping = w.kv_slot_mapping.clone()
        mapping[t2 if keep == t0 else t0] = -1
        args = list(w.args())
        args[7] = mapping
        alone.append(c128_256_512_compress(*args, out=w.kv_cache.clone(), route="reference"))
    mixed = alone[0].clone()
    mixed[page, payload] = alone[1][page, payload]  # writer 2's values beside writer 0's scales
    assert not torch.equal(mixed[page, payload], alone[0][page, payload])
    report = check_cache(w.checked_args(), mixed, w.kv_cache)
    assert report.ok, str(report)
    mixed[page, o * 576] ^= 0x40  # a value neither writer wrote
    assert not check_cache(w.checked_args(), mixed, w.kv_cache).ok
