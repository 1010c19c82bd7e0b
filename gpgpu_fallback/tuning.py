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
    evict_first: bool = False  # L2 hint on the state rows (read once): leave others' lines in L2


TILES: dict[str, GpgpuTiles] = {
    # H100/H200 (sm90), from bench/sweep_gpgpu.py on an H200 (bench/RESULTS.md): 256-byte row
    # segments, 64 rows (8 blocks at block_size 8) per step.
    "cuda:sm90": GpgpuTiles(block_d=64, rows_per_step=64, warps=4, stages=3, programs_per_unit=8, max_splits=16),
    # Anything else CUDA-like (A100, consumer parts, other Triton GPU backends) and the interpreter.
    "default": GpgpuTiles(block_d=128, rows_per_step=32, warps=4, stages=3, programs_per_unit=8, max_splits=16),
}
# Per-(kind, compress_ratio) exceptions to TILES: a GpgpuTiles, or ``(most outputs, tiles)`` steps
# in rising order (``None``: any number), since a call with few outputs wants other tiles than one
# with many.
# sm90: bench/sweep_gpgpu.py on an H200 (graph replay, every official case; bench/RESULTS.md).
# Few outputs: small programs (one warp, 32 head dims) so that the grid fills every SM, and
# evict_first on the state rows, which are read once (at 8192 tokens, C=128: 20.6 against 26.2 us).
# Many outputs: 64 head dims and one warp with evict_first (C=128); 2 warps and 128 (C=256) or 64
# (C=512) head dims without it, which was faster there at 131072 tokens.
_FEW = GpgpuTiles(block_d=32, rows_per_step=32, warps=1, stages=3, programs_per_unit=8, max_splits=16,
                  evict_first=True)
TILES_BY_RATIO: dict[tuple[str, int], GpgpuTiles | tuple[tuple[int | None, GpgpuTiles], ...]] = {
    ("cuda:sm90", 128): (
        (256, _FEW),
        (None, GpgpuTiles(block_d=64, rows_per_step=32, warps=1, stages=3, programs_per_unit=8, max_splits=16,
                          evict_first=True)),
    ),
    ("cuda:sm90", 256): (
        (256, _FEW),
        (None, GpgpuTiles(block_d=128, rows_per_step=32, warps=2, stages=3, programs_per_unit=8, max_splits=16)),
    ),
    ("cuda:sm90", 512): (
        (16, GpgpuTiles(block_d=64, rows_per_step=32, warps=2, stages=3, programs_per_unit=8, max_splits=8,
                        evict_first=True)),
        (128, _FEW),
        (None, GpgpuTiles(block_d=64, rows_per_step=32, warps=2, stages=3, programs_per_unit=8, max_splits=8)),
    ),
    # Ratio 4 (windows of 4 rows, 8 with the overlap): one program owns an output's whole head and
    # walks its window in 8-row steps, with no pieces to merge. On an H100 (bench.vllm_peer's C4 prefill chunk,
    # 2048 outputs, overlap): 56 us a replay, against 125 with the sm90 default's 64-dim pieces. Four warps
    # and evict_first on the state rows: on an H200 31.1 us a replay on that chunk and 9.7 on the 64-token
    # decode step, against 32.8 and 10.1-10.5 with two warps (vLLM's kernel 34.0 and 9.6-9.9 in the same
    # calls); on an H100 two warps had led on the chunk, 37.1 against 38.3. Up to 16 outputs (a
    # 64-token decode step), 16-row steps: a window of 8 rows at block size 8 in one step and one
    # piece; on an H100 9.2 us a replay and 8.6 eager on that decode step against 9.6-9.9 and
    # 9.0-9.2 with 8-row steps (vLLM's kernel 9.8-10.1 and 9.3-9.4), where the chunk took 46.5
    # against 34.3 (bench/RESULTS.md).
    ("cuda:sm90", 4): (
        (16, GpgpuTiles(block_d=512, rows_per_step=16, warps=4, stages=2, programs_per_unit=8, max_splits=16,
                        evict_first=True)),
        (None, GpgpuTiles(block_d=512, rows_per_step=8, warps=4, stages=2, programs_per_unit=8, max_splits=16,
                          evict_first=True)),
    ),
}


def tiles_for(kind: str, compress_ratio: int | None = None, num_outputs: int = 0) -> GpgpuTiles:
    exact = TILES_BY_RATIO.get((kind, compress_ratio))
    if isinstance(exact, tuple):
        exact = next(t for most, t in exact if most is None or num_outputs <= most)
    return exact or TILES.get(kind, TILES["default"])


@dataclass(frozen=True)
class WindowSteps:
    """How a window is walked: ``blocks`` physical blocks of ``rows`` rows per step, or, for
    blocks taller than a step (``chunked``), one block per step in chunks of ``rows`` rows."""

    blocks: int
    rows: int
    chunked: bool


def window_columns(window: int, block_size: int) -> int:
    """Logical blocks a window of ``window`` rows can touch (its edges anywhere in a block)."""
    return (window - 1) // block_size + 2


def window_steps(tiles: GpgpuTiles, block_size: int, window: int | None = None) -> WindowSteps:
    """The steps of ``tiles`` for ``block_size``, cut down to a window of ``window`` rows when
    that is shorter than a step: at most ``next_pow2`` of the blocks it can touch per step, or
    chunks of ``next_pow2(window)`` rows in tall blocks (ratio 4's windows of 4 or 8 rows). A
    window of 128 rows or more never hits either cap, so those steps are the table's."""
    rows = triton.next_power_of_2(block_size)
    if rows > tiles.rows_per_step:
        chunk = tiles.rows_per_step if window is None else min(tiles.rows_per_step, triton.next_power_of_2(window))
        return WindowSteps(blocks=1, rows=chunk, chunked=True)
    blocks = tiles.rows_per_step // rows
    if window is not None:
        blocks = min(blocks, triton.next_power_of_2(window_columns(window, block_size)))
    return WindowSteps(blocks=blocks, rows=rows, chunked=False)


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
