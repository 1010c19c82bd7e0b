"""Ladder rung ``fused``: the whole operator in one Triton kernel, one launch per call.

Each program owns whole outputs (``BLOCK_D = 512``): the block-centric window loop of
``block_gather.pool_window`` (one block-table lookup per physical block, ``[ROW_TILE, 512]`` row
tiles, online softmax), then ``slot_bytes.store_format_slot_bytes`` (RMSNorm, bf16 rounding, INT8 with
power-of-two scales, RoPE) stores the 584 bytes straight into the cache. No intermediate tensor,
no allocation and no host sync per call. Outputs that are skipped or invalid (a bad index, a
block id outside ``state_cache``) write nothing.

It trades the conservative default rung's (``triton-quant``) real bf16 tensor boundary and pure-uint8
scatter for one launch: quantisation and the byte stores happen in the kernel, with bf16
rounding and scales done by integer bit operations.

It writes every cache format (``KV_FORMAT``, ``slot_bytes.KV_FORMAT_CODES``): the 584-byte
``int8`` and ``fp8_e4m3`` slots into pages of any number of slots (``slots_per_page``, a run-time
argument), and ``bf16`` rows (``block_gather.store_rotated_bf16``) into row ``slot`` of the
cache's ``[-1, 512]`` view, ``kv_s0`` values apart.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..device import persistent_programs
from ..boundaries import counted_outputs, next_boundary_in_tile
from ..slot_bytes import store_pooled_slot_bytes
from ..triton_helpers import resolve_token
from .block_gather import pool_resolved, store_rotated_bf16


@triton.jit
def store_output(
    c,  # [512] fp32: the pooled c of one output
    pos, weight_ptr, eps, cos_sin_ptr, cs_s0, cs_s1,
    kv_cache_ptr,  # out: uint8 pages [num_pages, slots_per_page * 584], or bfloat16 rows (KV_FORMAT 2)
    slot,  # int64 >= 0, checked by the caller
    kv_s0,  # elements between pages (uint8) or rows (bfloat16)
    slots_per_page,
    C: tl.constexpr, NOPE_DIM: tl.constexpr, PAYLOAD_BYTES: tl.constexpr, SCALE_BYTES: tl.constexpr,
    KV_FORMAT: tl.constexpr,
):
    """Write one output in the cache format ``KV_FORMAT`` (``slot_bytes.KV_FORMAT_CODES``)."""
    if KV_FORMAT == 2:  # bf16: 512 bit patterns stored through an int16 view of the row
        row = kv_cache_ptr.to(tl.pointer_type(tl.int16), bitcast=True) + slot.to(tl.int64) * kv_s0
        store_rotated_bf16(c, weight_ptr, eps, cos_sin_ptr + (pos // C) * C * cs_s0, cs_s1, True, row)
    else:
        store_pooled_slot_bytes(c, pos, weight_ptr, eps, cos_sin_ptr, cs_s0, cs_s1, kv_cache_ptr, slot, kv_s0,
                                slots_per_page, C, NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, KV_FORMAT)


@triton.jit
def _fused_compress_kernel(
    state_ptr,  # in, [num_blocks, block_size, 1024 or 2048 (OVERLAP)], float32/bfloat16
    boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr,  # in, index tensors
    block_table_ptr,  # in, [num_reqs, blocks_per_req], int32/int64
    weight_ptr,  # in, [512], bfloat16/float32, unit stride
    cos_sin_ptr,  # in, [max_pos, 64], float32
    kv_cache_ptr,  # out, uint8 [num_pages, slots_per_page * 584] (pages kv_s0 apart) or bfloat16 rows of 512
    num_outputs, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
    state_s0, state_s1, state_s2, bt_s0, bt_s1, cs_s0, cs_s1, kv_s0, slots_per_page,
    eps,
    count_ptr,  # in, [1], int32: outputs in the boundary list (read with COUNTED: a step's device list)
    state_slot_ptr,  # in, [num_tokens]: a step's state slots (read with HAS_STATE_SLOTS)
    tile_from,  # >= 0 (with COUNTED): a step by token tile, each tile's outputs from its tile_from-th on; else -1
    C: tl.constexpr, ROW_TILE: tl.constexpr, ROWS_PADDED: tl.constexpr, LOOKUP_AHEAD: tl.constexpr,
    VOLATILE_ROWS: tl.constexpr, NOPE_DIM: tl.constexpr, PAYLOAD_BYTES: tl.constexpr,
    SCALE_BYTES: tl.constexpr, KV_FORMAT: tl.constexpr, COUNTED: tl.constexpr, OVERLAP: tl.constexpr,
    HAS_STATE_SLOTS: tl.constexpr,
):
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    if COUNTED:
        # A step: the outputs of the boundary list (``tile_from`` -1), or by token tile ``num_outputs``
        # tiles of C tokens, each tile's boundary tokens one after another (each found after the last
        # one's lane), from its ``tile_from``-th on. One loop body for both, so the window loop is
        # compiled once (three copies of it took bishengir-compile minutes a kernel).
        by_tile = tile_from >= 0
        for t in range(pid, tl.where(by_tile, num_outputs, counted_outputs(count_ptr, num_outputs, True)),
                       num_programs):
            first = t * C
            lane = first * 0 - 1
            count = first * 0 + 1  # the list's one output
            if by_tile:
                _first, count = next_boundary_in_tile(positions_ptr, slot_mapping_ptr, state_slot_ptr, first,
                                                      num_tokens, -1, C, C, HAS_STATE_SLOTS)
            for k in range(count):
                if by_tile:
                    lane, _n = next_boundary_in_tile(positions_ptr, slot_mapping_ptr, state_slot_ptr, first,
                                                     num_tokens, lane, C, C, HAS_STATE_SLOTS)
                    token = (first + lane).to(tl.int64)
                else:
                    token = tl.load(boundary_ptr + t).to(tl.int64)
                if k >= tile_from:
                    _compress_token(
                        token, state_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr, block_table_ptr,
                        weight_ptr, cos_sin_ptr, kv_cache_ptr, num_tokens, num_reqs, blocks_per_req, num_blocks,
                        num_slots, max_pos, block_size, state_s0, state_s1, state_s2, bt_s0, bt_s1, cs_s0, cs_s1,
                        kv_s0, slots_per_page, eps, C, ROW_TILE, ROWS_PADDED, LOOKUP_AHEAD, VOLATILE_ROWS, NOPE_DIM,
                        PAYLOAD_BYTES, SCALE_BYTES, KV_FORMAT, OVERLAP)
    else:
        for i in range(pid, num_outputs, num_programs):
            _compress_token(
                tl.load(boundary_ptr + i).to(tl.int64), state_ptr, token_to_req_ptr, positions_ptr,
                slot_mapping_ptr, block_table_ptr, weight_ptr, cos_sin_ptr, kv_cache_ptr, num_tokens, num_reqs,
                blocks_per_req, num_blocks, num_slots, max_pos, block_size, state_s0, state_s1, state_s2, bt_s0,
                bt_s1, cs_s0, cs_s1, kv_s0, slots_per_page, eps, C, ROW_TILE, ROWS_PADDED, LOOKUP_AHEAD,
                VOLATILE_ROWS, NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, KV_FORMAT, OVERLAP)


@triton.jit
def _compress_token(
    token, state_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr, block_table_ptr, weight_ptr, cos_sin_ptr,
    kv_cache_ptr, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
    state_s0, state_s1, state_s2, bt_s0, bt_s1, cs_s0, cs_s1, kv_s0, slots_per_page, eps,
    C: tl.constexpr, ROW_TILE: tl.constexpr, ROWS_PADDED: tl.constexpr, LOOKUP_AHEAD: tl.constexpr,
    VOLATILE_ROWS: tl.constexpr, NOPE_DIM: tl.constexpr, PAYLOAD_BYTES: tl.constexpr,
    SCALE_BYTES: tl.constexpr, KV_FORMAT: tl.constexpr, OVERLAP: tl.constexpr,
):
    """The whole window of boundary token ``token`` (int64): resolved (``resolve_token``; nothing is
    read or written where it is out of range or skipped), pooled, and its slot written."""
    WINDOW: tl.constexpr = C + C * OVERLAP  # rows one output pools: 2C with the overlapping compressor
    ok, req, pos, slot = resolve_token(token, token_to_req_ptr, positions_ptr, slot_mapping_ptr, num_tokens, num_reqs,
                                       blocks_per_req, num_slots, max_pos, block_size, C)
    m, l, acc, n_bad = pool_resolved(ok, req, pos, 0, WINDOW - 1, state_ptr, block_table_ptr, num_blocks, block_size,
                                     state_s0, state_s1, state_s2, bt_s0, bt_s1, C, ROW_TILE, ROWS_PADDED,
                                     LOOKUP_AHEAD, VOLATILE_ROWS, OVERLAP)
    if n_bad == 0:
        store_output(acc / l, pos, weight_ptr, eps, cos_sin_ptr, cs_s0, cs_s1, kv_cache_ptr, slot, kv_s0,
                     slots_per_page, C, NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, KV_FORMAT)


def cache_row_stride(out, kv_format: str) -> int:
    """``kv_s0`` of the kernels that write ``out``: elements between its pages, or between the rows
    of its ``[-1, 512]`` view for a ``bf16`` cache."""
    return out.view(-1, 512).stride(0) if kv_format == "bf16" else out.stride(0)


def launch(args, out, spec) -> None:
    """Run ``spec`` (from ``stages.kernel_specializations``): write every valid output into ``out``."""
    n = args.num_outputs
    st, bt, cs = args.state_cache, args.block_table, args.cos_sin_cache
    grid = (persistent_programs(args.device, n),)
    globals()[spec.kernel][grid](
        st, args.boundary_token_indices, args.token_to_req, args.positions, args.kv_slot_mapping, bt,
        args.rms_norm_weight, cs, out,
        n, args.token_to_req.shape[0], bt.shape[0], bt.shape[1], st.shape[0], args.num_slots,
        cs.shape[0], args.block_size,
        st.stride(0), st.stride(1), st.stride(2), bt.stride(0), bt.stride(1), cs.stride(0), cs.stride(1),
        cache_row_stride(out, args.kv_format), args.slots_per_page, args.rms_norm_eps,
        args.boundary_token_indices, args.boundary_token_indices, -1,  # count, state slots: not read (COUNTED is False)
        **spec.constexprs,
    )
