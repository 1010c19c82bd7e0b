"""How the Ascend rungs that users run (the default and ``fused``) share a call among vector cores.

A persistent grid of ``P`` programs (one per vector core on an NPU) loops over work items. With
one item per output, ``P`` cores are all busy only when the outputs are many and share out
evenly: 16 outputs on 40 cores leave 24 idle, and 64 outputs on 40 cores take two rounds of
which the second keeps 24 cores busy. So each window of ``C`` rows may be split into ``pieces``
near-equal runs of rows, one work item each (``output * pieces + piece``); a second kernel then
merges each output's piece states (running max, sum and weighted sum per dimension) and ends as
the unsplit kernel would. The planner takes the fewest pieces that keep at least ``BUSY_TARGET``
of the core-time busy: pieces cost a 6 KiB state written and read again, and one more launch.

The model counts the bytes of state rows each program reads (the memory-bound work; merge and
index reads are small beside it) and assumes a core's time is proportional to its bytes. It is
a model, not a measurement: ``occupancy`` reports what it predicts, and the benchmark reports
what a device measured.
"""

from __future__ import annotations

from dataclasses import dataclass

# Keep at least this share of the cores' time busy; fewer pieces when it is already met. A piece
# costs 6 KiB written and read against the 4 KiB per fp32 row it saves a core; at 0.95, 256
# outputs on 40 cores (0.914 busy unsplit) take two pieces each (0.985).
BUSY_TARGET = 0.95
# A piece reads at least this many window rows: a piece's state (3 x 512 fp32, 6 KiB) is written
# once and read once by the merge, against 4 KiB per fp32 row (values + scores) read by the piece.
MIN_PIECE_ROWS = 8


@dataclass(frozen=True)
class WorkSplit:
    """One call's work split: ``pieces`` per output, on a grid of ``programs``."""

    num_outputs: int
    compress_ratio: int
    cores: int  # the vector cores the split is planned for
    pieces: int  # window pieces per output; 1 = no split, no merge launch
    programs: int  # persistent programs of the (piece) gather grid

    @property
    def split(self) -> bool:
        return self.pieces > 1

    @property
    def work_items(self) -> int:
        return self.num_outputs * self.pieces

    def piece_rows(self, piece: int) -> tuple[int, int]:
        """``(first, last)`` window row (0 = the window's first row) of ``piece``, as the kernels
        compute them: ``piece * C // pieces`` up to the next piece's first row."""
        C, S = self.compress_ratio, self.pieces
        return piece * C // S, (piece + 1) * C // S - 1


@dataclass(frozen=True)
class Occupancy:
    """What the model predicts for a split: rows read per program and the share of core-time busy."""

    busy: float  # total rows / (cores * the busiest program's rows)
    max_over_mean: float  # the busiest program's rows over the mean of the programs launched
    programs: int
    max_rows: int
    mean_rows: float


def occupancy(split: WorkSplit) -> Occupancy:
    """Rows each program of ``split``'s gather reads, item by item as the grid loop hands them out
    (program ``p`` takes items ``p, p + programs, ...``)."""
    rows = [0] * split.programs
    sizes = [last - first + 1 for first, last in (split.piece_rows(k) for k in range(split.pieces))]
    for item in range(split.work_items):
        rows[item % split.programs] += sizes[item % split.pieces]
    total = sum(rows)
    busiest = max(rows)
    mean = total / split.programs
    return Occupancy(busy=total / (split.cores * busiest), max_over_mean=busiest / mean,
                     programs=split.programs, max_rows=busiest, mean_rows=mean)


def _split(num_outputs: int, C: int, cores: int, pieces: int) -> WorkSplit:
    return WorkSplit(num_outputs, C, cores, pieces, max(1, min(cores, num_outputs * pieces)))


def plan_split(num_outputs: int, compress_ratio: int, cores: int,
               min_piece_rows: int = MIN_PIECE_ROWS) -> WorkSplit:
    """No split when one item per output keeps ``BUSY_TARGET`` of ``cores`` busy; otherwise the
    fewest pieces per window (at least ``min_piece_rows`` rows each, and at first as many as still
    fit one round of the cores) that reach it; the busiest split if none does."""
    if num_outputs < 0 or compress_ratio < 1 or cores < 1 or min_piece_rows < 1:
        raise ValueError(f"need num_outputs >= 0, compress_ratio >= 1, cores >= 1, min_piece_rows >= 1; got "
                         f"{num_outputs}, {compress_ratio}, {cores}, {min_piece_rows}")
    if num_outputs == 0:
        return _split(0, compress_ratio, cores, 1)
    max_pieces = max(1, compress_ratio // min_piece_rows)
    best = _split(num_outputs, compress_ratio, cores, 1)
    best_busy = occupancy(best).busy
    if best_busy >= BUSY_TARGET:
        return best  # one item per output already keeps the cores busy: no merge launch
    # Otherwise start from the most pieces that still fit one round of the cores (at least two),
    # where the rows allow: 256 outputs on 528 cores take 2 pieces (0.97 busy), not 3 (0.73).
    pieces = min(max_pieces, max(2, cores // num_outputs))
    candidate = _split(num_outputs, compress_ratio, cores, pieces)
    busy = occupancy(candidate).busy
    if busy > best_busy:
        best, best_busy = candidate, busy
    while best_busy < BUSY_TARGET and pieces < max_pieces:
        pieces += 1
        if num_outputs * (pieces - 1) >= cores * 64:
            break  # many rounds already; balance cannot get much better
        candidate = _split(num_outputs, compress_ratio, cores, pieces)
        busy = occupancy(candidate).busy
        if busy > best_busy + 1e-9:
            best, best_busy = candidate, busy
    return best
