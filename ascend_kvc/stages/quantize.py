"""The default rung's quantisation: one Triton kernel that reads the real bf16 tensor from memory.

The gather (or the merge of a split window) leaves ``bf16(y)`` as a real bf16 tensor in memory,
the boundary that kept Ascend's INT8 bytes right in the competition write-ups. This kernel reads
it back as 16-bit integers, widens each value to fp32 exactly by a shift, and makes the INT8
values and the power-of-two scale exponents by integer bit operations
(``triton_helpers.int8_groups``, the same code as the ``fused`` rung's): no ``log2``/``exp2``,
no ``.to(tl.bfloat16)``, no framework op. The pure-uint8 scatter then copies the bytes.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..boundaries import counted_outputs, next_boundary_in_tile
from ..triton_helpers import int8_groups


@triton.jit
def _quantize_bf16_kernel(
    y_bf16_ptr,  # in, [rows, 512], int16: the bf16 tensor's bits
    slot_ptr,  # in, [rows], int64: destination slot, < 0 = skip (its row, read, is not used)
    nope_ptr,  # out, [rows, 448], int8
    scale_ptr,  # out, [rows, 7], int32: e + 127, whose low byte is the scale byte
    num_outputs,
    count_ptr,  # in, [1], int32: outputs in the boundary list (read with COUNTED: a step's device list)
    positions_ptr, kv_slot_ptr, state_slot_ptr,  # in, [num_tokens]: a step by token tile's tokens
    num_tokens,
    tile_from,  # >= 0 (with COUNTED): a step by token tile: rows 0..num_outputs - 1, then its tiles' further rows
    NOPE_DIM: tl.constexpr, COUNTED: tl.constexpr, TOKEN_TILE: tl.constexpr, HAS_STATE_SLOTS: tl.constexpr,
):
    """Rows ``0..count - 1`` (``num_outputs`` without ``COUNTED``). By token tile (``TOKEN_TILE`` =
    C tokens a tile): tile ``t``'s row ``t`` (``t < num_outputs``), then, for each further boundary
    token ``b`` of the tile (found as the gather found it), row ``num_outputs + b``. A tile's row is
    read before its tokens are, so that both reads are in flight at once."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    g = tl.arange(0, 8)
    d2 = g[:, None] * 64 + tl.arange(0, 64)[None, :]  # [8, 64]; row 7 (the RoPE dims) masked off
    n = counted_outputs(count_ptr, num_outputs, COUNTED)
    if COUNTED:
        by_tile = tile_from >= 0
        n = tl.where(by_tile, 0, n)
        for t in range(pid, tl.where(by_tile, num_outputs, 0), num_programs):
            bits, slot = _row_loads(t, y_bf16_ptr, slot_ptr, g, d2, NOPE_DIM)
            first = t * TOKEN_TILE
            lane, count = next_boundary_in_tile(positions_ptr, kv_slot_ptr, state_slot_ptr, first, num_tokens, -1,
                                                TOKEN_TILE, TOKEN_TILE, HAS_STATE_SLOTS)
            _row_stores(t, bits, slot, nope_ptr, scale_ptr, g, d2, NOPE_DIM)
            for _ in range(1, count):
                lane, _n = next_boundary_in_tile(positions_ptr, kv_slot_ptr, state_slot_ptr, first, num_tokens, lane,
                                                 TOKEN_TILE, TOKEN_TILE, HAS_STATE_SLOTS)
                _quantize_row(num_outputs + first + lane, y_bf16_ptr, slot_ptr, nope_ptr, scale_ptr, g, d2, NOPE_DIM)
    for i in range(pid, n, num_programs):
        _quantize_row(i, y_bf16_ptr, slot_ptr, nope_ptr, scale_ptr, g, d2, NOPE_DIM)


@triton.jit
def _quantize_row(i, y_bf16_ptr, slot_ptr, nope_ptr, scale_ptr, g, d2, NOPE_DIM: tl.constexpr):
    """Row ``i``'s 448 INT8 values and 7 scale exponents, where its slot is written."""
    bits, slot = _row_loads(i, y_bf16_ptr, slot_ptr, g, d2, NOPE_DIM)
    _row_stores(i, bits, slot, nope_ptr, scale_ptr, g, d2, NOPE_DIM)


@triton.jit
def _row_loads(i, y_bf16_ptr, slot_ptr, g, d2, NOPE_DIM: tl.constexpr):
    """Row ``i``'s 448 bf16 values widened to fp32 bits (groups ``g``, dims ``d2``) and its slot,
    read together: the row is read before the slot is tested, and only a written slot's row is used."""
    NOPE_GROUPS: tl.constexpr = NOPE_DIM // 64
    row = tl.cast(i, tl.int64)
    bits = tl.load(y_bf16_ptr + row * 512 + d2, mask=g[:, None] < NOPE_GROUPS, other=0).to(tl.int32) << 16
    return bits, tl.load(slot_ptr + i)


@triton.jit
def _row_stores(i, bits, slot, nope_ptr, scale_ptr, g, d2, NOPE_DIM: tl.constexpr):
    """Row ``i``'s 448 INT8 values and 7 scale exponents (groups ``g``), where its slot is written."""
    NOPE_GROUPS: tl.constexpr = NOPE_DIM // 64
    if slot >= 0:
        row = tl.cast(i, tl.int64)
        q, e = int8_groups(bits.to(tl.float32, bitcast=True))
        tl.store(nope_ptr + row * NOPE_DIM + d2, q.to(tl.int8), mask=g[:, None] < NOPE_GROUPS)
        tl.store(scale_ptr + row * NOPE_GROUPS + g, e + 127, mask=g < NOPE_GROUPS)
