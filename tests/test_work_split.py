"""The work-split planner (``ascend_kvc.stages.work_split``): its targets and its pieces.

CPU only and fast: the planner is plain Python, and these tests check the model it plans with
(bytes of state per program), not a device. What a 910B does with the split is for
``python -m bench`` to measure there.
"""

import pytest

from ascend_kvc.routes import ASCEND_PLANNED_STAGES
from ascend_kvc.stages.work_split import BUSY_TARGET, MIN_PIECE_ROWS, occupancy, plan_split
from ascend_kvc.workloads import OFFICIAL_CASES

TARGET_CORES = (40, 48)  # the vector-core counts the planner is tuned for


def _items_per_program(split) -> list[int]:
    """Work items of each program: program ``p`` takes items ``p, p + programs, ...``."""
    return [len(range(p, split.work_items, split.programs)) for p in range(split.programs)]


@pytest.mark.parametrize("cores", TARGET_CORES)
@pytest.mark.parametrize("case", OFFICIAL_CASES, ids=lambda c: "R{}-T{}-C{}".format(*c))
def test_planned_rungs_keep_the_cores_busy_on_every_official_case(case, cores):
    _, total_tokens, C = case
    split = plan_split(total_tokens // C, C, cores)
    occ = occupancy(split)
    assert occ.busy >= 0.90, (split, occ)
    assert occ.max_over_mean <= 1.15, (split, occ)


def test_the_planned_rungs_are_the_default_and_fused():
    # the targets above are promised for exactly these rungs (bench.occupancy reports both)
    assert set(ASCEND_PLANNED_STAGES) == {"triton-quant", "fused"}


@pytest.mark.parametrize("cores", TARGET_CORES)
@pytest.mark.parametrize("outputs", [1, 2, 4, 8])
def test_few_outputs_at_c512_give_every_core_work(outputs, cores):
    split = plan_split(outputs, 512, cores)
    items = _items_per_program(split)
    assert split.programs == cores, split
    assert min(items) >= 1, (split, items)
    sizes = [last - first + 1 for first, last in map(split.piece_rows, range(split.pieces))]
    assert min(sizes) >= 1, (split, sizes)  # an item of an empty piece would be no work


CORE_GRID = (1, 3, 20, 24, 40, 48, 1056)
OUTPUT_GRID = (1, 2, 3, 5, 8, 16, 39, 40, 41, 64, 100, 256, 1024)
RATIO_GRID = (1, 7, 8, 9, 64, 100, 128, 256, 512)


@pytest.mark.parametrize("C", RATIO_GRID)
def test_pieces_cover_the_window_exactly(C):
    for cores in CORE_GRID:
        for outputs in OUTPUT_GRID:
            split = plan_split(outputs, C, cores)
            assert 1 <= split.pieces <= max(1, C // MIN_PIECE_ROWS), split
            spans = [split.piece_rows(k) for k in range(split.pieces)]
            assert spans[0][0] == 0 and spans[-1][1] == C - 1, (split, spans)
            for (_, last), (first, _) in zip(spans, spans[1:]):
                assert first == last + 1, (split, spans)  # contiguous and disjoint
            covered = [row for first, last in spans for row in range(first, last + 1)]
            assert covered == list(range(C)), split  # the union is 0..C-1, each row once
            if C // MIN_PIECE_ROWS >= split.pieces:
                assert min(last - first + 1 for first, last in spans) >= MIN_PIECE_ROWS, (split, spans)


def test_occupancy_counts_every_row_once():
    for cores in (1, 40, 48):
        for outputs in (1, 7, 64, 1024):
            split = plan_split(outputs, 256, cores)
            occ = occupancy(split)
            assert occ.mean_rows * occ.programs == outputs * 256
            assert occ.programs == split.programs <= cores
            assert 0 < occ.busy <= 1 and occ.max_over_mean >= 1


def test_starts_from_the_most_pieces_that_fit_one_round():
    # 256 outputs on 528 cores: 2 pieces fill one round (0.97 busy); 3 would need a second round.
    split = plan_split(256, 128, 528)
    assert split.pieces == 2 and occupancy(split).busy >= BUSY_TARGET, split


def test_min_piece_rows_bounds_the_pieces():
    split = plan_split(32, 256, 528, min_piece_rows=32)
    assert split.pieces == 8, split
    assert all(last - first + 1 >= 32 for first, last in (split.piece_rows(k) for k in range(split.pieces)))
    with pytest.raises(ValueError, match="min_piece_rows"):
        plan_split(32, 256, 528, min_piece_rows=0)
