"""``compress_step``: the once-per-step call that finds its own boundary tokens.

Every route's bytes are judged by the float64 oracle (``ascend_kvc.oracle.check_cache``) on the
boundary tokens this file derives itself, token by token in plain Python, from the contract's
rule: ``(p + 1) % C == 0``, a kv slot ``>= 0`` and, when given, a state slot ``>= 0``. Every other
byte of the (random, non-zero) cache must keep its value. On CPU these run under the Triton
interpreter; the GPU tests (a CUDA graph captured once and replayed for 0, 1, a few and many
boundary tokens) skip here and run on a CUDA machine.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ascend_kvc
from ascend_kvc import boundaries, compress_step, launch, step as step_module
from ascend_kvc.layers import CompressorKVWriter
from ascend_kvc.oracle import check_cache
from ascend_kvc.stages import plan as plan_module
from ascend_kvc.stages.work_split import WorkSplit, plan_split
from ascend_kvc.workloads import decode_spans, make_step_workload
from gpgpu_fallback import route as gpgpu_route
from gpgpu_fallback import tuning as gpgpu_tuning
from tools import memcheck

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
SYNC_FREE = ["gpgpu", "ascend", "ascend:fused"]
ROUTES = [*SYNC_FREE, "reference", "ascend:byte-scatter"]  # the last two: nonzero, then the operator
OP = torch.ops.ascend_kvc.compress_step_


def expected_boundaries(sw) -> list[int]:
    """The contract's rule, one token at a time in Python ints."""
    C = sw.compress_ratio
    pos, slot = sw.positions.tolist(), sw.kv_slot_mapping.tolist()
    state = None if sw.state_slot_mapping is None else sw.state_slot_mapping.tolist()
    return [t for t in range(len(pos)) if (pos[t] + 1) % C == 0 and slot[t] >= 0 and (state is None or state[t] >= 0)]


def judge(sw, got: torch.Tensor, before: torch.Tensor, expect_outputs: int | None = None):
    """The oracle's verdict on ``got`` for the step's own boundary tokens."""
    tokens = expected_boundaries(sw)
    if expect_outputs is not None:
        assert len(tokens) == expect_outputs, f"the case has {len(tokens)} boundary tokens, meant {expect_outputs}"
    w = sw.as_operator(torch.tensor(tokens, dtype=torch.int64, device=sw.positions.device))
    report = check_cache(w.checked_args(), got, before)
    assert report.ok, f"{sw.name}: {report}"
    return report


# gpgpu's four ways of finding a step's boundary tokens, each forced on small steps
# (tools/memcheck.py holds them, for its step scenario too).
GPGPU_PATHS = memcheck.GPGPU_STEP_PATHS
gpgpu_step_path = memcheck.gpgpu_step_path
gpgpu_plan_path = memcheck.gpgpu_plan_path


def run_step(sw, route: str, validate: bool = False, **kw):
    before = sw.kv_cache.clone()
    result = compress_step(*sw.args(), **sw.kwargs(), route=route, validate=validate, **kw)
    assert result is None
    return before


class StepPlans:
    """The step plans of one test (``step_module._STEP_PLANS``), which ``step_plans`` empties
    before and after it."""

    def __init__(self, monkeypatch):
        self.monkeypatch = monkeypatch

    def set_cores(self, count) -> None:
        """Plan for ``count`` vector cores (``ASCEND_KVC_VECTOR_CORES``); a step plan does not
        look at the count, so the ones made before are dropped."""
        self.monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", str(count))
        step_module.clear_step_plans()

    def only(self):
        """The one step plan there is; an assertion error if there are none or several."""
        plans = list(step_module._STEP_PLANS.values())
        assert len(plans) == 1, f"{len(plans)} step plans, meant one"
        return plans[0]


@pytest.fixture
def step_plans(monkeypatch):
    """No step plans before the test, none left after it (even when it fails). Separate from
    conftest's ``cores``, which does the same for the operator's launch plans."""
    step_module.clear_step_plans()
    yield StepPlans(monkeypatch)
    step_module.clear_step_plans()


# (name, spans, C, block_size, state slots, skip fraction, boundary tokens meant)
CASES = {
    "empty": ([(128, 1), (300, 1), (5, 1), (256, 1)], 128, 8, False, 0.0, 0),
    "one": ([(128, 1), (255, 1), (5, 1), (256, 1)], 128, 8, True, 0.0, 1),
    "many": ([(100, 200), (0, 130), (511, 1)], 128, 8, True, 0.1, None),
    "c256-bs3": ([(200, 120), (0, 256)], 256, 3, False, 0.0, 2),
}


def _case(name: str, seed: int = 0, **kw):
    spans, C, bs, state_slots, skip, meant = CASES[name]
    sw = make_step_workload(spans, C, block_size=bs, seed=seed, skip_fraction=skip, state_slots=state_slots,
                            device=DEVICE, name=name, **kw)
    return sw, meant


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", list(CASES))
def test_step_writes_the_oracle_bytes_and_nothing_else(route, case):
    sw, meant = _case(case, seed=11)
    before = run_step(sw, route)
    report = judge(sw, sw.kv_cache, before, meant)
    if case == "many":
        assert report.num_outputs_written >= 3


@pytest.mark.parametrize("route", ["gpgpu", "ascend"])
def test_validate_true_writes_the_same_bytes(route):
    sw, _ = _case("many", seed=12)
    before = run_step(sw, route, validate=True)
    judge(sw, sw.kv_cache, before)


@pytest.mark.parametrize("route", SYNC_FREE)
def test_skipped_state_slots_and_negative_kv_slots_write_nothing(route):
    """Every token of one request closes a window or not; the boundary tokens get, in turn, a
    state slot -1 (the kv slot valid), a kv slot -1, or both valid: only the last kind writes."""
    sw = make_step_workload([(0, 512)], 128, block_size=8, seed=21, state_slots=True, device=DEVICE)
    bnd = [t for t in range(512) if (t + 1) % 128 == 0]  # positions 127, 255, 383, 511
    sw.state_slot_mapping[bnd[0]] = -1
    sw.kv_slot_mapping[bnd[1]] = -1
    sw.state_slot_mapping[bnd[2]] = -5
    sw.kv_slot_mapping[bnd[2]] = -7
    before = run_step(sw, route)
    report = judge(sw, sw.kv_cache, before, expect_outputs=1)
    assert report.num_outputs_written == 1


