"""The scatter of the ``byte-scatter`` and ``triton-quant`` rungs: a Triton kernel that only
copies uint8 bytes into the pages.

Keeping the byte path free of any arithmetic other than address math is what made it reliable
on Ascend; it also replaces the host sync an index_put of the valid outputs needs. Its sources
are the framework's own tensors, read as bytes: the int8 NOPE values, the RoPE half of the bf16
tensor, and the low byte of each int32 scale exponent (little-endian); the pad byte is a 0.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..boundaries import counted_outputs, next_boundary_in_tile
from ..device import persistent_programs


@triton.jit
def _byte_scatter_kernel(
    nope_ptr,  # in, [rows, 448], int8 viewed as uint8
    y_bf16_ptr,  # in, [rows, 1024], the bf16 tensor's bytes: RoPE bytes at 896..1023
    scale_ptr,  # in, [rows, 28], the int32 exponent tensor's bytes: scale byte g at 4g
    slot_ptr,  # in, [rows], int64: destination slot, < 0 = skip
    kv_cache_ptr,  # out, [num_pages, 37376], uint8, rows kv_s0 apart
    num_outputs,
    kv_s0,
    count_ptr,  # in, [1], int32: outputs in the boundary list (read with COUNTED: a step's device list)
    positions_ptr, kv_slot_ptr, state_slot_ptr,  # in, [num_tokens]: a step by token tile's tokens
    num_tokens,
    tile_from,  # >= 0 (with COUNTED): a step by token tile: rows 0..num_outputs - 1, then its tiles' further rows
    NOPE_DIM: tl.constexpr, PAYLOAD_BYTES: tl.constexpr, SCALE_BYTES: tl.constexpr,
    SCALE_REGION: tl.constexpr, SLOTS_PER_PAGE: tl.constexpr, COUNTED: tl.constexpr, TOKEN_TILE: tl.constexpr,
    HAS_STATE_SLOTS: tl.constexpr,
):
    """Rows ``0..count - 1`` (``num_outputs`` without ``COUNTED``); by token tile, the rows
    ``quantize._quantize_bf16_kernel`` takes, found the same way (a tile's row read before its
    tokens, so that both reads are in flight at once)."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    head = tl.arange(0, 512)
    rope = tl.arange(0, PAYLOAD_BYTES - NOPE_DIM)
    sc = tl.arange(0, SCALE_BYTES)
    n = counted_outputs(count_ptr, num_outputs, COUNTED)
    if COUNTED:
        by_tile = tile_from >= 0
        n = tl.where(by_tile, 0, n)
        for t in range(pid, tl.where(by_tile, num_outputs, 0), num_programs):
            nope_bytes, rope_bytes, scale_bytes, slot = _row_loads(t, nope_ptr, y_bf16_ptr, scale_ptr, slot_ptr, head,
                                                                   rope, sc, NOPE_DIM, SCALE_BYTES)
            first = t * TOKEN_TILE
            lane, count = next_boundary_in_tile(positions_ptr, kv_slot_ptr, state_slot_ptr, first, num_tokens, -1,
                                                TOKEN_TILE, TOKEN_TILE, HAS_STATE_SLOTS)
            _row_stores(nope_bytes, rope_bytes, scale_bytes, slot, kv_cache_ptr, kv_s0, head, rope, sc, NOPE_DIM,
                        PAYLOAD_BYTES, SCALE_BYTES, SCALE_REGION, SLOTS_PER_PAGE)
            for _ in range(1, count):
                lane, _n = next_boundary_in_tile(positions_ptr, kv_slot_ptr, state_slot_ptr, first, num_tokens, lane,
                                                 TOKEN_TILE, TOKEN_TILE, HAS_STATE_SLOTS)
                _scatter_row(num_outputs + first + lane, nope_ptr, y_bf16_ptr, scale_ptr, slot_ptr, kv_cache_ptr,
                             kv_s0, head, rope, sc, NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, SCALE_REGION,
                             SLOTS_PER_PAGE)
    for i in range(pid, n, num_programs):
        _scatter_row(i, nope_ptr, y_bf16_ptr, scale_ptr, slot_ptr, kv_cache_ptr, kv_s0, head, rope, sc, NOPE_DIM,
                     PAYLOAD_BYTES, SCALE_BYTES, SCALE_REGION, SLOTS_PER_PAGE)


