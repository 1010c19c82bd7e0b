"""Ladder rungs 3-8: block-centric gather, one block-table lookup per physical block.

Each step looks up one physical block and reads its window rows as ``[ROW_TILE, BLOCK_D]`` tiles
(on Ascend: one DMA per tile, whatever the table's order). ``ROW_TILE`` comes from a per-BLOCK_D
byte budget (``stages.row_tile``), not from the block size, so a block of any size fits the
unified buffer. ``UNMASKED_MIDDLE`` loads the blocks strictly inside the window without masks;
only the window's first and last blocks are masked. With ``BLOCK_D = 512`` one program owns the whole
head and applies the RMSNorm itself (``FUSE_RMSNORM``) and, for ``byte-scatter``, the fp32 RoPE
rotation (``FUSE_ROPE``), leaving bf16 rounding and quantisation to the framework.
``pool_window`` is the window loop, shared with the ``fused`` rung.

Stages: ``block-gather`` (BLOCK_D 64, all masked), ``block-gather-nomask`` (64),
``block-d128``, ``block-d256``, ``block-d512``, ``byte-scatter`` (512 with ``FUSE_ROPE``), and
``triton-quant`` with its own kernel, ``_gather_to_bf16_kernel`` (the same window loop, then the
rounded bf16 bits of the normalised, rotated row: a real bf16 tensor's bytes instead of fp32).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..boundaries import counted_outputs, next_boundary_in_tile
from ..slot_bytes import inverse_rms, rope_row, rotated_pair_bits
from ..triton_helpers import bf16_rne_bits, launch_index_kernel, online_softmax_update, resolve_output, resolve_token


@triton.jit
def _load_rows(block_ptr, rows, row_mask, dims, state_s1, state_s2, MASKED: tl.constexpr,
               VOLATILE_ROWS: tl.constexpr, SCORE_COL: tl.constexpr):
    """``(values, scores)`` of ``rows`` of one physical block: two ``[ROW_TILE, BLOCK_D]`` fp32 tiles,
    the values at columns ``dims`` and the scores ``SCORE_COL`` columns further (512 in the plain
    state row; 1024 in the overlap state row, where ``block_ptr`` starts at kv_a or kv_b).

    ``VOLATILE_ROWS`` (set by the launch plans on CUDA only, see ``stages.VOLATILE_ROWS_ON_CUDA``) makes
    them volatile loads: ptxas then issues all of a tile's loads before the first instruction
    that waits on any of them, where it otherwise sank some value loads below the score math
    in some kernels (two memory waits a tile instead of one). Each row is read once, so the L1
    they skip holds nothing for them."""
    base = block_ptr + rows[:, None].to(tl.int64) * state_s1  # [ROW_TILE, 1]
    if MASKED:
        values = tl.load(base + dims[None, :] * state_s2, mask=row_mask[:, None], other=0.0,
                         volatile=VOLATILE_ROWS).to(tl.float32)
        scores = tl.load(base + (SCORE_COL + dims)[None, :] * state_s2, mask=row_mask[:, None], other=float("-inf"),
                         volatile=VOLATILE_ROWS)
    else:
        values = tl.load(base + dims[None, :] * state_s2, volatile=VOLATILE_ROWS).to(tl.float32)
        scores = tl.load(base + (SCORE_COL + dims)[None, :] * state_s2, volatile=VOLATILE_ROWS)
    return values, scores.to(tl.float32)


@triton.jit
def _lookup_block(table_row, col, bt_s1, num_blocks):
    """One block-table entry: ``(block id, or 0 if out of range; 1 if it was out of range else 0)``."""
    blk = tl.load(table_row + col * bt_s1).to(tl.int64)
    blk_ok = (blk >= 0) & (blk < num_blocks)
    return tl.where(blk_ok, blk, 0), tl.where(blk_ok, 0, 1)


@triton.jit
def _pool_rows(block_ptr, lo, hi, dims, state_s1, state_s2, m, l, acc, ROW_TILE: tl.constexpr,
               VOLATILE_ROWS: tl.constexpr, SCORE_COL: tl.constexpr):
    """Fold rows ``lo..hi`` of one physical block into the online softmax, in masked row tiles."""
    rows = tl.arange(0, ROW_TILE)
    for start in range(lo, hi + 1, ROW_TILE):
        r = start + rows  # [ROW_TILE]
        values, scores = _load_rows(block_ptr, r, r <= hi, dims, state_s1, state_s2, True, VOLATILE_ROWS, SCORE_COL)
        m, l, acc = online_softmax_update(m, l, acc, values, scores)
    return m, l, acc


@triton.jit
def pool_window(
    state_ptr,  # in, [num_blocks, block_size, 1024], float32/bfloat16
    table_row,  # in, the block-table row of the output's request, entries bt_s1 apart
    bt_s1, num_blocks, t0, t1, block_size, dims, state_s0, state_s1, state_s2,
    m, l, acc, n_bad,
    ROW_TILE: tl.constexpr, UNMASKED_MIDDLE: tl.constexpr, ROWS_PADDED: tl.constexpr,
    LOOKUP_AHEAD: tl.constexpr, VOLATILE_ROWS: tl.constexpr, SCORE_COL: tl.constexpr,
):
    """Online softmax over the request's rows ``t0..t1`` (the window ``[pos - C + 1, pos]``, or a
    piece of it) at ``dims``, block by block.

    One block-table lookup per physical block; the block's rows that lie in the window are read
    as ``[ROW_TILE, BLOCK_D]`` tiles. With ``UNMASKED_MIDDLE`` the blocks strictly inside the
    window are read without masks (unless ``ROWS_PADDED``: ``ROW_TILE`` does not divide
    ``block_size``, so each block ends in a partial tile); only the window's first and last
    blocks are masked. One masked tile loop and one unmasked one per level: bishengir-compile
    could not fit two tile loops side by side inside the block loop into the unified buffer.
    ``LOOKUP_AHEAD`` (with ``UNMASKED_MIDDLE``) reads each middle block's table entry one block
    ahead, so that its latency hides behind the rows of the block before instead of preceding its
    own; the last block's entry is then read twice (once ahead, once after the loop), which
    measured faster on an H200 than carrying it out of the loop.
    Returns the updated ``(m, l, acc, n_bad)``; ``n_bad`` counts block ids outside
    ``state_cache``, which are read as block 0.
    """
    first_col = t0 // block_size
    last_col = t1 // block_size
    lo = (t0 - first_col * block_size).to(tl.int32)
    hi = (t1 - last_col * block_size).to(tl.int32)
    if UNMASKED_MIDDLE:
        rows = tl.arange(0, ROW_TILE)
        blk, bad = _lookup_block(table_row, first_col, bt_s1, num_blocks)
        if LOOKUP_AHEAD:  # the second block's entry (the first's again when the window lies in one block)
            nxt, nxt_bad = _lookup_block(table_row, tl.minimum(first_col + 1, last_col), bt_s1, num_blocks)
        n_bad += bad
        first_hi = tl.where(first_col == last_col, hi, block_size - 1)
        m, l, acc = _pool_rows(state_ptr + blk * state_s0, lo, first_hi, dims, state_s1, state_s2, m, l, acc,
                               ROW_TILE, VOLATILE_ROWS, SCORE_COL)
        for col in range(first_col + 1, last_col):
            if LOOKUP_AHEAD:
                blk, bad = nxt, nxt_bad
                nxt, nxt_bad = _lookup_block(table_row, col + 1, bt_s1, num_blocks)  # col + 1 <= last_col
            else:
                blk, bad = _lookup_block(table_row, col, bt_s1, num_blocks)  # one lookup per block
            n_bad += bad
            block_ptr = state_ptr + blk * state_s0
            for start in range(0, block_size, ROW_TILE):
                r = start + rows  # [ROW_TILE]
                values, scores = _load_rows(block_ptr, r, r < block_size, dims, state_s1, state_s2, ROWS_PADDED,
                                            VOLATILE_ROWS, SCORE_COL)
                m, l, acc = online_softmax_update(m, l, acc, values, scores)
        if last_col > first_col:
            blk, bad = _lookup_block(table_row, last_col, bt_s1, num_blocks)
            n_bad += bad
            m, l, acc = _pool_rows(state_ptr + blk * state_s0, 0, hi, dims, state_s1, state_s2, m, l, acc,
                                   ROW_TILE, VOLATILE_ROWS, SCORE_COL)
    else:
        for col in range(first_col, last_col + 1):
            blk, bad = _lookup_block(table_row, col, bt_s1, num_blocks)  # one lookup per block
            n_bad += bad
            # Rows of this block that lie in the window.
            col_lo = tl.where(col == first_col, lo, 0)
            col_hi = tl.where(col == last_col, hi, block_size - 1)
            m, l, acc = _pool_rows(state_ptr + blk * state_s0, col_lo, col_hi, dims, state_s1, state_s2,
                                   m, l, acc, ROW_TILE, VOLATILE_ROWS, SCORE_COL)
    return m, l, acc, n_bad


@triton.jit
def pool_resolved(
    ok, req, pos, first, last,
    state_ptr,  # in, [num_blocks, block_size, 1024 or 2048 (OVERLAP)], float32/bfloat16
    block_table_ptr,  # in, [num_reqs, blocks_per_req], int32/int64
    num_blocks, block_size, state_s0, state_s1, state_s2, bt_s0, bt_s1,
    C: tl.constexpr, ROW_TILE: tl.constexpr, ROWS_PADDED: tl.constexpr, LOOKUP_AHEAD: tl.constexpr,
    VOLATILE_ROWS: tl.constexpr, OVERLAP: tl.constexpr,
):
    """Rows ``first..last`` of the window of a resolved output (``resolve_output``'s ``ok, req,
    pos``; 0 is the window's first row) pooled over all 512 dims with unmasked middle blocks:
    ``(m, l, acc, n_bad)``. Nothing is read for an invalid output (``n_bad`` 1).

    With ``OVERLAP`` the window is the ``2C`` rows ``pos - 2C + 1 .. pos``: its older ``C`` rows
    pool ``kv_a``/``score_a`` (state columns 0 and 1024 on), its newer ``C`` rows
    ``kv_b``/``score_b`` (512 and 1536 on), into the same per-dimension softmax; rows at negative
    positions are masked (not read). The two halves are two written-out passes of the window
    loop: bishengir-compile overflowed the unified buffer when they were one unrolled loop."""
    m = tl.full([512], float("-inf"), tl.float32)
    l = tl.zeros([512], tl.float32)
    acc = tl.zeros([512], tl.float32)
    n_bad = tl.where(ok, 0, 1)
    if ok:
        table_row = block_table_ptr + req * bt_s0
        dims = tl.arange(0, 512)
        if OVERLAP:
            t0 = pos - 2 * C + 1
            # the older half, rows first..min(last, C - 1), from position 0 on: kv_a, score_a
            older_first = tl.maximum(t0 + first, 0)
            older_last = t0 + tl.minimum(last, C - 1)
            if older_first <= older_last:
                m, l, acc, n_bad = pool_window(state_ptr, table_row, bt_s1, num_blocks, older_first, older_last,
                                               block_size, dims, state_s0, state_s1, state_s2, m, l, acc, n_bad,
                                               ROW_TILE, True, ROWS_PADDED, LOOKUP_AHEAD, VOLATILE_ROWS, 1024)
            # the newer half, rows max(first, C)..last (never at a negative position): kv_b, score_b
            newer_first = t0 + tl.maximum(first, C)
            if newer_first <= t0 + last:
                m, l, acc, n_bad = pool_window(state_ptr + 512 * state_s2, table_row, bt_s1, num_blocks, newer_first,
                                               t0 + last, block_size, dims, state_s0, state_s1, state_s2,
                                               m, l, acc, n_bad, ROW_TILE, True, ROWS_PADDED, LOOKUP_AHEAD,
                                               VOLATILE_ROWS, 1024)
        else:
            t0 = pos - C + 1
            m, l, acc, n_bad = pool_window(state_ptr, table_row, bt_s1, num_blocks, t0 + first, t0 + last,
                                           block_size, dims, state_s0, state_s1, state_s2, m, l, acc, n_bad,
                                           ROW_TILE, True, ROWS_PADDED, LOOKUP_AHEAD, VOLATILE_ROWS, 512)
    return m, l, acc, n_bad


@triton.jit
def _rotate_rope_dims(y, cos_sin_row_ptr, cs_s1, ok):
    """``y [512]`` with the GPT-J pairs of dims 448..511 rotated (fp32); every other dim unchanged.

    Pairs are split out of ``y`` and interleaved back in registers; the cos/sin row is read as
    contiguous (masked) vectors, and not at all when ``ok`` is false.
    """
    even, odd = tl.split(tl.reshape(y, [256, 2]))  # y[2j], y[2j + 1]
    j = tl.arange(0, 256)
    rope = j >= 224  # pair k = j - 224 of the 32 RoPE pairs
    cos = tl.load(cos_sin_row_ptr + (j - 224) * cs_s1, mask=rope & ok, other=1.0)
    sin = tl.load(cos_sin_row_ptr + (j - 192) * cs_s1, mask=rope & ok, other=0.0)
    even_rot = tl.where(rope, even * cos - odd * sin, even)
    odd_rot = tl.where(rope, odd * cos + even * sin, odd)
    return tl.interleave(even_rot, odd_rot)


@triton.jit
def normalise_rotate(c, dims, weight_ptr, eps, cos_sin_row_ptr, cs_s1, ok):
    """``[512]`` pooled ``c`` -> RMSNorm(c) * weight with the RoPE dims rotated, all fp32."""
    rrms = 1.0 / tl.sqrt(tl.sum(c * c, axis=0) / 512 + eps)
    y = c * rrms * tl.load(weight_ptr + dims).to(tl.float32)
    return _rotate_rope_dims(y, cos_sin_row_ptr, cs_s1, ok)


@triton.jit
def store_rotated_bf16(c, weight_ptr, eps, cos_sin_row_ptr, cs_s1, ok, row_ptr):
    """``[512]`` pooled ``c`` -> RMSNorm(c) * weight with the RoPE dims rotated (fp32), rounded to
    bf16 (nearest even, by bit operations) and stored at ``row_ptr`` as one row of a real bf16
    tensor: 512 int16 bit patterns.

    Shaped as ``slot_bytes.store_format_slot_bytes`` is, for the same reasons: ``c`` seen as ``[8, 64]``
    (rows 0..6 the NOPE dims, row 7 the RoPE dims), the RoPE row and its GPT-J pairs picked by
    one-hot maxima, and the rotated pairs leaving as one ``[32, 2]`` tile built by broadcasting,
    so that nothing is split or interleaved across the whole head. The cos/sin row is not read
    when ``ok`` is false.
    """
    c8 = tl.reshape(c, [8, 64])
    g = tl.arange(0, 8)
    d2 = g[:, None] * 64 + tl.arange(0, 64)[None, :]  # [8, 64]
    y8 = c8 * inverse_rms(c8, eps) * tl.load(weight_ptr + d2).to(tl.float32)
    tl.store(row_ptr + d2, (bf16_rne_bits(y8) >> 16).to(tl.int16), mask=g[:, None] < 7)
    u_bits, w_bits = rotated_pair_bits(rope_row(y8), cos_sin_row_ptr, cs_s1, ok, True)
    k = tl.arange(0, 32)
    b = tl.arange(0, 2)[None, :]
    pair = tl.where(b == 0, (u_bits >> 16)[:, None], (w_bits >> 16)[:, None])  # [32, 2]: dims 448 + 2k + b
    tl.store(row_ptr + 448 + 2 * k[:, None] + b, pair.to(tl.int16))


@triton.jit
def _block_gather_softmax_kernel(
    state_ptr,  # in, [num_blocks, block_size, 1024], float32/bfloat16
    boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr,  # in, index tensors
    block_table_ptr,  # in, [num_reqs, blocks_per_req], int32/int64
    pooled_ptr,  # out, [num_outputs, 512], float32: c, or y = RMSNorm(c) with FUSE_RMSNORM
    slot_out_ptr,  # out, [num_outputs], int64: destination slot, -1 = skip
    rope_pos_out_ptr,  # out, [num_outputs], int64: (p // C) * C
    num_outputs, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
    state_s0, state_s1, state_s2, bt_s0, bt_s1,
    weight_ptr,  # in, [512], bfloat16/float32 (read with FUSE_RMSNORM only)
    eps,
    cos_sin_ptr,  # in, [max_pos, 64], float32 (read with FUSE_ROPE only)
    cs_s0, cs_s1,
    C: tl.constexpr, BLOCK_D: tl.constexpr, ROW_TILE: tl.constexpr,
    UNMASKED_MIDDLE: tl.constexpr, ROWS_PADDED: tl.constexpr, FUSE_RMSNORM: tl.constexpr,
    FUSE_ROPE: tl.constexpr, LOOKUP_AHEAD: tl.constexpr, VOLATILE_ROWS: tl.constexpr,
):
    D_TILES: tl.constexpr = 512 // BLOCK_D
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    d = tl.arange(0, BLOCK_D)
    for work in range(pid, num_outputs * D_TILES, num_programs):
        i = work // D_TILES
        dims = (work % D_TILES) * BLOCK_D + d  # [BLOCK_D]
        ok, req, pos, slot = resolve_output(
            i, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr,
            num_tokens, num_reqs, blocks_per_req, num_slots, max_pos, block_size, C)
        m = tl.full([BLOCK_D], float("-inf"), tl.float32)
        l = tl.zeros([BLOCK_D], tl.float32)
        acc = tl.zeros([BLOCK_D], tl.float32)
        n_bad = tl.where(ok, 0, 1)
        if ok:
            m, l, acc, n_bad = pool_window(state_ptr, block_table_ptr + req * bt_s0, bt_s1, num_blocks, pos - C + 1,
                                           pos, block_size, dims, state_s0, state_s1, state_s2, m, l, acc, n_bad,
                                           ROW_TILE, UNMASKED_MIDDLE, ROWS_PADDED, LOOKUP_AHEAD, VOLATILE_ROWS, 512)
        c = acc / tl.where(l > 0, l, 1.0)  # l = 0 only for a skipped output: no 0/0
        if FUSE_ROPE:
            c = normalise_rotate(c, dims, weight_ptr, eps, cos_sin_ptr + (pos // C) * C * cs_s0, cs_s1, ok)
        elif FUSE_RMSNORM:
            rrms = 1.0 / tl.sqrt(tl.sum(c * c, axis=0) / 512 + eps)
            c = c * rrms * tl.load(weight_ptr + dims).to(tl.float32)
        tl.store(pooled_ptr + i * 512 + dims, c)
        if work % D_TILES == 0:
            tl.store(slot_out_ptr + i, tl.where(n_bad == 0, slot, -1))
            tl.store(rope_pos_out_ptr + i, (pos // C) * C)


@triton.jit
def _gather_to_bf16_kernel(
    state_ptr,  # in, [num_blocks, block_size, 1024], float32/bfloat16
    boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr,  # in, index tensors
    block_table_ptr,  # in, [num_reqs, blocks_per_req], int32/int64
    pooled_ptr,  # out, [num_outputs, 512], int16: the bits of bf16(y), RoPE dims rotated (a real bf16 tensor's bytes)
    slot_out_ptr,  # out, [num_outputs], int64: destination slot, -1 = skip (its row is then not written)
    num_outputs, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
    state_s0, state_s1, state_s2, bt_s0, bt_s1,
    weight_ptr,  # in, [512], bfloat16/float32
    eps,
    cos_sin_ptr,  # in, [max_pos, 64], float32
    cs_s0, cs_s1,
    count_ptr,  # in, [1], int32: outputs in the boundary list (read with COUNTED: a step's device list)
    state_slot_ptr,  # in, [num_tokens]: a step's state slots (read with HAS_STATE_SLOTS)
    tile_from,  # >= 0 (with COUNTED): a step by token tile, each tile's outputs from its tile_from-th on; else -1
    C: tl.constexpr, ROW_TILE: tl.constexpr, ROWS_PADDED: tl.constexpr, LOOKUP_AHEAD: tl.constexpr,
    VOLATILE_ROWS: tl.constexpr, COUNTED: tl.constexpr, OVERLAP: tl.constexpr, HAS_STATE_SLOTS: tl.constexpr,
):
    """The default's gather (``triton-quant``): one program pools one whole output at a time
    (``pool_window`` with unmasked middle blocks, the loop of ``fused``) and writes its bf16 row
    with ``store_rotated_bf16``, the real bf16 tensor the quantise kernel reads.

    The arguments are ``_block_gather_softmax_kernel``'s but the RoPE positions (the rotation is
    done here); the loop is ``fused``'s, over outputs with no head tiles, and only an output whose
    window was read whole gets a row (the quantise kernel uses no other), so the ladder kernel
    carries no bf16 mode. On an H200 at 40 programs this kernel took about 1.37x the time of
    ``fused``'s, whose window loop is the same, until its row loads were made volatile on CUDA
    (``_load_rows``: ptxas had scheduled some of them after the math that waits on the others)
    and, 1.10x, until the per-output block moved into a function of its own (now
    ``_gather_token_to_bf16``: same instructions, a different schedule); now 1.01-1.03x (measured on an H200; git history of bench/RESULTS.md).
    ``OVERLAP``: the overlapping ratio-4 compressor's window of ``2C`` rows (``pool_resolved``).

    A step by token tile (``tile_from >= 0``): ``num_outputs`` tiles of C tokens; tile ``t``'s first
    boundary token gets row ``t`` (its slot -1 where the tile has none), a further one, token ``b``,
    row ``num_outputs + b`` (``tile_rows``), which the quantise and scatter kernels find the same way."""
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    if COUNTED:
        # As ``fused._fused_compress_kernel``: the list's outputs, or each tile's boundary tokens from
        # its ``tile_from``-th on, in one loop body. A tile whose first output is this kernel's gets
        # its row's slot (-1, token -1) even where it has no boundary token.
        by_tile = tile_from >= 0
        for t in range(pid, tl.where(by_tile, num_outputs, counted_outputs(count_ptr, num_outputs, True)),
                       num_programs):
            first = t * C
            lane = first * 0 - 1
            nxt = lane
            count = first * 0 + 1  # the list's one output
            if by_tile:
                nxt, count = next_boundary_in_tile(positions_ptr, slot_mapping_ptr, state_slot_ptr, first,
                                                   num_tokens, -1, C, C, HAS_STATE_SLOTS)
                count = tl.maximum(count, 1 - tile_from)
            for k in range(count):
                if by_tile:
                    if k > 0:  # the tile's first boundary token is the count's scan's; a further one, after the last
                        nxt, _n = next_boundary_in_tile(positions_ptr, slot_mapping_ptr, state_slot_ptr, first,
                                                        num_tokens, lane, C, C, HAS_STATE_SLOTS)
                    lane = nxt
                    token = tl.where(lane < C, first + lane, -1).to(tl.int64)
                    row = tl.where(k == 0, t, num_outputs + first + lane)  # a further output: after the tiles
                else:
                    token = tl.load(boundary_ptr + t).to(tl.int64)
                    row = t
                if k >= tile_from:
                    _gather_token_to_bf16(
                        token, row, state_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr, block_table_ptr,
                        pooled_ptr, slot_out_ptr, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots,
                        max_pos, block_size, state_s0, state_s1, state_s2, bt_s0, bt_s1, weight_ptr, eps,
                        cos_sin_ptr, cs_s0, cs_s1, C, ROW_TILE, ROWS_PADDED, LOOKUP_AHEAD, VOLATILE_ROWS, OVERLAP)
    else:
        for i in range(pid, num_outputs, num_programs):
            _gather_token_to_bf16(
                tl.load(boundary_ptr + i).to(tl.int64), i, state_ptr, token_to_req_ptr, positions_ptr,
                slot_mapping_ptr, block_table_ptr, pooled_ptr, slot_out_ptr, num_tokens, num_reqs, blocks_per_req,
                num_blocks, num_slots, max_pos, block_size, state_s0, state_s1, state_s2, bt_s0, bt_s1, weight_ptr,
                eps, cos_sin_ptr, cs_s0, cs_s1, C, ROW_TILE, ROWS_PADDED, LOOKUP_AHEAD, VOLATILE_ROWS, OVERLAP)


@triton.jit
def _gather_token_to_bf16(
    token, row, state_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr, block_table_ptr, pooled_ptr,
    slot_out_ptr, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
    state_s0, state_s1, state_s2, bt_s0, bt_s1, weight_ptr, eps, cos_sin_ptr, cs_s0, cs_s1,
    C: tl.constexpr, ROW_TILE: tl.constexpr, ROWS_PADDED: tl.constexpr, LOOKUP_AHEAD: tl.constexpr,
    VOLATILE_ROWS: tl.constexpr, OVERLAP: tl.constexpr,
):
    """The whole window of boundary token ``token`` (int64) into bf16 row ``row`` and its slot
    (-1, and no row, where the token is out of range, skipped or its window has a bad block)."""
    WINDOW: tl.constexpr = C + C * OVERLAP  # rows one output pools
    ok, req, pos, slot = resolve_token(token, token_to_req_ptr, positions_ptr, slot_mapping_ptr, num_tokens, num_reqs,
                                       blocks_per_req, num_slots, max_pos, block_size, C)
    m, l, acc, n_bad = pool_resolved(ok, req, pos, 0, WINDOW - 1, state_ptr, block_table_ptr, num_blocks, block_size,
                                     state_s0, state_s1, state_s2, bt_s0, bt_s1, C, ROW_TILE, ROWS_PADDED,
                                     LOOKUP_AHEAD, VOLATILE_ROWS, OVERLAP)
    if n_bad == 0:
        store_rotated_bf16(acc / l, weight_ptr, eps, cos_sin_ptr + (pos // C) * C * cs_s0, cs_s1, ok,
                           pooled_ptr + tl.cast(row, tl.int64) * 512)
    tl.store(slot_out_ptr + row, tl.where(n_bad == 0, slot, -1))


def launch(args, spec) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run ``spec`` (from ``stages.kernel_specializations``): ``(pooled [N, 512] fp32, slot [N]
    int64, rope_pos [N] int64)``; pooled is RMS-normalised with ``FUSE_RMSNORM`` and has its RoPE
    dims rotated (still fp32) with ``FUSE_ROPE``."""
    cs = args.cos_sin_cache
    return launch_index_kernel(globals()[spec.kernel], args, spec.constexprs,
                               extra=(args.rms_norm_weight, args.rms_norm_eps, cs, cs.stride(0), cs.stride(1)))
