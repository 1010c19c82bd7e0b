"""Ladder rungs 3-5: block-centric gather, one block-table lookup per physical block.

Each step loads one physical block as a ``[block_size, BLOCK_D]`` tile (on Ascend: one DMA per
table entry, whatever the table's order). ``UNMASKED_MIDDLE`` loads the window's full middle
blocks without masks; only the partial first and last blocks are masked. With ``BLOCK_D = 512``
one program owns the whole head and applies the RMSNorm itself (``FUSE_RMSNORM``).

Stages: ``block-gather`` (BLOCK_D 64, all masked), ``block-gather-nomask`` (64),
``block-d128``, ``block-d256``, ``block-d512``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .triton_helpers import launch_index_kernel, online_softmax_update, resolve_output


@triton.jit
def _load_block_tile(state_ptr, blk, rows, row_mask, dims, state_s0, state_s1, state_s2, MASKED: tl.constexpr):
    """``(values, scores)`` of one physical block: two ``[BLOCK_BS, BLOCK_D]`` fp32 tiles."""
    base = state_ptr + blk * state_s0 + rows[:, None].to(tl.int64) * state_s1  # [BLOCK_BS, 1]
    if MASKED:
        values = tl.load(base + dims[None, :] * state_s2, mask=row_mask[:, None], other=0.0).to(tl.float32)
        scores = tl.load(base + (512 + dims)[None, :] * state_s2, mask=row_mask[:, None], other=float("-inf"))
    else:
        values = tl.load(base + dims[None, :] * state_s2).to(tl.float32)
        scores = tl.load(base + (512 + dims)[None, :] * state_s2)
    return values, scores.to(tl.float32)


@triton.jit
def _lookup_block(table_row, col, bt_s1, num_blocks):
    """One block-table entry: ``(block id, or 0 if out of range; 1 if it was out of range else 0)``."""
    blk = tl.load(table_row + col * bt_s1).to(tl.int64)
    blk_ok = (blk >= 0) & (blk < num_blocks)
    return tl.where(blk_ok, blk, 0), tl.where(blk_ok, 0, 1)


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
    C: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_BS: tl.constexpr,
    UNMASKED_MIDDLE: tl.constexpr, ROWS_PADDED: tl.constexpr, FUSE_RMSNORM: tl.constexpr,
):
    D_TILES: tl.constexpr = 512 // BLOCK_D
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    d = tl.arange(0, BLOCK_D)
    rows = tl.arange(0, BLOCK_BS)
    for work in range(pid, num_outputs * D_TILES, num_programs):
        i = work // D_TILES
        dims = (work % D_TILES) * BLOCK_D + d  # [BLOCK_D]
        ok, req, pos, slot = resolve_output(
            i, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr,
            num_tokens, num_reqs, blocks_per_req, num_slots, max_pos, block_size, C)
        t0 = pos - C + 1
        first_col = t0 // block_size
        last_col = pos // block_size
        table_row = block_table_ptr + req * bt_s0
        m = tl.full([BLOCK_D], float("-inf"), tl.float32)
        l = tl.zeros([BLOCK_D], tl.float32)
        acc = tl.zeros([BLOCK_D], tl.float32)
        n_bad = tl.where(ok, 0, 1)
        if ok:
            # Rows of a block that lie in the window: t0 - col*bs <= row <= pos - col*bs.
            lo = (t0 - first_col * block_size).to(tl.int32)
            hi = (pos - last_col * block_size).to(tl.int32)
            if UNMASKED_MIDDLE:
                # Partial first block, full middle blocks without masks, partial last block.
                blk, bad = _lookup_block(table_row, first_col, bt_s1, num_blocks)
                n_bad += bad
                first_hi = tl.where(first_col == last_col, hi, block_size - 1)
                values, scores = _load_block_tile(state_ptr, blk, rows,
                                                  (rows >= lo) & (rows <= first_hi), dims,
                                                  state_s0, state_s1, state_s2, True)
                m, l, acc = online_softmax_update(m, l, acc, values, scores)
                for col in range(first_col + 1, last_col):
                    blk, bad = _lookup_block(table_row, col, bt_s1, num_blocks)  # one lookup per block
                    n_bad += bad
                    values, scores = _load_block_tile(state_ptr, blk, rows, rows < block_size, dims,
                                                      state_s0, state_s1, state_s2, ROWS_PADDED)
                    m, l, acc = online_softmax_update(m, l, acc, values, scores)
                if last_col > first_col:
                    blk, bad = _lookup_block(table_row, last_col, bt_s1, num_blocks)
                    n_bad += bad
                    values, scores = _load_block_tile(state_ptr, blk, rows, rows <= hi, dims,
                                                      state_s0, state_s1, state_s2, True)
                    m, l, acc = online_softmax_update(m, l, acc, values, scores)
            else:
                for col in range(first_col, last_col + 1):
                    blk, bad = _lookup_block(table_row, col, bt_s1, num_blocks)  # one lookup per block
                    n_bad += bad
                    t = col * block_size + rows  # [BLOCK_BS]
                    row_mask = (rows < block_size) & (t >= t0) & (t <= pos)
                    values, scores = _load_block_tile(state_ptr, blk, rows, row_mask, dims,
                                                      state_s0, state_s1, state_s2, True)
                    m, l, acc = online_softmax_update(m, l, acc, values, scores)
        c = acc / l
        if FUSE_RMSNORM:
            rrms = 1.0 / tl.sqrt(tl.sum(c * c, axis=0) / 512 + eps)
            c = c * rrms * tl.load(weight_ptr + dims).to(tl.float32)
        tl.store(pooled_ptr + i * 512 + dims, c)
        if work % D_TILES == 0:
            tl.store(slot_out_ptr + i, tl.where(n_bad == 0, slot, -1))
            tl.store(rope_pos_out_ptr + i, (pos // C) * C)


def launch(args, spec) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run ``spec`` (from ``stages.kernel_specializations``): ``(pooled [N, 512] fp32, slot [N]
    int64, rope_pos [N] int64)``; pooled is already RMS-normalised with ``FUSE_RMSNORM``."""
    return launch_index_kernel(globals()[spec.kernel], args, spec.constexprs,
                               extra=(args.rms_norm_weight, args.rms_norm_eps))
