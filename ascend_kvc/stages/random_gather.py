"""Ladder rung 1, ``random-gather``: per-row block-table lookups and indirect row loads.

Each step translates ``BLOCK_T`` window positions to physical rows one by one (a vector load of
block-table entries) and gathers those rows. triton-ascend lowers these indirect loads to scalar
loops, and this design has been reported to run at about 0.8x of the PyTorch baseline on a 910B
(not measured here); it is the ladder's bottom rung, kept for comparison.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..triton_helpers import launch_index_kernel, online_softmax_update, resolve_output

@triton.jit
def _random_gather_softmax_kernel(
    state_ptr,  # in, [num_blocks, block_size, 1024], float32/bfloat16
    boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr,  # in, index tensors
    block_table_ptr,  # in, [num_reqs, blocks_per_req], int32/int64
    pooled_ptr,  # out, [num_outputs, 512], float32: softmax-pooled c
    slot_out_ptr,  # out, [num_outputs], int64: destination slot, -1 = skip
    rope_pos_out_ptr,  # out, [num_outputs], int64: (p // C) * C
    num_outputs, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
    state_s0, state_s1, state_s2, bt_s0, bt_s1,
    C: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):
    D_TILES: tl.constexpr = 512 // BLOCK_D
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    d = tl.arange(0, BLOCK_D)
    j = tl.arange(0, BLOCK_T)
    for work in range(pid, num_outputs * D_TILES, num_programs):
        i = work // D_TILES
        dims = (work % D_TILES) * BLOCK_D + d  # [BLOCK_D]
        ok, req, pos, slot = resolve_output(
            i, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr,
            num_tokens, num_reqs, blocks_per_req, num_slots, max_pos, block_size, C)
        t0 = (pos - C + 1).to(tl.int32)
        m = tl.full([BLOCK_D], float("-inf"), tl.float32)
        l = tl.zeros([BLOCK_D], tl.float32)
        acc = tl.zeros([BLOCK_D], tl.float32)
        n_bad = tl.where(ok, 0, 1)
        if ok:
            for start in range(0, C, BLOCK_T):
                t = t0 + start + j  # [BLOCK_T] int32
                col = t // block_size
                blk = tl.load(block_table_ptr + req * bt_s0 + col * bt_s1).to(tl.int64)  # per-row lookup
                blk_ok = (blk >= 0) & (blk < num_blocks)
                n_bad += tl.sum(tl.where(blk_ok, 0, 1), axis=0)  # no `~` on bools: Triton 3.2's interpreter lacks it
                blk = tl.where(blk_ok, blk, 0)
                row = blk * state_s0 + (t - col * block_size).to(tl.int64) * state_s1  # [BLOCK_T]
                values = tl.load(state_ptr + row[:, None] + dims[None, :] * state_s2).to(tl.float32)
                scores = tl.load(state_ptr + row[:, None] + (512 + dims)[None, :] * state_s2).to(tl.float32)
                m, l, acc = online_softmax_update(m, l, acc, values, scores)
        tl.store(pooled_ptr + i * 512 + dims, acc / tl.where(l > 0, l, 1.0))  # l = 0 only when skipped
        if work % D_TILES == 0:
            tl.store(slot_out_ptr + i, tl.where(n_bad == 0, slot, -1))
            tl.store(rope_pos_out_ptr + i, (pos // C) * C)


def launch(args, spec) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run ``spec`` (from ``stages.kernel_specializations``): ``(pooled c [N, 512] fp32, slot [N]
    int64, rope_pos [N] int64)``."""
    return launch_index_kernel(globals()[spec.kernel], args, spec.constexprs)
