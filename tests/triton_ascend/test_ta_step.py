"""``compress_step`` on the Ascend routes under triton-ascend 3.2.0's own interpreter.

The boundary search (``ascend_kvc.boundaries``: the prefix sum, the scattered list store) and the
planned rungs' kernels in their counted form (``COUNTED``: the loop bounds read from the device)
are new Triton code for an NPU; here they run with the Triton an NPU host compiles. Cases come
from tests/test_step.py and are judged the same way, by the oracle on boundary tokens derived
token by token in Python: an empty step, many boundary tokens (with skipped kv and state slots),
C = 256 at block size 3, a replay sequence of 0, 1, 3, 5 and 0 boundary tokens on the same
tensors, a step split over 40 vector cores whose piece gather searches its own tokens (no search
launch), a step that takes the split path and then the unsplit one on one plan, a step
whose search has three programs (a count kernel, then the list), and a step by token tile (no
search) whose tiles hold several boundary tokens.
"""

from __future__ import annotations

import pytest
import torch

from ascend_kvc import boundaries, step as step_module

from test_step import _case, expected_boundaries, judge, replay_steps, run_step

ROUTES = ["ascend", "ascend:fused"]
SEARCH_KERNELS = {"_count_boundaries_kernel", "_list_boundaries_kernel"}
LAUNCHED: set[str] = set()


@pytest.fixture
def launches(monkeypatch):
    from triton.runtime import interpreter

    names: list[str] = []
    original = interpreter.GridExecutor.__call__

    def call(self, *args, **kwargs):
        names.append(self.fn.__name__)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(interpreter.GridExecutor, "__call__", call)
    step_module.clear_step_plans()
    yield names
    LAUNCHED.update(names)
    step_module.clear_step_plans()


@pytest.mark.parametrize("case", ["empty", "many", "c256-bs3"])  # one: the replay sequence
@pytest.mark.parametrize("route", ROUTES)
def test_step_bytes(route, case, launches):
    sw, meant = _case(case, seed=201)
    before = run_step(sw, route)
    judge(sw, sw.kv_cache, before, meant)
    # the search runs first: the list kernel, or (a small step that always splits) the piece gather's own
    assert launches[0] in ("_list_boundaries_kernel", "_window_piece_kernel"), launches


@pytest.mark.parametrize("route", ROUTES)
def test_replay_sequence(route, launches):
    replay_steps(route, 211)
    assert len(step_module._STEP_PLANS) == 1


@pytest.mark.parametrize("route", ROUTES)
def test_split_over_forty_vector_cores(route, launches, monkeypatch):
    """On 40 vector cores a decode step splits, and its piece gather finds its tokens itself (the
    in-register prefix sum of ``boundaries.boundaries_in_registers``): no search kernel runs."""
    monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", "40")
    step_module.clear_step_plans()
    replay_steps(route, 221, (0, 1, 2, 3))
    assert "_window_piece_kernel" in launches and not SEARCH_KERNELS & set(launches)


@pytest.mark.parametrize("route", ROUTES)
def test_search_of_three_programs(route, launches, monkeypatch):
    monkeypatch.setattr(boundaries, "SINGLE_PROGRAM_TOKENS", 1024)
    monkeypatch.setattr(boundaries, "TILE_MAX_REQUESTS", 0)  # the search, not token tiles
    from ascend_kvc.workloads import make_step_workload

    sw = make_step_workload([(0, 1100), (900, 1000)], 128, block_size=16, seed=231, skip_fraction=0.3,
                            state_slots=True)
    before = run_step(sw, route)
    judge(sw, sw.kv_cache, before)
    assert "_count_boundaries_kernel" in launches and len(expected_boundaries(sw)) >= 2


@pytest.mark.parametrize("route", ROUTES)
def test_merge_or_whole_windows_in_one_kernel(route, launches, monkeypatch):
    """On 5 cores with the occupancy rule, 1 and 3 outputs split and 5 do not: the one kernel
    after the piece gather runs its merge loop, then its whole-window loop, on one plan."""
    monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", "5")
    monkeypatch.setenv("ASCEND_KVC_SPLIT", "occupancy")
    step_module.clear_step_plans()
    replay_steps(route, 241, (1, 2, 3, 4))  # 1, 3, 5 and 0 outputs
    assert {"_merge_or_whole_to_slot_kernel", "_merge_or_whole_to_bf16_kernel"} & set(launches), launches


@pytest.mark.parametrize("cores", ["40", "1"])
@pytest.mark.parametrize("route", ROUTES)
def test_token_tiles(route, cores, launches, monkeypatch):
    """A step by token tile, no search: 12 requests end a window in one tile (on 40 cores the
    merge-or-whole kernel's whole-window loop takes the 11 after the piece gather's first, and the
    default's quantise and scatter find their rows by tile too; on one core the whole-window
    gather takes all 12), then a prefill."""
    monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", cores)
    monkeypatch.setattr(boundaries, "INLINE_SEARCH_TOKENS", 16)
    from ascend_kvc.workloads import make_step_workload
    from test_step import _TILE_KERNELS, TOKEN_TILE_STEPS

    spans, C, bs, overlap, state_slots, skip = TOKEN_TILE_STEPS["crowded"]
    sw = make_step_workload(spans, C, block_size=bs, seed=251, state_slots=True)
    before = run_step(sw, route)
    judge(sw, sw.kv_cache, before)
    assert launches == _TILE_KERNELS[route, cores == "40"], launches
    assert len(expected_boundaries(sw)) >= 12


def test_the_search_kernels_ran():
    """Last in this file: both search kernels ran above under the 3.2 interpreter."""
    assert SEARCH_KERNELS <= LAUNCHED, f"never ran: {sorted(SEARCH_KERNELS - LAUNCHED)}"
