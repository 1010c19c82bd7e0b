"""Tile choices per device kind, in one table (the seed's lesson: isolate per-vendor choices)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class GpgpuTiles:
    block_d: int  # head dims per gather program (512 / block_d programs per output and split)
    blocks_per_step: int  # physical blocks loaded per step: one table entry each
    gather_warps: int
    gather_stages: int  # software-pipelining depth of the gather loop (num_stages)
    finalize_warps: int
    programs_per_unit: int  # aim for this many gather programs per SM before splitting windows
    max_splits: int


TILES: dict[str, GpgpuTiles] = {
    # H100/H200 (sm90), from bench/sweep_gpgpu.py on an H200 (bench/RESULTS.md): 256-byte row
    # segments, 8 blocks (64 rows at block_size 8) per step. Within the sweep's run-to-run noise
    # (~5%) BLOCK_D 64/128 with 8 blocks a step tie on the 131072-token cases.
    "cuda:sm90": GpgpuTiles(block_d=64, blocks_per_step=8, gather_warps=4, gather_stages=3,
                            finalize_warps=4, programs_per_unit=8, max_splits=16),
    # Anything else CUDA-like (A100, consumer parts, other Triton GPU backends) and the interpreter.
    "default": GpgpuTiles(block_d=128, blocks_per_step=4, gather_warps=4, gather_stages=3,
                          finalize_warps=4, programs_per_unit=8, max_splits=16),
}


def tiles_for(kind: str) -> GpgpuTiles:
    return TILES.get(kind, TILES["default"])


def window_splits(tiles: GpgpuTiles, num_outputs: int, max_cols: int, compute_units: int) -> int:
    """How many pieces to cut each window into so that the gather fills every SM.

    A power of two (it is a compile-time constant), at most one step of blocks per piece.
    """
    programs = num_outputs * (512 // tiles.block_d)
    want = math.ceil(tiles.programs_per_unit * compute_units / max(programs, 1))
    most = min(tiles.max_splits, math.ceil(max_cols / tiles.blocks_per_step))
    splits = 1
    while splits < want and splits * 2 <= most:
        splits *= 2
    return splits
