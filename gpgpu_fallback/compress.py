"""The whole operator in one kernel: gather a window piece, then the last program of an output
merges the pieces and writes the slot.

Program ``(output, window piece, head-dim tile)`` leaves its piece's softmax state in scratch and
counts itself in the output's arrival counter (an ``acq_rel`` atomic, after a barrier so that
every thread's stores precede it). The program that arrives last owns the output: it resets the
counter to zero for the next launch, merges the ``SPLITS x 512 / BLOCK_D`` states and stores the
584 bytes (or, with ``KV_FORMAT`` bf16, the row of 512 bf16 values). One launch, no host sync, no
allocation that depends on values. With ``OVERLAP`` a window is the ``2C`` rows up to the boundary
(``split_gather.gather_piece``), its first column the one of ``max(p - 2C + 1, 0)``.

Where one program owns a whole output (one piece, ``BLOCK_D`` 512: the ratio-4 tiles), it stores
the slot from its registers (``stages.fused.store_output``, as the ``fused`` rung does): no state
in scratch, no atomic, no read-back.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascend_kvc.boundaries import (boundaries_in_registers, counted_outputs, next_boundary_in_tile, nth_boundary,
                                   token_gives_output)
from ascend_kvc.stages.fused import store_output
from ascend_kvc.triton_helpers import resolve_output, resolve_token

from .finalize import merge_and_store
from .split_gather import gather_piece


@triton.jit
def _window_compress_kernel(
    state_ptr,  # in, [num_blocks, block_size, 1024] (OVERLAP: 2048), float32/bfloat16
    boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr,  # in, index tensors
    block_table_ptr,  # in, [num_reqs, blocks_per_req], int32/int64
    weight_ptr,  # in, [512], bfloat16/float32
    cos_sin_ptr,  # in, [max_pos, 64], float32
    kv_cache_ptr,  # out, uint8 [num_pages, SLOTS_PER_PAGE * 584] (pages kv_s0 apart),
    #              or bfloat16 rows of 512 (KV_FORMAT 2)
    part_ptr,  # scratch, [num_outputs, 3, SPLITS, 512] float32 states, then [num_outputs, SPLITS] bad-block counts
    arrivals_ptr,  # scratch, [>= num_outputs], int32: zero before and after the launch
    num_outputs, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
    cols_per_split,
    state_s0, state_s1, state_s2, bt_s0, bt_s1, cs_s0, cs_s1, kv_s0, eps,
    count_ptr,  # in, [1], int32: outputs in the boundary list (read with COUNTED and no INLINE_T)
    state_slot_ptr,  # in, [num_tokens], int64/int32: a step's state slots (read with INLINE_T, HAS_STATE_SLOTS)
    C: tl.constexpr, BLOCK_D: tl.constexpr, ROWS: tl.constexpr, NB: tl.constexpr, CHUNKED: tl.constexpr,
    SPLITS: tl.constexpr, SPLITS_P2: tl.constexpr, EVICT: tl.constexpr,
    NOPE_DIM: tl.constexpr, PAYLOAD_BYTES: tl.constexpr, SCALE_BYTES: tl.constexpr,
    SLOTS_PER_PAGE: tl.constexpr, KV_FORMAT: tl.constexpr, OVERLAP: tl.constexpr, COUNTED: tl.constexpr,
    INLINE_T: tl.constexpr, TOKEN_TILE: tl.constexpr, HAS_STATE_SLOTS: tl.constexpr,
):
    """One work item ``(output, window piece, head-dim tile)`` a program; with ``COUNTED`` (a step,
    whose output count is on the device) a grid-stride loop over the ``count * SPLITS * D_TILES``
    items of the counted outputs, on a grid planned from the step's token count. The count and the
    list (``boundary_ptr``) come from the search kernels, or with ``INLINE_T`` (a step of at most
    that many tokens) from each program's own search, kept in registers
    (``boundaries.boundaries_in_registers``; no list).

    With ``TOKEN_TILE`` (a step of few requests) the grid is ``(tile of TOKEN_TILE tokens, window
    piece, head-dim tile)`` instead: each program finds its tile's boundary tokens and does their
    work items one after another; ``num_outputs`` is then the scratch's slots, one a tile and one
    a token (``route.CompressPlan``). ``TOKEN_TILE`` 1 (a small step) is a tile of one token: the
    program tests its token and does its one work item if the token gives an output, with a slot
    of scratch a token."""
    D_TILES: tl.constexpr = 512 // BLOCK_D
    pid = tl.program_id(0)
    if COUNTED:
        if TOKEN_TILE > 0:
            tile, sub = pid // (SPLITS * D_TILES), pid % (SPLITS * D_TILES)
            if TOKEN_TILE == 1:
                # One program per token and work item (a small step, as vLLM's kernel runs): the
                # token is the program's own, tested with no search.
                first, lane = tile, 0
                has_output = token_gives_output(positions_ptr, slot_mapping_ptr, state_slot_ptr, tile, num_tokens, C,
                                                HAS_STATE_SLOTS)
            else:
                first = tile * TOKEN_TILE
                lane, count = next_boundary_in_tile(positions_ptr, slot_mapping_ptr, state_slot_ptr, first, num_tokens,
                                                    -1, TOKEN_TILE, C, HAS_STATE_SLOTS)
                has_output = count > 0
            # The tile's first output outside any loop, as the indexed call's program runs its one
            # (a gather nested in a loop over outputs ran far slower on an H100; bench/RESULTS.md),
            # its scratch at the tile's own slot (as dense as the indexed call's).
            if has_output:
                _compress_work_item(
                    tile * (SPLITS * D_TILES) + sub, (first + lane).to(tl.int64),
                    state_ptr, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr, block_table_ptr,
                    weight_ptr, cos_sin_ptr, kv_cache_ptr, part_ptr, arrivals_ptr,
                    num_outputs, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
                    cols_per_split, state_s0, state_s1, state_s2, bt_s0, bt_s1, cs_s0, cs_s1, kv_s0, eps,
                    C, BLOCK_D, ROWS, NB, CHUNKED, SPLITS, SPLITS_P2, EVICT,
                    NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, SLOTS_PER_PAGE, KV_FORMAT, OVERLAP, True)
            # A tile that ends several requests' windows: its further outputs one after another, each
            # after the last one's lane, their scratch at num_tiles + their token.
            if TOKEN_TILE > 1:
                for _ in range(1, count):
                    lane, _n = next_boundary_in_tile(positions_ptr, slot_mapping_ptr, state_slot_ptr, first, num_tokens,
                                                     lane, TOKEN_TILE, C, HAS_STATE_SLOTS)
                    token = (first + lane).to(tl.int64)
                    _compress_work_item(
                        (tl.cdiv(num_tokens, TOKEN_TILE) + token) * (SPLITS * D_TILES) + sub, token,
                        state_ptr, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr, block_table_ptr,
                        weight_ptr, cos_sin_ptr, kv_cache_ptr, part_ptr, arrivals_ptr,
                        num_outputs, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
                        cols_per_split, state_s0, state_s1, state_s2, bt_s0, bt_s1, cs_s0, cs_s1, kv_s0, eps,
                        C, BLOCK_D, ROWS, NB, CHUNKED, SPLITS, SPLITS_P2, EVICT,
                        NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, SLOTS_PER_PAGE, KV_FORMAT, OVERLAP, True)
        elif INLINE_T > 0:
            # A small step searched in the program, in registers: each work item's output is the
            # boundary token of its place, with no list written and read back.
            offs, ranks, n = boundaries_in_registers(positions_ptr, slot_mapping_ptr, state_slot_ptr, num_tokens,
                                                     INLINE_T, C, HAS_STATE_SLOTS)
            items = tl.minimum(n, num_outputs) * (SPLITS * D_TILES)
            for work in range(pid, items, tl.num_programs(0)):
                _compress_work_item(
                    work, nth_boundary(offs, ranks, work // (SPLITS * D_TILES)),
                    state_ptr, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr, block_table_ptr,
                    weight_ptr, cos_sin_ptr, kv_cache_ptr, part_ptr, arrivals_ptr,
                    num_outputs, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
                    cols_per_split, state_s0, state_s1, state_s2, bt_s0, bt_s1, cs_s0, cs_s1, kv_s0, eps,
                    C, BLOCK_D, ROWS, NB, CHUNKED, SPLITS, SPLITS_P2, EVICT,
                    NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, SLOTS_PER_PAGE, KV_FORMAT, OVERLAP, True)
        else:
            items = counted_outputs(count_ptr, num_outputs, True) * (SPLITS * D_TILES)
            for work in range(pid, items, tl.num_programs(0)):
                _compress_work_item(
                    work, 0,
                    state_ptr, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr, block_table_ptr,
                    weight_ptr, cos_sin_ptr, kv_cache_ptr, part_ptr, arrivals_ptr,
                    num_outputs, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
                    cols_per_split, state_s0, state_s1, state_s2, bt_s0, bt_s1, cs_s0, cs_s1, kv_s0, eps,
                    C, BLOCK_D, ROWS, NB, CHUNKED, SPLITS, SPLITS_P2, EVICT,
                    NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, SLOTS_PER_PAGE, KV_FORMAT, OVERLAP, False)
    else:
        _compress_work_item(
            pid, 0, state_ptr, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr, block_table_ptr,
            weight_ptr, cos_sin_ptr, kv_cache_ptr, part_ptr, arrivals_ptr,
            num_outputs, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
            cols_per_split, state_s0, state_s1, state_s2, bt_s0, bt_s1, cs_s0, cs_s1, kv_s0, eps,
            C, BLOCK_D, ROWS, NB, CHUNKED, SPLITS, SPLITS_P2, EVICT,
            NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, SLOTS_PER_PAGE, KV_FORMAT, OVERLAP, False)


@triton.jit
def _compress_work_item(
    work, token, state_ptr, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr, block_table_ptr,
    weight_ptr, cos_sin_ptr, kv_cache_ptr, part_ptr, arrivals_ptr,
    num_outputs, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
    cols_per_split, state_s0, state_s1, state_s2, bt_s0, bt_s1, cs_s0, cs_s1, kv_s0, eps,
    C: tl.constexpr, BLOCK_D: tl.constexpr, ROWS: tl.constexpr, NB: tl.constexpr, CHUNKED: tl.constexpr,
    SPLITS: tl.constexpr, SPLITS_P2: tl.constexpr, EVICT: tl.constexpr,
    NOPE_DIM: tl.constexpr, PAYLOAD_BYTES: tl.constexpr, SCALE_BYTES: tl.constexpr,
    SLOTS_PER_PAGE: tl.constexpr, KV_FORMAT: tl.constexpr, OVERLAP: tl.constexpr, BY_TOKEN: tl.constexpr,
):
    """Work item ``work`` = ``(output, window piece, head-dim tile)``: gather the piece, leave its
    state, count the arrival; the last of the output's items merges and stores the slot. With
    ``BY_TOKEN`` the output is boundary token ``token`` (not a place in a list), and ``work``'s
    output is only its scratch slot."""
    D_TILES: tl.constexpr = 512 // BLOCK_D
    d_tile = work % D_TILES
    piece = (work // D_TILES) % SPLITS
    i = work // (D_TILES * SPLITS)
    dims = d_tile * BLOCK_D + tl.arange(0, BLOCK_D)

    if BY_TOKEN:
        ok, req, pos, slot = resolve_token(token, token_to_req_ptr, positions_ptr, slot_mapping_ptr,
                                           num_tokens, num_reqs, blocks_per_req, num_slots, max_pos, block_size, C)
    else:
        ok, req, pos, slot = resolve_output(
            i, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr,
            num_tokens, num_reqs, blocks_per_req, num_slots, max_pos, block_size, C)
    if OVERLAP:  # 2C rows, those at negative positions masked (not read)
        col_start = tl.maximum(pos - 2 * C + 1, 0) // block_size + piece * cols_per_split
    else:
        col_start = (pos - C + 1) // block_size + piece * cols_per_split
    col_end = tl.minimum(col_start + cols_per_split, pos // block_size + 1)
    m, l, acc, n_bad = gather_piece(
        state_ptr, block_table_ptr + req * bt_s0, ok, pos, col_start, col_end, dims,
        num_blocks, block_size, state_s0, state_s1, state_s2, bt_s1,
        C, BLOCK_D, ROWS, NB, CHUNKED, EVICT, OVERLAP)

    if SPLITS * D_TILES == 1:  # the program owns the whole output: no piece state to leave or merge
        if ok & (n_bad == 0):
            store_output(acc / l, pos, weight_ptr, eps, cos_sin_ptr, cs_s0, cs_s1, kv_cache_ptr, slot, kv_s0,
                         SLOTS_PER_PAGE, C, NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, KV_FORMAT)
    else:
        base = tl.cast(i, tl.int64) * (3 * SPLITS * 512) + piece * 512 + dims
        tl.store(part_ptr + base, m)
        tl.store(part_ptr + base + SPLITS * 512, l)
        tl.store(part_ptr + base + 2 * SPLITS * 512, acc)
        bad_ptr = part_ptr + tl.cast(num_outputs, tl.int64) * (3 * SPLITS * 512) + tl.cast(i, tl.int64) * SPLITS
        if d_tile == 0:
            tl.store(bad_ptr + piece, n_bad.to(tl.float32))
        tl.debug_barrier()  # every thread's stores come before the release below
        arrived = tl.atomic_add(arrivals_ptr + i, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLITS * D_TILES - 1:
            tl.store(arrivals_ptr + i, 0)  # every program of this output has counted: ready for the next launch
            sp = tl.arange(0, SPLITS_P2)
            bad = tl.sum(tl.load(bad_ptr + sp, mask=sp < SPLITS, other=0.0, cache_modifier=".cg"), axis=0)
            if ok & (bad == 0):
                merge_and_store(part_ptr, i, pos, slot, weight_ptr, eps, cos_sin_ptr, cs_s0, cs_s1, kv_cache_ptr,
                                kv_s0, C, SPLITS, NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, SLOTS_PER_PAGE, KV_FORMAT)