@pytest.mark.parametrize("route", SYNC_FREE)
def test_strided_state_slot_mapping(route):
    """A state slot mapping that is every other element of a buffer (the others -1): the device
    search must read the view's elements, not the buffer's first ``num_tokens``, where every
    boundary token (odd, at positions 127 and 255) would find a -1."""
    sw = make_step_workload([(0, 256)], 128, block_size=8, seed=22, state_slots=True, device=DEVICE)
    buf = torch.full((2 * sw.num_tokens,), -1, dtype=sw.state_slot_mapping.dtype, device=DEVICE)
    buf[::2] = sw.state_slot_mapping
    sw.state_slot_mapping = buf[::2]
    before = run_step(sw, route)
    judge(sw, sw.kv_cache, before, expect_outputs=2)


@pytest.mark.parametrize("route", SYNC_FREE)
def test_a_plan_without_state_slots_is_not_reused_with_them(route):
    """A ``validate=False`` step without ``state_slot_mapping`` stores a plan; the same shapes with a
    mapping that skips one boundary token must not reuse it (its kernels read no state slots)."""
    sw = make_step_workload([(0, 256)], 128, block_size=8, seed=23, state_slots=True, device=DEVICE)
    kw = {**sw.kwargs(), "state_slot_mapping": None}
    args = sw.args()
    compress_step(*args[:-1], sw.kv_cache.clone(), **kw, route=route, validate=False)
    sw.state_slot_mapping[127] = -1
    before = run_step(sw, route)
    report = judge(sw, sw.kv_cache, before, expect_outputs=1)
    assert report.num_outputs_written == 1


@pytest.mark.parametrize("index_dtype", [torch.int32])  # int64: every other test
@pytest.mark.parametrize("route", SYNC_FREE)
def test_int32_positions_and_slots(route, index_dtype):
    sw = make_step_workload([(250, 10), (120, 12)], 128, block_size=16, seed=31, state_slots=True,
                            index_dtype=index_dtype, device=DEVICE)
    before = run_step(sw, route)
    judge(sw, sw.kv_cache, before, expect_outputs=2)


@st.composite
def steps(draw):
    C = draw(st.sampled_from([128, 256]))
    num_reqs = draw(st.integers(1, 3))
    spans = [(draw(st.integers(0, 2 * C)), draw(st.integers(1, 40))) for _ in range(num_reqs)]
    return dict(spans=spans, C=C, block_size=draw(st.sampled_from([4, 8, 16])), seed=draw(st.integers(0, 99)),
                state_slots=draw(st.booleans()), skip=draw(st.sampled_from([0.0, 0.3])),
                route=draw(st.sampled_from(SYNC_FREE)), gpgpu_path=draw(st.sampled_from(list(GPGPU_PATHS))))


@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(steps())
def test_random_steps_match_the_truth(case):
    sw = make_step_workload(case["spans"], case["C"], block_size=case["block_size"], seed=case["seed"],
                            state_slots=case["state_slots"], skip_fraction=case["skip"], device=DEVICE)
    with gpgpu_step_path(case["gpgpu_path"] if case["route"] == "gpgpu" else "inline"):
        before = run_step(sw, case["route"])
    judge(sw, sw.kv_cache, before)


# A replay sequence: the same 6 tokens (3 requests x 2) with positions and slots changed in place,
# giving 0, 1, a few and many (every token closes a window; token 4 has no state slot) boundary
# tokens, then 0 again. C = 128.
REPLAY_POSITIONS = [
    [10, 11, 300, 301, 40, 41],  # 0
    [126, 127, 300, 301, 40, 41],  # 1
    [126, 127, 254, 255, 382, 383],  # a few (3)
    [127, 255, 383, 511, 255, 127],  # all 6
    [0, 1, 2, 3, 4, 5],  # 0
]
REPLAY_MEANT = [0, 1, 3, 5, 0]


def _replay_workload(seed: int):
    # requests of 2 tokens each; the spans only size the requests (positions are set per step)
    return make_step_workload([(510, 2), (510, 2), (510, 2)], 128, block_size=8, seed=seed, state_slots=True,
                              device=DEVICE)


def _set_step(sw, k: int, g: torch.Generator):
    sw.positions.copy_(torch.tensor(REPLAY_POSITIONS[k], dtype=sw.positions.dtype))
    slots = torch.randperm(sw.kv_cache.shape[0] * 64, generator=g)[:sw.num_tokens]
    sw.kv_slot_mapping.copy_(slots.to(sw.kv_slot_mapping.dtype))
    state_slots = torch.arange(sw.num_tokens)
    state_slots[4] = -1
    sw.state_slot_mapping.copy_(state_slots.to(sw.state_slot_mapping.dtype))
    sw.base.state_cache.copy_(torch.randn(sw.base.state_cache.shape, generator=g).to(sw.base.state_cache.dtype))


def replay_steps(route: str, seed: int, steps=None):
    """The replay sequence on one workload: for each ``k`` of ``steps`` (default all of
    ``REPLAY_MEANT``) set step ``k`` in place, run ``route`` and judge the bytes against the
    oracle and the ``REPLAY_MEANT[k]`` outputs meant. Returns the workload."""
    sw = _replay_workload(seed)
    g = torch.Generator().manual_seed(seed + 1)
    for k in range(len(REPLAY_MEANT)) if steps is None else steps:
        _set_step(sw, k, g)
        before = run_step(sw, route)
        judge(sw, sw.kv_cache, before, REPLAY_MEANT[k])
    return sw


@pytest.mark.parametrize("route", SYNC_FREE)
def test_replay_sequence_without_capture(route, step_plans):
    """What a replayed graph does, eagerly: one plan, the same tensors changed in place between calls."""
    replay_steps(route, 41)
    step_plans.only()  # the steps shared one plan


@pytest.mark.parametrize("route", SYNC_FREE)
def test_many_chunk_search(route, step_plans, monkeypatch):
    """A search of several chunks: on the Ascend routes a count kernel, then the list kernel reading
    the counts; on gpgpu one launch of a lister a chunk (``ticket_search``)."""
    monkeypatch.setattr(boundaries, "SINGLE_PROGRAM_TOKENS", 1024)
    monkeypatch.setattr(gpgpu_route, "STEP_TILE_MAX_REQUESTS", 0)  # the search, not token tiles (gpgpu's
    monkeypatch.setattr(boundaries, "TILE_MAX_REQUESTS", 0)  # and the Ascend routes')
    sw = make_step_workload([(0, 1400), (600, 1700)], 128, block_size=16, seed=51, skip_fraction=0.7, device=DEVICE)
    assert boundaries.plan_search(sw.num_tokens, 4).programs == 4
    before = run_step(sw, route)
    report = judge(sw, sw.kv_cache, before)
    assert report.num_outputs_written >= 3
    if route == "gpgpu":
        assert gpgpu_plan_path(step_plans.only()) == "search"


