"""Tile choices per device kind, in one table (per-vendor choices kept in one place)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import triton

from ascend_kvc.layout import HEAD_DIM


@dataclass(frozen=True)
class GpgpuTiles:
    block_d: int  # head dims per program (512 / block_d programs per output and window piece)
    rows_per_step: int  # state rows loaded per step (8 blocks of 8 rows = 64); a power of two
    warps: int
    stages: int  # software-pipelining depth of the window loop (num_stages)
    programs_per_unit: int  # aim for this many programs per SM before splitting windows
    max_splits: int


TILES: dict[str, GpgpuTiles] = {
    # H100/H200 (sm90), from bench/sweep_gpgpu.py on an H200 (bench/RESULTS.md): 256-byte row
    # segments, 64 rows (8 blocks at block_size 8) per step.
    "cuda:sm90": GpgpuTiles(block_d=64, rows_per_step=64, warps=4, stages=3, programs_per_unit=8, max_splits=16),
    # Anything else CUDA-like (A100, consumer parts, other Triton GPU backends) and the interpreter.
    "default": GpgpuTiles(block_d=128, rows_per_step=32, warps=4, stages=3, programs_per_unit=8, max_splits=16),
}
# Per-(kind, compress_ratio) exceptions to TILES.
# sm90: bench/sweep_gpgpu.py on an H200 (graph replay, all official cases): two warps a program
# and 32 rows a step beat 4 warps and 64 rows on the 131072-token cases, with 128 head dims a
# program for C = 128 and 256 and 64 for C = 512 (bench/RESULTS.md).
TILES_BY_RATIO: dict[tuple[str, int], GpgpuTiles] = {
    ("cuda:sm90", 128): GpgpuTiles(block_d=128, rows_per_step=32, warps=2, stages=3, programs_per_unit=8, max_splits=16),
    ("cuda:sm90", 256): GpgpuTiles(block_d=128, rows_per_step=32, warps=2, stages=3, programs_per_unit=8, max_splits=16),
    ("cuda:sm90", 512): GpgpuTiles(block_d=64, rows_per_step=32, warps=2, stages=3, programs_per_unit=8, max_splits=8),
}


def tiles_for(kind: str, compress_ratio: int | None = None) -> GpgpuTiles:
    exact = TILES_BY_RATIO.get((kind, compress_ratio))
    return exact or TILES.get(kind, TILES["default"])


@dataclass(frozen=True)
class WindowSteps:
    """How a window is walked: ``blocks`` physical blocks of ``rows`` rows per step, or, for
    blocks taller than a step (``chunked``), one block per step in chunks of ``rows`` rows."""

    blocks: int
    rows: int
    chunked: bool


def window_steps(tiles: GpgpuTiles, block_size: int) -> WindowSteps:
    rows = triton.next_power_of_2(block_size)
    if rows > tiles.rows_per_step:
        return WindowSteps(blocks=1, rows=tiles.rows_per_step, chunked=True)
    return WindowSteps(blocks=tiles.rows_per_step // rows, rows=rows, chunked=False)


def window_splits(tiles: GpgpuTiles, num_outputs: int, max_cols: int, blocks_per_step: int, compute_units: int) -> int:
    """How many pieces to cut each window into so that the grid fills every SM.

    A power of two (it is a compile-time constant), at least one step of blocks per piece.
    """
    programs = num_outputs * (HEAD_DIM // tiles.block_d)
    want = math.ceil(tiles.programs_per_unit * compute_units / max(programs, 1))
    most = min(tiles.max_splits, math.ceil(max_cols / blocks_per_step))
    splits = 1
    while splits < want and splits * 2 <= most:
        splits *= 2
    return splits
