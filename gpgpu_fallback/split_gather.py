"""The gather/reduce half: block-centric online softmax over one piece of one window.

A program streams its piece of the window ``NB`` physical blocks at a time: one block-table
entry per block, a ``[NB, ROWS, BLOCK_D]`` tile per step, no contiguity assumed. Blocks taller
than a step (``CHUNKED``) are walked one block at a time, in ``ROWS``-row chunks of the rows the
window needs, still with one block-table read per block. The result is the piece's softmax
state (running max, sum, weighted sum) and how many bad block ids it met. State rows are read
once: ``EVICT`` is the L2 eviction hint for them (``"evict_first"`` or ``""``, from the tile table).
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascend_kvc.triton_helpers import online_softmax_update


@triton.jit
def gather_piece(
    state_ptr,  # in, [num_blocks, block_size, 1024], float32/bfloat16
    table_row_ptr,  # in, the output's block_table row, entries bt_s1 apart
    ok, pos, col_start, col_end, dims,
    num_blocks, block_size, state_s0, state_s1, state_s2, bt_s1,
    C: tl.constexpr, BLOCK_D: tl.constexpr, ROWS: tl.constexpr, NB: tl.constexpr, CHUNKED: tl.constexpr,
    EVICT: tl.constexpr, OVERLAP: tl.constexpr,
):
    """Softmax state ``(m, l, acc)`` over dims ``dims`` of window columns ``[col_start, col_end)``
    (rows outside the window ``[pos - C + 1, pos]`` masked), and the count of bad block ids.

    ``OVERLAP`` (the overlapping ratio-4 compressor, state rows ``[kv_a | kv_b | score_a | score_b]``):
    the window is the ``2C`` rows ``[max(pos - 2C + 1, 0), pos]``; the newer ``C`` rows read
    ``kv_b``/``score_b`` (512 columns on), the older ones ``kv_a``/``score_a``; negative positions
    are outside it.
    """
    if OVERLAP:
        t0 = tl.maximum(pos - 2 * C + 1, 0)
        newer = pos - C + 1  # rows from here on are the window's newer C
        score_col: tl.constexpr = 1024
    else:
        t0 = pos - C + 1
        newer = t0
        score_col: tl.constexpr = 512
    rin = tl.arange(0, ROWS)
    m = tl.full([BLOCK_D], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_D], tl.float32)
    acc = tl.zeros([BLOCK_D], tl.float32)
    n_bad = tl.where(ok, 0, 1)
    if ok:
        if CHUNKED:
            for col in range(col_start, col_end):
                blk = tl.load(table_row_ptr + col * bt_s1).to(tl.int64)  # one per block
                blk_ok = (blk >= 0) & (blk < num_blocks)
                n_bad += tl.where(blk_ok, 0, 1)
                blk = tl.where(blk_ok, blk, 0)
                first = col * block_size
                r_lo = tl.maximum(t0 - first, 0)
                r_hi = tl.minimum(pos - first, block_size - 1)  # inclusive
                for r0 in range(r_lo, r_hi + 1, ROWS):
                    r = r0 + rin
                    row_ok = r <= r_hi
                    ptrs = state_ptr + blk * state_s0 + r[:, None].to(tl.int64) * state_s1 + dims[None, :] * state_s2
                    if OVERLAP:
                        ptrs += tl.where(first + r >= newer, 512, 0)[:, None] * state_s2
                    values = tl.load(ptrs, mask=row_ok[:, None], other=0.0,
                                     eviction_policy=EVICT).to(tl.float32)
                    scores = tl.load(ptrs + score_col * state_s2, mask=row_ok[:, None], other=float("-inf"),
                                     eviction_policy=EVICT).to(tl.float32)
                    m, l, acc = online_softmax_update(m, l, acc, values, scores)
        else:
            nb = tl.arange(0, NB)
            for c0 in range(col_start, col_end, NB):
                cols = c0 + nb  # [NB]
                col_ok = cols < col_end
                blk = tl.load(table_row_ptr + cols * bt_s1, mask=col_ok, other=0).to(tl.int64)  # one per block
                blk_ok = (blk >= 0) & (blk < num_blocks)
                n_bad += tl.sum(tl.where(col_ok & (blk_ok == 0), 1, 0), axis=0)
                blk = tl.where(blk_ok, blk, 0)
                t = cols[:, None] * block_size + rin[None, :]  # [NB, ROWS]
                row_mask = col_ok[:, None] & (rin[None, :] < block_size) & (t >= t0) & (t <= pos)
                row_off = blk[:, None] * state_s0 + rin[None, :].to(tl.int64) * state_s1  # [NB, ROWS]
                if OVERLAP:
                    row_off += tl.where(t >= newer, 512, 0) * state_s2
                ptrs = state_ptr + row_off[:, :, None] + dims[None, None, :] * state_s2  # [NB, ROWS, BLOCK_D]
                mask3 = row_mask[:, :, None]
                values = tl.load(ptrs, mask=mask3, other=0.0, eviction_policy=EVICT).to(tl.float32)
                scores = tl.load(ptrs + score_col * state_s2, mask=mask3, other=float("-inf"),
                                 eviction_policy=EVICT).to(tl.float32)
                values = tl.reshape(values, [NB * ROWS, BLOCK_D])
                scores = tl.reshape(scores, [NB * ROWS, BLOCK_D])
                m, l, acc = online_softmax_update(m, l, acc, values, scores)
    return m, l, acc, n_bad
