"""How the Ascend rungs that users run (the default and ``fused``) share a call among vector cores.

Unsplit, a persistent grid of ``P`` programs (one per vector core on an NPU) loops over the
outputs, one whole window each. That keeps every core busy only when the outputs are many and
share out evenly: 16 outputs on 40 cores leave 24 idle, and 64 outputs on 40 cores take two rounds
of which the second keeps 24 cores busy.

Split, the call's windows are laid end to end, ``num_outputs * C`` rows in output order, in
*units* of ``row_unit`` rows (the piece gather's row tile, which divides ``C``), and program ``p``
of ``P`` reads the contiguous run of units ``[p * U // P, (p + 1) * U // P)``, ``U = num_outputs
* C / row_unit``. Every program then reads the same number of units, give or take one. Runs
start and end a whole number of units into a window, so where windows start on a block boundary
(as every official one does) no run splits a row tile, whose step costs the same whatever its
mask. A run that crosses the end of a window becomes two *pieces*: one per window it touches. Each
piece leaves its softmax state (running max, sum and weighted sum per dimension) in slot
``p * piece_slots + j`` (the program's ``j``-th piece), and a second kernel merges each output's
pieces, which come from the programs ``first_program(o)`` to ``last_program(o)``.

Every piece costs a fixed amount besides its rows: the chain of index and block-table reads before
its first row, and a 6 KiB state written and read again. Runs keep pieces few: a program reads
at most ``ceil(run / C) + 1`` of them, against the ``ceil(outputs * pieces / P)`` of a round-robin
deal of equal pieces. When whole windows already share out over the programs (``P`` a multiple of
the outputs), the runs are equal pieces of one window each.

Where each program has a core to itself (an NPU, or ``ASCEND_KVC_VECTOR_CORES``), a split has a
second gain: the piece gather ends in a state store, not in the slot finalize, so it reads wider
row tiles than the unsplit kernels (``[8, 512]`` against ``[4, 512]`` at block size 8: their
unified buffer must also hold the finalize). There, when the piece gather's tile is wider, every
call on two cores or more splits, whatever its output count: on an H200 at 40 programs, calls of
40 to 640 outputs (8 requests, C = 128, 256, 512) ran 1.18-1.60x faster split than with one
window a program, even where whole windows share out evenly. Where programs share a compute unit
(a GPU's grid, four to an SM), splitting the official cases that share out evenly measured 6-10%
slower, and only the occupancy decides (bench/RESULTS.md). ``plan_split`` is told
which case it is in (``unsplit_row_tile``); ``ASCEND_KVC_SPLIT=occupancy`` keeps the occupancy rule
alone everywhere.

The model counts the rows of state each program reads (the memory-bound work; merge and index
reads are small beside it) and assumes a core's time is proportional to its rows. It is a model,
not a measurement: ``occupancy`` reports what it predicts, and the benchmark reports what a device
measured.
"""

from __future__ import annotations

from dataclasses import dataclass

# Keep at least this share of the cores' time busy without splitting; split otherwise. At 0.95,
# 256 outputs on 40 cores (0.914 busy unsplit) split, 1024 (0.985) do not, unless the piece
# gather's wider tiles decide (``plan_split``'s ``unsplit_row_tile``).
BUSY_TARGET = 0.95
# A program of a split reads at least this many rows: a piece's state (3 x 512 fp32, 6 KiB) is
# written once and read once by the merge, against 4 KiB per fp32 row (values + scores) it reads.
MIN_PIECE_ROWS = 8


