"""The gather/reduce half: block-centric online softmax over a piece of each window.

Program ``(output, window piece, head-dim tile)`` streams its piece ``blocks_per_step`` physical
blocks at a time: one block-table entry per block, a ``[blocks, rows, BLOCK_D]`` tile per step,
no contiguity assumed. It leaves the piece's softmax state (running max, sum, weighted sum) for
the finalizer to merge.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascend_kvc.triton_helpers import online_softmax_update, resolve_output


@triton.jit
def _block8_split_softmax_kernel(
    state_ptr,  # in, [num_blocks, block_size, 1024], float32/bfloat16
    boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr,  # in, index tensors
    block_table_ptr,  # in, [num_reqs, blocks_per_req], int32/int64
    part_m_ptr, part_l_ptr, part_acc_ptr,  # out, [num_outputs, SPLITS, 512], float32 each
    part_bad_ptr,  # out, [num_outputs, SPLITS], int32: bad block ids seen (or 1 if the output is invalid)
    num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
    cols_per_split,
    state_s0, state_s1, state_s2, bt_s0, bt_s1,
    C: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_BS: tl.constexpr, NB: tl.constexpr, SPLITS: tl.constexpr,
):
    D_TILES: tl.constexpr = 512 // BLOCK_D
    pid = tl.program_id(0)
    d_tile = pid % D_TILES
    piece = (pid // D_TILES) % SPLITS
    i = pid // (D_TILES * SPLITS)
    dims = d_tile * BLOCK_D + tl.arange(0, BLOCK_D)
    nb = tl.arange(0, NB)
    rin = tl.arange(0, BLOCK_BS)

    ok, req, pos, slot = resolve_output(
        i, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr,
        num_tokens, num_reqs, blocks_per_req, num_slots, max_pos, block_size, C)
    t0 = pos - C + 1
    col_start = t0 // block_size + piece * cols_per_split
    col_end = tl.minimum(col_start + cols_per_split, pos // block_size + 1)
    table_row = block_table_ptr + req * bt_s0

    m = tl.full([BLOCK_D], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_D], tl.float32)
    acc = tl.zeros([BLOCK_D], tl.float32)
    n_bad = tl.where(ok, 0, 1)
    if ok:
        for c0 in range(col_start, col_end, NB):
            cols = c0 + nb  # [NB]
            col_ok = cols < col_end
            blk = tl.load(table_row + cols * bt_s1, mask=col_ok, other=0).to(tl.int64)  # one per block
            blk_ok = (blk >= 0) & (blk < num_blocks)
            n_bad += tl.sum((col_ok & ~blk_ok).to(tl.int32), axis=0)
            blk = tl.where(blk_ok, blk, 0)
            t = cols[:, None] * block_size + rin[None, :]  # [NB, BLOCK_BS]
            row_mask = col_ok[:, None] & (rin[None, :] < block_size) & (t >= t0) & (t <= pos)
            row_off = blk[:, None] * state_s0 + rin[None, :].to(tl.int64) * state_s1  # [NB, BLOCK_BS]
            ptrs = state_ptr + row_off[:, :, None] + dims[None, None, :] * state_s2  # [NB, BLOCK_BS, BLOCK_D]
            mask3 = row_mask[:, :, None]
            values = tl.load(ptrs, mask=mask3, other=0.0).to(tl.float32)
            scores = tl.load(ptrs + 512 * state_s2, mask=mask3, other=float("-inf")).to(tl.float32)
            values = tl.reshape(values, [NB * BLOCK_BS, BLOCK_D])
            scores = tl.reshape(scores, [NB * BLOCK_BS, BLOCK_D])
            m, l, acc = online_softmax_update(m, l, acc, values, scores)

    part = (i * SPLITS + piece).to(tl.int64) * 512 + dims
    tl.store(part_m_ptr + part, m)
    tl.store(part_l_ptr + part, l)
    tl.store(part_acc_ptr + part, acc)
    if d_tile == 0:
        tl.store(part_bad_ptr + i * SPLITS + piece, n_bad)