def test_search_by_ticket_leaves_its_counters_zero(step_plans, monkeypatch):
    """gpgpu's search in one launch (``ticket_search``): four listers chained by tickets list the
    step's boundary tokens for the kernel after them, and leave every counter of the stream's
    scratch at zero (the next launch's tickets start at 0 again); a second step on the same plan
    writes its own bytes too."""
    monkeypatch.setattr(boundaries, "SINGLE_PROGRAM_TOKENS", 1024)
    monkeypatch.setattr(gpgpu_route, "compute_units", lambda *a: 4)
    with gpgpu_step_path("search"):
        for seed in (53, 54):
            sw = make_step_workload([(0, 1400), (600, 1700)], 128, block_size=16, seed=seed, skip_fraction=0.3,
                                    device=DEVICE)
            before = run_step(sw, "gpgpu")
            judge(sw, sw.kv_cache, before)
            plan = step_plans.only()
            assert gpgpu_plan_path(plan) == "search" and plan.search_launcher.grid[0] == 4
            _, key, _ = launch.stream_state(sw.positions.device)
            _, counters = launch._SCRATCH[(sw.positions.device, key)]
            assert int(counters.count_nonzero()) == 0, counters[counters != 0]


# (spans, C, block_size, overlap, state slots, skip fraction): steps for gpgpu's token tiles.
TOKEN_TILE_STEPS = {
    # a long request and a short one, skipped slots: tiles of one boundary and tiles of none
    "prefill": ([(5, 600), (250, 20)], 128, 8, False, True, 0.2),
    # 12 requests of one token at a window's end, side by side, then a prefill: one tile holds 12
    # boundary tokens, which its programs do one after another
    "crowded": ([(127, 1), (255, 1), (127, 1), (383, 1), (127, 1), (255, 1),
                 (127, 1), (511, 1), (127, 1), (255, 1), (127, 1), (383, 1), (0, 200)], 128, 8, False, False, 0.0),
    # the overlapping ratio-4 compressor: tiles of 4 tokens, blocks of 3 rows
    "ratio-4-overlap": ([(0, 90), (37, 30)], 4, 3, True, True, 0.1),
    "c256-bs64": ([(200, 330)], 256, 64, False, False, 0.0),
}