@triton.jit
def _scatter_row(i, nope_ptr, y_bf16_ptr, scale_ptr, slot_ptr, kv_cache_ptr, kv_s0, head, rope, sc,
                 NOPE_DIM: tl.constexpr, PAYLOAD_BYTES: tl.constexpr, SCALE_BYTES: tl.constexpr,
                 SCALE_REGION: tl.constexpr, SLOTS_PER_PAGE: tl.constexpr):
    """Row ``i``'s 584 bytes to its slot, where the slot is written (lanes ``head``, ``rope``, ``sc``)."""
    nope_bytes, rope_bytes, scale_bytes, slot = _row_loads(i, nope_ptr, y_bf16_ptr, scale_ptr, slot_ptr, head, rope,
                                                           sc, NOPE_DIM, SCALE_BYTES)
    _row_stores(nope_bytes, rope_bytes, scale_bytes, slot, kv_cache_ptr, kv_s0, head, rope, sc, NOPE_DIM,
                PAYLOAD_BYTES, SCALE_BYTES, SCALE_REGION, SLOTS_PER_PAGE)


@triton.jit
def _row_loads(i, nope_ptr, y_bf16_ptr, scale_ptr, slot_ptr, head, rope, sc, NOPE_DIM: tl.constexpr,
               SCALE_BYTES: tl.constexpr):
    """Row ``i``'s bytes and its slot, read together. The bytes are read before the slot is tested,
    so that the reads overlap; a skipped output's bytes are read and dropped."""
    row = tl.cast(i, tl.int64)
    nope_bytes = tl.load(nope_ptr + row * NOPE_DIM + head, mask=head < NOPE_DIM)
    rope_bytes = tl.load(y_bf16_ptr + row * 1024 + 2 * NOPE_DIM + rope)
    scale_bytes = tl.load(scale_ptr + row * (4 * (SCALE_BYTES - 1)) + 4 * sc, mask=sc < SCALE_BYTES - 1,
                          other=0)  # byte 7: the pad
    return nope_bytes, rope_bytes, scale_bytes, tl.load(slot_ptr + i)


@triton.jit
def _row_stores(nope_bytes, rope_bytes, scale_bytes, slot, kv_cache_ptr, kv_s0, head, rope, sc,
                NOPE_DIM: tl.constexpr, PAYLOAD_BYTES: tl.constexpr, SCALE_BYTES: tl.constexpr,
                SCALE_REGION: tl.constexpr, SLOTS_PER_PAGE: tl.constexpr):
    """A row's 584 bytes to ``slot``, where it is written (``slot >= 0``)."""
    if slot >= 0:
        page = slot // SLOTS_PER_PAGE
        in_page = slot - page * SLOTS_PER_PAGE
        dst = kv_cache_ptr + page * kv_s0 + in_page * PAYLOAD_BYTES
        tl.store(dst + head, nope_bytes, mask=head < NOPE_DIM)
        tl.store(dst + NOPE_DIM + rope, rope_bytes)
        tl.store(kv_cache_ptr + page * kv_s0 + SCALE_REGION + in_page * SCALE_BYTES + sc, scale_bytes)


def launch(out: torch.Tensor, slot: torch.Tensor, nope: torch.Tensor, y_bf16: torch.Tensor, scale: torch.Tensor,
           spec) -> None:
    """Copy each output's 584 bytes into ``out`` at ``slot`` (skipping slot < 0); no host sync.

    ``nope [N, 448] int8``, ``y_bf16 [N, 512] bfloat16`` and ``scale [N, 7] int32`` are contiguous
    (``finalize.finalize_rotated``); ``spec`` comes from ``stages.kernel_specializations``.
    """
    n = slot.shape[0]
    grid = (persistent_programs(out.device, n),)
    globals()[spec.kernel][grid](
        nope.view(torch.uint8), y_bf16.view(torch.uint8), scale.view(torch.uint8), slot, out, n, out.stride(0),
        slot, slot, slot, slot, 0, -1,  # count and a step's tokens: not read (COUNTED is False)
        **spec.constexprs,
    )