@dataclass(frozen=True)
class WorkSplit:
    """One call's work split: ``programs`` programs, each one output at a time (``split`` false)
    or each a run of rows of the windows laid end to end (``split`` true)."""

    num_outputs: int
    compress_ratio: int
    cores: int  # the vector cores the split is planned for
    programs: int  # persistent programs of the gather (or piece gather) grid
    split: bool  # windows cut into runs: a piece gather, then a merge launch
    row_unit: int = 1  # runs are whole numbers of these rows (the piece gather's row tile)

    @property
    def total_rows(self) -> int:
        return self.num_outputs * self.compress_ratio

    @property
    def total_units(self) -> int:
        return self.total_rows // self.row_unit

    def run(self, program: int) -> tuple[int, int]:
        """``[first, end)`` rows of the windows laid end to end that ``program`` reads, as the
        kernels compute them."""
        U, P, A = self.total_units, self.programs, self.row_unit
        return program * U // P * A, (program + 1) * U // P * A

    def pieces_of(self, program: int) -> list[tuple[int, int, int]]:
        """``(output, first, last)`` window rows (0 = a window's first row) of each piece of
        ``program``, in the order the piece gather reads them."""
        C = self.compress_ratio
        first, end = self.run(program)
        if end <= first:
            return []
        return [(o, max(first, o * C) - o * C, min(end, o * C + C) - o * C - 1)
                for o in range(first // C, (end - 1) // C + 1)]

    @property
    def piece_slots(self) -> int:
        """State slots per program: the most pieces one program reads (1 when unsplit)."""
        if not self.split:
            return 1
        return max(len(self.pieces_of(p)) for p in range(self.programs))

    def first_program(self, output: int) -> int:
        """The program that reads ``output``'s first window row (as the merge computes it)."""
        W = self.compress_ratio // self.row_unit  # units a window
        return ((output * W + 1) * self.programs - 1) // self.total_units

    def last_program(self, output: int) -> int:
        """The program that reads ``output``'s last window row (as the merge computes it)."""
        W = self.compress_ratio // self.row_unit
        return ((output + 1) * W * self.programs - 1) // self.total_units

    @property
    def pieces(self) -> int:
        """The most pieces one window is cut into (1 when unsplit)."""
        if not self.split:
            return 1
        return max(self.last_program(o) - self.first_program(o) + 1 for o in range(self.num_outputs))

    @property
    def work_items(self) -> int:
        """Windows (unsplit) or pieces (split) that the gather reads."""
        if not self.split:
            return self.num_outputs
        return sum(len(self.pieces_of(p)) for p in range(self.programs))


@dataclass(frozen=True)
class Occupancy:
    """What the model predicts for a split: rows read per program and the share of core-time busy."""

    busy: float  # total rows / (cores * the busiest program's rows)
    max_over_mean: float  # the busiest program's rows over the mean of the programs launched
    programs: int
    max_rows: int
    mean_rows: float
    max_pieces: int  # the most window pieces (each with its fixed cost) one program reads


def occupancy(split: WorkSplit) -> Occupancy:
    """Rows each program of ``split``'s gather reads: whole windows dealt round-robin (program
    ``p`` takes outputs ``p, p + programs, ...``) or, split, its run of rows."""
    if split.split:
        rows = [end - first for first, end in map(split.run, range(split.programs))]
        pieces = [len(split.pieces_of(p)) for p in range(split.programs)]
    else:
        pieces = [len(range(p, split.num_outputs, split.programs)) for p in range(split.programs)]
        rows = [k * split.compress_ratio for k in pieces]
    total = sum(rows)
    busiest = max(rows)
    mean = total / split.programs
    return Occupancy(busy=total / (split.cores * busiest) if busiest else 0.0,
                     max_over_mean=busiest / mean if mean else 1.0,
                     programs=split.programs, max_rows=busiest, mean_rows=mean, max_pieces=max(pieces))


def plan_split(num_outputs: int, compress_ratio: int, cores: int,
               min_piece_rows: int = MIN_PIECE_ROWS, row_unit: int = 1,
               unsplit_row_tile: int | None = None) -> WorkSplit:
    """No split when one window per program keeps ``BUSY_TARGET`` of ``cores`` busy, unless
    ``unsplit_row_tile`` (the unsplit kernels' row tile, given where each program has a core to
    itself) is narrower than ``row_unit`` and there are two cores or more: then always a split.
    A split is runs of ``row_unit``-row units on ``P = min(cores, rows // max(min_piece_rows,
    row_unit))`` programs, or on the largest multiple of the outputs up to ``P`` when that keeps
    ``BUSY_TARGET`` of ``P`` (one piece a program). ``row_unit`` must divide ``compress_ratio``."""
    if num_outputs < 0 or compress_ratio < 1 or cores < 1 or min_piece_rows < 1 or row_unit < 1:
        raise ValueError(f"need num_outputs >= 0, compress_ratio >= 1, cores >= 1, min_piece_rows >= 1, "
                         f"row_unit >= 1; got {num_outputs}, {compress_ratio}, {cores}, {min_piece_rows}, {row_unit}")
    if compress_ratio % row_unit:
        raise ValueError(f"row_unit must divide compress_ratio; got {row_unit} and {compress_ratio}")
    if unsplit_row_tile is not None and unsplit_row_tile < 1:
        raise ValueError(f"unsplit_row_tile must be >= 1 or None; got {unsplit_row_tile}")
    n, C = num_outputs, compress_ratio
    unsplit = WorkSplit(n, C, cores, max(1, min(cores, n)), False)
    wider_tiles = unsplit_row_tile is not None and row_unit > unsplit_row_tile and cores > 1
    if n == 0 or (not wider_tiles and occupancy(unsplit).busy >= BUSY_TARGET):
        return unsplit
    programs = min(cores, max(1, n * C // max(min_piece_rows, row_unit)))
    whole = n * (programs // n)  # every program inside one window: one piece each
    if whole >= BUSY_TARGET * programs:
        programs = whole
    split = WorkSplit(n, C, cores, programs, True, row_unit)
    if wider_tiles and programs > 1:
        return split
    return split if occupancy(split).busy > occupancy(unsplit).busy else unsplit