@pytest.mark.parametrize("work", ["pieces", "whole-head"])
@pytest.mark.parametrize("case", list(TOKEN_TILE_STEPS))
def test_gpgpu_token_tiles(case, work, step_plans, monkeypatch):
    """A gpgpu step past ``STEP_INLINE_TOKENS`` from few requests: one launch, whose programs each
    find the boundary tokens of their own tile of C tokens; a tile's first output's scratch (piece
    states and arrival counter) is the tile's slot, a further one's its token's. With the tiles
    planned here an output's pieces are merged by the last; with one program a ``whole-head``
    (sm90's ratio-4 tiles, one piece) each program stores its output itself."""
    spans, C, bs, overlap, state_slots, skip = TOKEN_TILE_STEPS[case]
    if work == "whole-head":
        monkeypatch.setattr(gpgpu_route, "tiles_for", lambda *a: gpgpu_tuning.tiles_for("cuda:sm90", 4, 10**6))
        monkeypatch.setattr(gpgpu_route, "window_splits", lambda *a: 1)
    sw = make_step_workload(spans, C, block_size=bs, seed=61, state_slots=state_slots, skip_fraction=skip,
                            overlap=overlap, device=DEVICE)
    with gpgpu_step_path("token-tiles"):
        before = run_step(sw, "gpgpu")
        plan = step_plans.only()
        assert gpgpu_plan_path(plan) == "token-tiles"
        work_items = plan.splits * (512 // plan.launcher.constexprs["BLOCK_D"])  # of an output
        assert plan.launcher.grid[0] == -(-sw.num_tokens // C) * work_items
    report = judge(sw, sw.kv_cache, before)
    assert report.num_outputs_written == len(expected_boundaries(sw)) >= (12 if case == "crowded" else 2)


@pytest.mark.parametrize("spans,C,overlap,path", [
    ([(3 + 4 * r, 1) for r in range(64)], 4, True, "per-token"),  # 64 decode tokens, ratio 4: 2 pieces each
    ([(127, 1)], 128, False, "per-token"),  # one token: its 64 work items (4 pieces of 16 dim tiles)
    ([(127 + r, 1) for r in range(256)], 128, False, "inline"),  # 256 tokens x 64 items: a search is less
])
def test_gpgpu_small_steps_take_a_program_per_token(spans, C, overlap, path, monkeypatch):
    """As planned for an H200 (sm90 tiles, 132 SMs): a step whose grid of one program per token
    and work item is no larger than the in-kernel search's (4 programs a unit) takes that grid,
    each program testing its own token; a larger one keeps the search."""
    monkeypatch.setattr(gpgpu_route, "device_kind", lambda dev: "cuda:sm90")
    monkeypatch.setattr(gpgpu_route, "compute_units", lambda *a: 132)
    sw = make_step_workload(spans, C, block_size=8, seed=5, overlap=overlap)
    args, _ = step_module.check_step_metadata(*sw.args(), **sw.kwargs())
    plan = gpgpu_route.step_plan(args, sw.kv_cache, "gpgpu", False)
    assert gpgpu_plan_path(plan) == path
    work_items = plan.splits * (512 // plan.launcher.constexprs["BLOCK_D"])
    if path == "per-token":
        assert plan.launcher.grid[0] == sw.num_tokens * work_items <= 4 * 132
        assert "maxnreg" not in plan.launcher.options  # no loop over further outputs to cap
    else:
        assert sw.num_tokens * work_items > 4 * 132


@pytest.mark.parametrize("C,num_tokens,one_piece", [(128, 256, True), (4, 1024, True), (512, 256, False)])
def test_gpgpu_inline_search_takes_a_short_window_in_one_piece(C, num_tokens, one_piece, monkeypatch):
    """As planned for an H200 (sm90 tiles, 132 SMs): a decode step searched inside the kernel takes
    a window of at most ``STEP_INLINE_WHOLE_WINDOW_ROWS`` rows in one piece; a longer window keeps
    the pieces planned for the outputs such a step typically has."""
    monkeypatch.setattr(gpgpu_route, "device_kind", lambda dev: "cuda:sm90")
    monkeypatch.setattr(gpgpu_route, "compute_units", lambda *a: 132)
    sw = make_step_workload([(C - 1 + r, 1) for r in range(num_tokens)], C, block_size=8, seed=5)
    args, _ = step_module.check_step_metadata(*sw.args(), **sw.kwargs())
    plan = gpgpu_route.step_plan(args, sw.kv_cache, "gpgpu", False)
    assert gpgpu_plan_path(plan) == "inline"
    assert (plan.splits == 1) == one_piece, plan.splits


def test_one_wave_registers():
    """The token tiles' register cap: a grid's programs all resident on the SMs at once (65536
    registers each, allocated per thread in eights), never below 128 or above a thread's 255."""
    one_wave = gpgpu_route.one_wave_registers
    assert one_wave(2048, 1, 132) == 128  # the 8192-token C=128 step on an H100 or H200: 16 a SM
    assert one_wave(1024, 2, 132) == 128  # C=512: 8 programs of 2 warps a SM
    assert one_wave(1500, 1, 132) == 168  # 12 a SM: 170 registers, down to a multiple of 8
    assert one_wave(2048, 1, 114) is None  # 18 a SM: 113, a cap that would spill too much
    assert one_wave(1000, 1, 132) is None  # 8 a SM: any thread fits


def test_token_tile_registers():
    """A token-tile grid that needs more than one wave even at 128 registers is capped at 128 all
    the same (the indexed call's programs a unit) where its tiles hold at most 32 values a thread
    a step, and left uncapped where they hold more (they would spill); sm90's tiles, 132 SMs."""
    cap = gpgpu_route.token_tile_registers
    few = gpgpu_tuning.tiles_for("cuda:sm90", 128, 256)  # 32 dims x 32 rows, one warp: 32 a thread
    wide = gpgpu_tuning.tiles_for("cuda:sm90", 128, 1024)  # 64 dims x 32 rows, one warp: 64 a thread
    assert (few.block_d, few.warps, wide.block_d, wide.warps) == (32, 1, 64, 1)
    assert cap(2048, few, 132) == 128  # one wave at 128 (the one-wave cap)
    assert cap(4096, few, 132) == 128  # 32 a SM: two waves even at 128, capped all the same
    assert cap(4096, wide, 132) is None  # two waves, but 64 values a thread: uncapped
    assert cap(1000, few, 132) is None  # 8 a SM: one wave with any registers


def test_gpgpu_token_tiles_take_at_most_their_pieces(step_plans, monkeypatch):
    """A step on token tiles cuts each window into at most ``STEP_TILE_MAX_SPLITS`` pieces where
    the outputs it is tuned for would take more (132 SMs, C=512: as the search's path plans it),
    and still writes the oracle's bytes."""
    monkeypatch.setattr(gpgpu_route, "compute_units", lambda *a: 132)
    sw = make_step_workload([(0, 1100)], 512, block_size=8, seed=5, device=DEVICE)
    pieces = {}
    for path in ("search", "token-tiles"):
        with gpgpu_step_path(path):
            before = run_step(sw, "gpgpu")
            plan = step_plans.only()
        assert gpgpu_plan_path(plan) == path
        pieces[path] = plan.splits
        judge(sw, sw.kv_cache, before)
    assert pieces["token-tiles"] == gpgpu_route.STEP_TILE_MAX_SPLITS < pieces["search"], pieces


@pytest.mark.skipif(DEVICE != "cuda", reason="registers of a compiled CUDA kernel")
def test_gpgpu_token_tiles_fit_one_wave(step_plans):
    """The official 8192-token C=128 step on its token tiles: all of its programs resident at once,
    as the indexed call's are (the loop over a tile's further outputs took 148 registers a thread
    on an H100 without the cap, and a second wave)."""
    from ascend_kvc.device import compute_units
    from ascend_kvc.workloads import official_step

    sw, _ = official_step(1, 8192, 128, shuffle=True, device=DEVICE)
    run_step(sw, "gpgpu")
    plan = step_plans.only()
    assert gpgpu_plan_path(plan) == "token-tiles"
    programs, warps = plan.launcher.grid[0], plan.launcher.options["num_warps"]
    per_unit = -(-programs // compute_units("cuda", torch.cuda.current_device()))
    kernel = plan.launcher._compiled
    if per_unit * warps * 32 * 128 <= 65536:  # a GPU of 128 or more SMs (H100, H200)
        assert kernel.n_regs * per_unit * warps * 32 <= 65536, (kernel.n_regs, per_unit, warps)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("route,path", memcheck.step_runs())
def test_step_with_bad_indices_touches_nothing_else(route, path, step_plans):
    """``validate=False`` (``tools/memcheck.check_step``): the boundary tokens with a request past
    the table, a slot past the cache, a block id past the state cache or a negative one in their
    window give no output; the margins around ``kv_cache`` and ``state_cache`` (guard bytes, NaN
    rows) keep their values; every other output is the truth's. On each route, each of its paths
    (the Ascend routes' taken checked inside ``check_step``)."""
    with memcheck.step_path(route, path):
        problem = memcheck.check_step(route, DEVICE, None if route == "gpgpu" else path)
        if route == "gpgpu":
            assert gpgpu_plan_path(step_plans.only()) == path
    assert not problem, problem


@pytest.mark.parametrize("route", ["ascend", "ascend:fused"])
def test_split_on_more_cores_than_units(route, step_plans):
    """40 vector cores (a 910B's view): a step of one output has 16 units of rows for 40
    programs planned for the token count; the piece gather and the merge use only 16 of them."""
    step_plans.set_cores(40)
    replay_steps(route, 131, (1, 0, 2))
    plan = step_plans.only()
    assert plan.split.split and plan.split.programs > 16


@pytest.mark.parametrize("path", ["inline", "search"])
def test_gpgpu_step_grid_smaller_than_the_work(path, step_plans, monkeypatch):
    """The counted gpgpu kernel loops over its work items when they outnumber its programs,
    searching in every program (920 tokens) or reading the search's list."""
    monkeypatch.setattr(gpgpu_route, "STEP_PROGRAMS_PER_UNIT", 1)
    monkeypatch.setattr(gpgpu_route, "STEP_INLINE_PROGRAMS_PER_UNIT", 1)
    monkeypatch.setattr(gpgpu_route, "compute_units", lambda *a: 3)  # an H200's 132 would outnumber the work
    sw = make_step_workload([(0, 520), (0, 400)], 128, block_size=8, seed=141, device=DEVICE)
    with gpgpu_step_path(path):
        before = run_step(sw, "gpgpu")
        plan = step_plans.only()
    assert gpgpu_plan_path(plan) == path
    assert plan.launcher.grid[0] < len(expected_boundaries(sw)) * plan.splits
    judge(sw, sw.kv_cache, before)


def _search_inputs(T: int, seed: int, state_slots: bool):
    """``(positions, kv slots, state slots, the boundary tokens)`` of ``T`` tokens at C=128: positions
    near window ends, some slots -1 (the state slots count only with ``state_slots``)."""
    g = torch.Generator().manual_seed(seed)
    positions = (torch.randint(0, 3, (T,), generator=g) * 128 + torch.randint(125, 129, (T,), generator=g)).to(DEVICE)
    kv = torch.randint(-2, 1000, (T,), generator=g).to(DEVICE)
    ss = torch.randint(-1, 5, (T,), generator=g).to(DEVICE)
    sw = SimpleNamespace(compress_ratio=128, positions=positions, kv_slot_mapping=kv,
                         state_slot_mapping=ss if state_slots else None)
    return positions, kv, ss, expected_boundaries(sw)


@pytest.mark.parametrize("programs", [1, 3])
@pytest.mark.parametrize("state_slots", [False, True])
def test_search_lists_exactly_the_boundary_tokens(programs, state_slots, monkeypatch):
    """The search kernels alone: the list's first ``count`` entries are the step's boundary tokens
    in token order, whatever kv slot or state slot the other tokens have (a token with slot -1 is
    not listed, though a gather would skip it anyway)."""
    monkeypatch.setattr(boundaries, "SINGLE_PROGRAM_TOKENS", 1024)
    T = 1024 * programs - 100 if programs > 1 else 700
    positions, kv, ss, truth = _search_inputs(T, 151, state_slots)
    search = boundaries.plan_search(T, 4)
    assert search.programs == programs
    count_cx, list_cx = boundaries.search_constexprs(128, state_slots)
    listing = torch.full((T,), -7, dtype=torch.int32, device=DEVICE)
    count = torch.full((3,), -7, dtype=torch.int32, device=DEVICE)
    counts = torch.zeros(search.programs, dtype=torch.int32, device=DEVICE)
    if programs > 1:
        boundaries._count_boundaries_kernel[(programs,)](positions, kv, ss, counts, T, search.chunk, **count_cx)
    split_max, cores, always = (T, 7, 1) if state_slots else (0, 7, 1)  # every count splits / none does
    boundaries._list_boundaries_kernel[(programs,)](positions, kv, ss, counts, listing, count, T, search.chunk,
                                                     split_max, cores, always, **list_cx)
    n = len(truth)
    assert n > 0 and count.tolist() == ([n, 0, n] if state_slots else [n, n, 0])
    assert listing[:n].tolist() == truth
    assert bool((listing[n:] == -7).all()), "the search wrote past the count"


@pytest.mark.parametrize("programs", [1, 3, 4])
@pytest.mark.parametrize("state_slots", [False, True])
def test_ticket_search_lists_exactly_the_boundary_tokens(programs, state_slots):
    """gpgpu's search in one launch alone (``ticket_search``): the list's first ``count`` entries
    are the step's boundary tokens in token order, nothing past them is written, and every counter
    is zero again after the launch."""
    from gpgpu_fallback.ticket_search import SYNC_COUNTERS, _ticket_list_kernel

    T = 1024 * programs - 100
    positions, kv, ss, truth = _search_inputs(T, 157 + programs, state_slots)
    listing = torch.full((T,), -7, dtype=torch.int32, device=DEVICE)
    count = torch.full((1,), -7, dtype=torch.int32, device=DEVICE)
    sync = torch.zeros(SYNC_COUNTERS + programs, dtype=torch.int32, device=DEVICE)
    _ticket_list_kernel[(programs,)](positions, kv, ss, listing, count, sync, T, -(-T // programs),
                                     C=128, HAS_STATE_SLOTS=state_slots)
    n = len(truth)
    assert n > 0 and count.tolist() == [n]
    assert listing[:n].tolist() == truth
    assert bool((listing[n:] == -7).all()), "the search wrote past the count"
    assert sync.tolist() == [0] * (SYNC_COUNTERS + programs), "the counters were not set back to zero"


@pytest.mark.parametrize("count,split_max,cores,always,split", [
    (0, 100, 40, 0, 0), (1, 100, 40, 0, 1), (37, 100, 40, 0, 37), (38, 100, 40, 0, 0), (40, 100, 40, 0, 0),
    (41, 100, 40, 0, 41), (79, 100, 40, 0, 0), (101, 100, 40, 1, 0), (100, 100, 40, 1, 100), (5, 100, 1, 0, 0),
    (721, 800, 40, 0, 721), (722, 800, 40, 0, 0),
])
def test_split_counts_apply_the_occupancy_rule(count, split_max, cores, always, split):
    """The device's rule is ``work_split``'s BUSY_TARGET: split when whole windows keep less than
    95% of the cores busy (37 of 40: 92.5%, 38: 95%; 721 in 19 rounds of 40: 94.9%, 722: 95%), up
    to ``split_max`` outputs, or always up to it."""
    import triton
    import triton.language as tl

    @triton.jit
    def probe(out_ptr, c, m, k, a):
        tl.store(out_ptr, boundaries.split_counts(c, m, k, a))

    out = torch.full((1,), -1, dtype=torch.int32, device=DEVICE)
    probe[(1,)](out, count, split_max, cores, always)
    assert int(out) == split


def test_search_plan():
    assert boundaries.plan_search(1).programs == 1
    assert boundaries.plan_search(boundaries.SINGLE_PROGRAM_TOKENS).programs == 1
    for tokens in (boundaries.SINGLE_PROGRAM_TOKENS + 1, 131072, 10**6):
        s = boundaries.plan_search(tokens, 40)
        assert 2 <= s.programs <= 40 and s.chunk % boundaries.BLOCK_T == 0
        assert s.programs * s.chunk >= tokens > (s.programs - 1) * s.chunk  # every chunk holds tokens


def _pieces_per_program(n: int, split: WorkSplit) -> int:
    """The most pieces one program reads for ``n`` outputs, on the programs the kernels use."""
    W = split.compress_ratio // split.row_unit
    programs = max(1, min(split.programs, n * W))
    return max(len(WorkSplit(n, split.compress_ratio, split.cores, programs, True, split.row_unit).pieces_of(p))
               for p in range(programs))


@pytest.mark.parametrize("max_outputs,C,cores,row_unit", [
    (4, 128, 40, 8), (40, 512, 40, 8), (256, 128, 40, 8), (1280, 128, 40, 8), (300, 256, 48, 4), (7, 128, 3, 1)])
def test_step_piece_slots_hold_every_count(max_outputs, C, cores, row_unit):
    """The split of a step is planned for its token count; every smaller count must fit its slots."""
    split = plan_split(max_outputs, C, cores, 8, row_unit, unsplit_row_tile=row_unit // 2 or None)
    if not split.split:
        split = WorkSplit(max_outputs, C, cores, min(cores, max_outputs * C // row_unit), True, row_unit)
    bound = plan_module.step_piece_slots(split, max_outputs)
    worst = max(_pieces_per_program(n, split) for n in range(1, max_outputs + 1))
    assert worst <= bound


@pytest.mark.parametrize("route", ["reference", "ascend:fused"])
def test_opcheck(route):
    sw, _ = _case("one", seed=61)
    torch.library.opcheck(OP.default, (*sw.args(), sw.block_size, sw.compress_ratio, 1e-6, sw.state_slot_mapping,
                                       route, False))


def _op_step(sw, out, route):
    """The registered op on the step workload, ``validate=False``."""
    OP(*sw.args()[:-1], out, sw.block_size, sw.compress_ratio, sw.base.rms_norm_eps, sw.state_slot_mapping, route,
       False)


def _layer_step(sw, out, route, kv_slot_mapping=None, **layer_kw):
    """A ``CompressorKVWriter`` for the step workload's weight, RoPE table and window, and its
    ``step`` on the workload (or on ``kv_slot_mapping``, where given); returns what ``step`` returns."""
    b = sw.base
    layer = CompressorKVWriter(b.rms_norm_weight, b.cos_sin_cache, block_size=sw.block_size,
                               compress_ratio=sw.compress_ratio, route=route, **layer_kw)
    slots = sw.kv_slot_mapping if kv_slot_mapping is None else kv_slot_mapping
    return layer.step(b.state_cache, sw.token_to_req, sw.positions, b.block_table, slots, out, sw.state_slot_mapping)


def _slot_past_cache(sw):
    """The step's kv slot mapping with its first boundary token's slot one past the cache."""
    bad_slots = sw.kv_slot_mapping.clone()
    bad_slots[expected_boundaries(sw)[0]] = sw.kv_cache.shape[0] * 64
    return bad_slots


@pytest.mark.parametrize("route", ["reference", "ascend"])
def test_op_and_layer_write_what_the_function_writes(route):
    sw, _ = _case("many", seed=71)
    before = sw.kv_cache.clone()
    via_function = before.clone()
    compress_step(*sw.args()[:-1], via_function, **sw.kwargs(), route=route, validate=False)
    via_op = before.clone()
    _op_step(sw, via_op, route)
    via_layer = before.clone()
    assert _layer_step(sw, via_layer, route) is via_layer
    assert torch.equal(via_op, via_function) and torch.equal(via_layer, via_function)
    judge(sw, via_function, before)


@pytest.mark.parametrize("route", ["reference", "ascend:fused"])
def test_op_and_layer_skip_the_tokens_without_a_state_slot(route):
    """The op and the layer's step pass the state slot mapping on: a boundary token whose state
    slot is -1 (its kv slot valid) writes nothing."""
    sw = make_step_workload([(0, 256)], 128, block_size=8, seed=23, state_slots=True, device=DEVICE)
    sw.state_slot_mapping[127] = -1  # the first of the two boundary tokens (positions 127, 255)
    before = sw.kv_cache.clone()
    via_op = before.clone()
    _op_step(sw, via_op, route)
    assert judge(sw, via_op, before, expect_outputs=1).num_outputs_written == 1
    via_layer = before.clone()
    _layer_step(sw, via_layer, route)
    assert torch.equal(via_layer, via_op)


def test_layer_step_with_validate_true_refuses_bad_input():
    """A layer built with validate=True checks a step's index values: a slot past the cache is
    refused, naming kv_slot_mapping, and nothing is written."""
    sw, _ = _case("one", seed=82)
    out = sw.kv_cache.clone()
    with pytest.raises(ValueError, match="kv_slot_mapping"):
        _layer_step(sw, out, "reference", kv_slot_mapping=_slot_past_cache(sw), validate=True)
    assert torch.equal(out, sw.kv_cache), "a bad step wrote into kv_cache"


def _bad(sw, **changes):
    args = dict(zip(["state_cache", "token_to_req", "positions", "block_table", "rms_norm_weight", "cos_sin_cache",
                     "kv_slot_mapping", "kv_cache"], sw.args()))
    kwargs = sw.kwargs()
    for k, v in changes.items():
        (args if k in args else kwargs)[k] = v
    return args, kwargs


@pytest.mark.parametrize("route", ["reference", "ascend:fused"])  # the checks come before any route
@pytest.mark.parametrize("change,error,name", [
    ("positions_dtype", TypeError, "positions"),
    ("state_slots_length", ValueError, "state_slot_mapping"),
    ("state_slots_dtype", TypeError, "state_slot_mapping"),
    ("ratio", ValueError, "compress_ratio"),
    ("kv_width", ValueError, "kv_cache"),
    ("window_past_table", ValueError, "block_table"),
    ("slot_past_cache", ValueError, "kv_slot_mapping"),
])
def test_bad_input_names_the_argument_and_writes_nothing(route, change, error, name):
    sw, _ = _case("one", seed=81)
    T = sw.num_tokens
    b = sw.base
    changes = {
        "positions_dtype": dict(positions=sw.positions.float()),
        "state_slots_length": dict(state_slot_mapping=sw.state_slot_mapping[:-1]),
        "state_slots_dtype": dict(state_slot_mapping=sw.state_slot_mapping.float()),
        "ratio": dict(compress_ratio=100),
        "kv_width": dict(kv_cache=sw.kv_cache[:, :-1]),
    }
    if change == "window_past_table":  # a boundary token whose window ends past its request's table row
        bad_pos = sw.positions.clone()
        bad_pos[0] = b.block_table.shape[1] * sw.block_size + 127
        bad_pos[0] -= (bad_pos[0] + 1) % 128
        assert (bad_pos[0] + 1) % 128 == 0 and bad_pos[0] // sw.block_size >= b.block_table.shape[1]
        changes[change] = dict(positions=bad_pos)
    if change == "slot_past_cache":
        changes[change] = dict(kv_slot_mapping=_slot_past_cache(sw))
    args, kwargs = _bad(sw, **changes[change])
    before = args["kv_cache"].clone()
    with pytest.raises(error, match=name):
        compress_step(*args.values(), **kwargs, route=route, validate=True)
    assert torch.equal(args["kv_cache"], before), "a bad call wrote into kv_cache"
    assert T == sw.num_tokens


def test_validate_checks_only_the_tokens_that_give_outputs():
    """validate=True checks only the tokens that give outputs: a non-boundary token with a
    position past the table and the cos/sin cache is no error."""
    sw, _ = _case("one", seed=91)
    sw.positions[2] = 10**6  # not a boundary position, and past the table and the cos/sin cache
    before = run_step(sw, "reference", validate=True)
    judge(sw, sw.kv_cache, before, expect_outputs=1)


# ---------------------------------------------------------------- graphs

def _fake_capture(monkeypatch):
    """The planned routes' view of an NPU graph capture (as tests/test_stream_scratch.py does):
    ``stream_state`` says "capturing", and the scratch handed out is recorded."""
    capture = SimpleNamespace(on=False, handed=[])

    def state(device):
        return 0, "npu-stream-step", capture.on

    def scratch(*args, **kwargs):
        got = launch.stream_scratch(*args, **kwargs)
        capture.handed.append((capture.on, got[0]))
        return got

    for module in (plan_module, gpgpu_route):
        monkeypatch.setattr(module, "stream_state", state)
        monkeypatch.setattr(module, "stream_scratch", scratch)
    return capture


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU tensors run under the interpreter only without a GPU")
@pytest.mark.parametrize("route", ["ascend", "ascend:fused"])  # the NPU's routes
@pytest.mark.usefixtures("step_plans")
def test_npu_graph_stand_in_replay_sequence(route, monkeypatch):
    """As an NPU graph capture would run it: the captured call gets its own scratch (no host
    sync, no allocation that depends on the count), and the steps around it are still right."""
    capture = _fake_capture(monkeypatch)
    sw = _replay_workload(101)
    g = torch.Generator().manual_seed(102)
    launch._SCRATCH.pop((torch.device("cpu"), "npu-stream-step"), None)
    for k, meant in enumerate(REPLAY_MEANT):
        capture.on = k == 2
        _set_step(sw, k, g)
        before = run_step(sw, route)
        judge(sw, sw.kv_cache, before, meant)
    captured = [buf for on, buf in capture.handed if on]
    eager = [buf for on, buf in capture.handed if not on]
    assert captured and eager and all(c is not e for c in captured for e in eager)
    assert len({b.data_ptr() for b in eager}) == 1, "eager steps of one signature changed scratch"


@pytest.mark.cuda
@pytest.mark.parametrize("route", SYNC_FREE)
@pytest.mark.usefixtures("step_plans")
def test_cuda_graph_captured_once_replays_any_step(route):
    """Capture one call; between replays change positions, slots and state in place so that the
    step has 0, 1, a few and many boundary tokens: every replay writes the oracle's bytes, nothing else."""
    sw = _replay_workload(111)
    g = torch.Generator().manual_seed(112)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        _set_step(sw, 3, g)
        run_step(sw, route)  # compile, plan
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            compress_step(*sw.args(), **sw.kwargs(), route=route, validate=False)
    torch.cuda.synchronize()
    for k, meant in [*enumerate(REPLAY_MEANT), (3, 5), (1, 1)]:
        _set_step(sw, k, g)
        start = torch.randint(0, 256, sw.kv_cache.shape, dtype=torch.uint8, generator=g).to(DEVICE)
        sw.kv_cache.copy_(start)
        graph.replay()
        torch.cuda.synchronize()
        judge(sw, sw.kv_cache, start, meant)


@pytest.mark.cuda
@pytest.mark.parametrize("route", SYNC_FREE)
def test_cuda_step_makes_no_host_sync(route):
    """With validate=False a repeat call neither syncs nor allocates: it runs under
    ``torch.cuda.set_sync_debug_mode("error")`` and leaves the allocator's count alone."""
    sw, _ = _case("many", seed=121)
    run_step(sw, route)
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_stats()["allocation.all.allocated"]
    torch.cuda.set_sync_debug_mode("error")
    try:
        compress_step(*sw.args(), **sw.kwargs(), route=route, validate=False)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == allocated


def test_decode_spans():
    spans = decode_spans(64, 8, 128)
    pos = [p for p, _ in spans]
    assert len(spans) == 64 and sum((p + 1) % 128 == 0 for p in pos) == 8
    assert sum((p + 1) % 128 == 0 for p, _ in decode_spans(4, 0, 512)) == 0


def test_package_exports_compress_step():
    assert ascend_kvc.compress_step is compress_step


def _compiled_step(state_cache, token_to_req, positions, block_table, rms_norm_weight, cos_sin_cache,
                   kv_slot_mapping, kv_cache, state_slot_mapping, route):
    compress_step(state_cache, token_to_req, positions, block_table, rms_norm_weight, cos_sin_cache,
                  kv_slot_mapping, kv_cache, block_size=8, compress_ratio=128,
                  state_slot_mapping=state_slot_mapping, route=route, validate=False)
    return kv_cache


@pytest.mark.parametrize("route", ["reference", "ascend:fused"])
def test_compress_step_compiles_in_one_graph(route):
    """Inside ``torch.compile(fullgraph=True)`` the function calls the registered op (a graph break
    would be an error); two steps of one shape, the second with other positions, write the truth."""
    torch._dynamo.reset()
    compiled = torch.compile(_compiled_step, fullgraph=True, backend="aot_eager")
    sw = _replay_workload(161)
    g = torch.Generator().manual_seed(162)
    for k in (3, 1):
        _set_step(sw, k, g)
        before = sw.kv_cache.clone()
        b = sw.base
        got = compiled(b.state_cache, sw.token_to_req, sw.positions, b.block_table, b.rms_norm_weight,
                       b.cos_sin_cache, sw.kv_slot_mapping, sw.kv_cache, sw.state_slot_mapping, route)
        judge(sw, got, before, REPLAY_MEANT[k])


@pytest.mark.parametrize("split_max,cores,always", [(100, 40, 0), (30, 40, 0), (100, 40, 1), (800, 132, 0), (5, 1, 0)])
def test_every_count_splits_is_the_device_rule(split_max, cores, always):
    """The host's ``every_count_splits`` (which drops a step's unsplit gather) agrees with the
    device's ``split_counts`` on every count up to each bound."""
    import triton
    import triton.language as tl

    @triton.jit
    def probe(out_ptr, m, k, a, N: tl.constexpr):
        c = tl.arange(0, N)
        tl.store(out_ptr + c, boundaries.split_counts(c, m, k, a))

    N = 1024
    out = torch.full((N,), -1, dtype=torch.int32, device=DEVICE)
    probe[(1,)](out, split_max, cores, always, N=N)
    device_splits = (out.cpu()[1:] > 0).tolist()  # counts 1..N-1
    for max_count in (1, 2, 37, 38, 60, 125, 126, 127, 300, N - 1):
        want = all(device_splits[:max_count])
        assert boundaries.every_count_splits(max_count, split_max, cores, bool(always)) == want, max_count


def test_small_step_on_many_cores_launches_no_unsplit_gather(step_plans):
    """A step of fewer tokens than 95% of the cores splits whatever its count: its plan has no
    unsplit gather (one launch less a decode step)."""
    step_plans.set_cores(40)
    sw = make_step_workload([(100, 30), (250, 7)], 128, block_size=4, seed=161, device=DEVICE)
    before = run_step(sw, "ascend:fused")
    judge(sw, sw.kv_cache, before)
    plan = step_plans.only()
    assert "_fused_compress_kernel" not in plan.kernels and "_window_piece_kernel" in plan.kernels


@pytest.mark.parametrize("route", ["ascend", "ascend:fused"])
def test_one_kernel_merges_split_outputs_or_pools_whole_windows(route, step_plans, monkeypatch):
    """A step whose counts can take either path launches the merge and the unsplit gather as one
    kernel, each loop to its own count: on 5 cores with the occupancy rule, 1 and 3 outputs split
    (the merge's loop runs), 5 do not (the whole-window loop runs), all on one plan."""
    step_plans.set_cores(5)
    monkeypatch.setenv("ASCEND_KVC_SPLIT", "occupancy")
    monkeypatch.setattr(boundaries, "TILE_MAX_REQUESTS", 0)  # the search, not token tiles
    assert boundaries.every_count_splits(3, 10**6, 5, False) and not boundaries.every_count_splits(5, 10**6, 5, False)
    replay_steps(route, 181, (1, 2, 3, 4))  # 1, 3, 5 and 0 outputs
    plan = step_plans.only()
    merge_or_whole = {"ascend:fused": "_merge_or_whole_to_slot_kernel", "ascend": "_merge_or_whole_to_bf16_kernel"}
    assert plan.kernels[:3] == ["_list_boundaries_kernel", "_window_piece_kernel", merge_or_whole[route]], plan.kernels
    assert not {"_fused_compress_kernel", "_gather_to_bf16_kernel", "_merge_to_slot_kernel",
                "_merge_to_bf16_kernel"} & set(plan.kernels)


_DECODE_KERNELS = {"ascend:fused": ["_window_piece_kernel", "_merge_to_slot_kernel"],
                   "ascend": ["_window_piece_kernel", "_merge_to_bf16_kernel", "_quantize_bf16_kernel",
                              "_byte_scatter_kernel"]}


@pytest.mark.parametrize("route", ["ascend", "ascend:fused"])
def test_decode_step_searches_inside_the_piece_gather(route, step_plans):
    """A decode step on 40 vector cores: no search launch, the indexed call's kernels exactly, and
    the replay sequence (0, 1, a few, all but the skipped state slot, 0 outputs) on one plan writes
    the oracle's bytes: each output's token read from the in-register prefix sum, the count left
    for the kernels after the piece gather."""
    step_plans.set_cores(40)
    replay_steps(route, 171)
    plan = step_plans.only()
    assert plan.inline_search and plan.kernels == _DECODE_KERNELS[route]


@pytest.mark.parametrize("extra,inline", [(0, True), (1, False)])
def test_inline_search_up_to_its_token_bound(extra, inline, step_plans, monkeypatch):
    """Up to ``INLINE_SEARCH_TOKENS`` tokens the piece gather searches (its last token a boundary
    token, found); one token more and the step (two requests on ``fused``) goes by token tile."""
    step_plans.set_cores(40)
    monkeypatch.setattr(boundaries, "INLINE_SEARCH_TOKENS", 64)  # the plan's bound and the kernel's INLINE_T
    tokens = 64 + extra
    sw = make_step_workload([(100, tokens - 2), (126, 2)], 128, block_size=8, seed=181, device=DEVICE)
    assert expected_boundaries(sw) == [27, tokens - 1]  # position 127 of each request: the last token is one
    before = run_step(sw, "ascend:fused")
    judge(sw, sw.kv_cache, before)
    plan = step_plans.only()
    assert plan.inline_search == inline and plan.token_tiles != inline
    assert "_list_boundaries_kernel" not in plan.kernels


@pytest.mark.parametrize("spans,tiles", [([(100, 60), (126, 2)], True), ([(100, 60), (126, 2), (0, 10)], False)])
def test_token_tiles_up_to_their_request_bound(spans, tiles, step_plans, monkeypatch):
    """A step past the inline search from at most ``TILE_MAX_REQUESTS`` requests (here 2, at the
    bound) goes by token tile, with no search launch; one request more and it is searched."""
    step_plans.set_cores(40)
    monkeypatch.setattr(boundaries, "INLINE_SEARCH_TOKENS", 16)  # these steps are past it
    monkeypatch.setattr(boundaries, "TILE_MAX_REQUESTS", 2)
    sw = make_step_workload(spans, 128, block_size=8, seed=191, device=DEVICE)
    before = run_step(sw, "ascend:fused")
    judge(sw, sw.kv_cache, before, expect_outputs=2)
    plan = step_plans.only()
    assert not plan.inline_search and plan.token_tiles == tiles
    assert ("_list_boundaries_kernel" in plan.kernels) != tiles, plan.kernels


# The kernels of an Ascend step by token tile, split and unsplit: the indexed call's, with no search.
_TILE_KERNELS = {
    ("ascend:fused", True): ["_window_piece_kernel", "_merge_or_whole_to_slot_kernel"],
    ("ascend:fused", False): ["_fused_compress_kernel"],
    ("ascend", True): ["_window_piece_kernel", "_merge_or_whole_to_bf16_kernel", "_quantize_bf16_kernel",
                       "_byte_scatter_kernel"],
    ("ascend", False): ["_gather_to_bf16_kernel", "_quantize_bf16_kernel", "_byte_scatter_kernel"],
}


@pytest.mark.parametrize("cores", ["40", "1"])
@pytest.mark.parametrize("case", list(TOKEN_TILE_STEPS))
@pytest.mark.parametrize("route", ["ascend", "ascend:fused"])
def test_ascend_token_tiles(route, case, cores, step_plans, monkeypatch):
    """An Ascend step past the inline search from at most ``TILE_MAX_REQUESTS`` requests: no search
    launch. Its outputs are its tiles of C tokens, the indexed call's kernels on that many: on 40
    vector cores the piece gather takes each tile's first boundary token and the merge-or-whole
    kernel's whole-window loop a tile's further ones ("crowded": 12 in one tile; the default's
    quantise and scatter find their rows the same way); on one core (and for 8-row windows, which
    the indexed call does not split either) the whole-window gather takes them all."""
    step_plans.set_cores(cores)
    monkeypatch.setattr(boundaries, "INLINE_SEARCH_TOKENS", 16)  # these steps are past it
    spans, C, bs, overlap, state_slots, skip = TOKEN_TILE_STEPS[case]
    sw = make_step_workload(spans, C, block_size=bs, seed=67, state_slots=state_slots, skip_fraction=skip,
                            overlap=overlap, device=DEVICE)
    before = run_step(sw, route)
    plan = step_plans.only()
    assert plan.token_tiles and not plan.inline_search
    assert plan.split.split == (cores == "40" and case != "ratio-4-overlap")  # 8-row windows: the indexed call's
    assert plan.kernels == _TILE_KERNELS[route, plan.split.split], plan.kernels
    report = judge(sw, sw.kv_cache, before)
    assert report.num_outputs_written == len(expected_boundaries(sw)) >= (12 if case == "crowded" else 2)
