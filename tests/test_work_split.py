"""The work-split planner (``ascend_kvc.stages.work_split``): its targets and its pieces.

CPU only and fast: the planner is plain Python, and these tests check the model it plans with
(bytes of state per program), not a device. What a 910B does with the split is for
``python -m bench`` to measure there.
"""

import pytest

from ascend_kvc.routes import ASCEND_PLANNED_STAGES
from ascend_kvc.stages import piece_row_tile, unsplit_row_tile
from ascend_kvc.stages.work_split import BUSY_TARGET, MIN_PIECE_ROWS, occupancy, plan_split
from ascend_kvc.workloads import OFFICIAL_BLOCK_SIZE, OFFICIAL_CASES

TARGET_CORES = (40, 48)  # the vector-core counts the planner is tuned for
OFFICIAL_UNIT = piece_row_tile(OFFICIAL_BLOCK_SIZE)  # the rows of a run's unit in the official cases


@pytest.mark.parametrize("row_unit", [1, OFFICIAL_UNIT])
@pytest.mark.parametrize("cores", TARGET_CORES)
@pytest.mark.parametrize("case", OFFICIAL_CASES, ids=lambda c: "R{}-T{}-C{}".format(*c))
def test_planned_rungs_keep_the_cores_busy_on_every_official_case(case, cores, row_unit):
    _, total_tokens, C = case
    split = plan_split(total_tokens // C, C, cores, row_unit=row_unit)
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
    assert split.split and split.programs == cores, split
    rows = [sum(last - first + 1 for _, first, last in split.pieces_of(p)) for p in range(cores)]
    assert min(rows) >= MIN_PIECE_ROWS, (split, rows)
    assert max(rows) - min(rows) <= 1, (split, rows)  # runs differ by a row at most
    tiled = plan_split(outputs, 512, cores, row_unit=OFFICIAL_UNIT)
    rows = [sum(last - first + 1 for _, first, last in tiled.pieces_of(p)) for p in range(cores)]
    assert tiled.split and tiled.programs == cores and min(rows) >= MIN_PIECE_ROWS, (tiled, rows)
    assert max(rows) - min(rows) <= OFFICIAL_UNIT, (tiled, rows)  # whole tiles: runs differ by a tile at most


def _tiles(split, program, tile):
    """Row tiles that ``program``'s pieces step through, each window starting on a tile boundary."""
    return sum(last // tile - first // tile + 1 for _, first, last in split.pieces_of(program))


@pytest.mark.parametrize("case", [c for c in OFFICIAL_CASES if c[1] == 8192], ids=lambda c: "R{}-T{}-C{}".format(*c))
def test_runs_in_whole_tiles_leave_the_busiest_program_fewer_tile_steps(case):
    # 8192 rows on 40 programs: runs of 204.8 rows step through up to 27 tiles of 8, runs of
    # 25 or 26 whole tiles through 26
    _, total_tokens, C = case
    by_row = plan_split(total_tokens // C, C, 40)
    by_tile = plan_split(total_tokens // C, C, 40, row_unit=OFFICIAL_UNIT)
    assert by_tile.split and by_tile.programs == by_row.programs == 40
    for p in range(40):
        first, end = by_tile.run(p)
        assert first % OFFICIAL_UNIT == 0 and end % OFFICIAL_UNIT == 0, (p, first, end)
    tiles = max(_tiles(by_tile, p, OFFICIAL_UNIT) for p in range(40))
    assert tiles == -(-by_tile.total_units // 40) < max(_tiles(by_row, p, OFFICIAL_UNIT) for p in range(40))


CORE_GRID = (1, 3, 20, 24, 40, 48, 1056)
OUTPUT_GRID = (1, 2, 3, 5, 7, 8, 16, 39, 40, 41, 64, 100, 256, 1024)
RATIO_GRID = (1, 7, 8, 9, 64, 100, 128, 256, 512)


def _splits(C):
    for row_unit in (1, 8):
        if C % row_unit:
            continue
        for cores in CORE_GRID:
            for outputs in OUTPUT_GRID:
                yield plan_split(outputs, C, cores, row_unit=row_unit)


@pytest.mark.parametrize("C", RATIO_GRID)
def test_pieces_cover_every_window_row_once(C):
    for split in _splits(C):
        assert 1 <= split.programs <= split.cores, split
        if not split.split:
            continue
        pieces_of_output = {}
        slots = split.piece_slots
        for p in range(split.programs):
            pieces = split.pieces_of(p)
            assert pieces and len(pieces) <= slots, (split, p, pieces)
            assert sum(last - first + 1 for _, first, last in pieces) >= min(MIN_PIECE_ROWS, C), (split, p)
            for o, first, last in pieces:
                assert 0 <= o < split.num_outputs and 0 <= first <= last < C, (split, p, pieces)
                pieces_of_output.setdefault(o, []).append((first, last))
        assert sorted(pieces_of_output) == list(range(split.num_outputs)), split
        for o, pieces in pieces_of_output.items():  # each window's rows exactly once: end to end from 0 to C - 1
            rows = sorted(pieces)
            assert rows[0][0] == 0 and rows[-1][1] == C - 1, (split, o, rows)
            assert all(b[0] == a[1] + 1 for a, b in zip(rows, rows[1:])), (split, o, rows)


@pytest.mark.parametrize("C", RATIO_GRID)
def test_the_merge_finds_each_windows_pieces(C):
    """The merge computes, per output, the programs whose runs hold its first and last rows and
    the slot of each piece; recount both from the pieces each program reads."""
    for split in _splits(C):
        if not split.split:
            continue
        holders = {}
        for p in range(split.programs):
            for j, (o, _, _) in enumerate(split.pieces_of(p)):
                holders.setdefault(o, []).append((p, j))
        for o in range(split.num_outputs):
            programs = [p for p, _ in holders[o]]
            assert programs == list(range(split.first_program(o), split.last_program(o) + 1)), (split, o)
            assert all(j == 0 for _, j in holders[o][1:]), (split, o, holders[o])  # later runs start inside o


def test_occupancy_counts_every_row_once():
    for cores in (1, 40, 48):
        for outputs in (1, 7, 64, 1024):
            split = plan_split(outputs, 256, cores)
            occ = occupancy(split)
            assert occ.mean_rows * occ.programs == outputs * 256
            assert occ.programs == split.programs <= cores
            assert 0 < occ.busy <= 1 and occ.max_over_mean >= 1


def test_runs_keep_each_programs_pieces_few():
    # 32 outputs of 256 rows on 40 cores: runs of 204.8 rows touch at most 2 windows each, where 5
    # equal pieces a window dealt round-robin would give each program 4
    split = plan_split(32, 256, 40)
    assert split.split and occupancy(split).max_pieces == 2 == split.piece_slots, split
    # runs longer than a window: 64 outputs of 128 rows on 40 cores, at most 3 windows a run
    assert occupancy(plan_split(64, 128, 40)).max_pieces == 3


def test_whole_windows_when_they_share_out():
    # 256 outputs on 528 cores: 512 programs, two to a window, one piece each (0.97 of the cores)
    split = plan_split(256, 128, 528)
    assert split.split and split.programs == 512 and occupancy(split).max_pieces == 1, split
    assert occupancy(split).busy >= BUSY_TARGET


def test_no_split_when_whole_windows_keep_the_cores_busy():
    split = plan_split(1024, 128, 40)  # 26 rounds, the last 24 of 40 busy: 0.985
    assert not split.split and split.programs == 40 and split.piece_slots == 1, split


@pytest.mark.parametrize("outputs,cores", [(1024, 40), (512, 48), (40, 40), (80, 40), (2, 2)])
def test_wider_piece_tiles_split_calls_that_whole_windows_share_out(outputs, cores):
    # One program per core (a 910B's view): the piece gather's [8, 512] tiles against the unsplit
    # kernels' [4, 512] split every call on two cores or more, even where whole windows keep the
    # cores busy; the runs then keep every core's share within a tile of the mean.
    wider = dict(row_unit=OFFICIAL_UNIT, unsplit_row_tile=unsplit_row_tile(OFFICIAL_BLOCK_SIZE))
    assert wider["unsplit_row_tile"] < wider["row_unit"]
    assert not plan_split(outputs, 128, cores, row_unit=OFFICIAL_UNIT).split  # occupancy alone: no split
    split = plan_split(outputs, 128, cores, **wider)
    assert split.split and split.programs == cores, split
    rows = [end - first for first, end in map(split.run, range(cores))]
    assert max(rows) - min(rows) <= OFFICIAL_UNIT, rows


def test_equal_tiles_or_one_core_leave_the_decision_to_occupancy():
    assert not plan_split(1024, 128, 40, row_unit=4, unsplit_row_tile=4).split  # block size 4: the same tile
    assert not plan_split(1024, 128, 1, row_unit=8, unsplit_row_tile=4).split  # one core: nothing to share
    assert plan_split(16, 512, 40, row_unit=8, unsplit_row_tile=4) == plan_split(16, 512, 40, row_unit=8)
    with pytest.raises(ValueError, match="unsplit_row_tile"):
        plan_split(16, 512, 40, row_unit=8, unsplit_row_tile=0)


def test_min_piece_rows_bounds_the_runs():
    split = plan_split(32, 256, 528, min_piece_rows=32)
    assert split.programs == 256 and split.pieces == 8 and occupancy(split).max_pieces == 1, split
    with pytest.raises(ValueError, match="min_piece_rows"):
        plan_split(32, 256, 528, min_piece_rows=0)
    with pytest.raises(ValueError, match="row_unit must divide"):
        plan_split(32, 100, 40, row_unit=8)
