"""Ladder rung 2, ``pre-gather``: ``index_select`` the window rows, then a Triton linear scan.

The framework's gather (CANN's ``index_select`` on an NPU) moves the rows into a contiguous
``[N, C, 1024]`` tensor; the Triton kernel then streams it with plain contiguous tile loads. It
pays for a full extra write and read of the window, which the block-centric rungs remove.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..device import persistent_programs
from ..indexing import plan_for, window_blocks_and_offsets
from ..layout import HEAD_DIM, STATE_WIDTH
from ..triton_helpers import online_softmax_update

@triton.jit
def _linear_scan_softmax_kernel(
    rows_ptr,  # in, [num_outputs, C, 1024], float32/bfloat16, contiguous
    pooled_ptr,  # out, [num_outputs, 512], float32: softmax-pooled c
    num_outputs,
    C: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr,
):
    D_TILES: tl.constexpr = 512 // BLOCK_D
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    d = tl.arange(0, BLOCK_D)
    j = tl.arange(0, BLOCK_T)
    for work in range(pid, num_outputs * D_TILES, num_programs):
        i = work // D_TILES
        dims = (work % D_TILES) * BLOCK_D + d
        window = rows_ptr + tl.cast(i, tl.int64) * (C * 1024)
        m = tl.full([BLOCK_D], float("-inf"), tl.float32)
        l = tl.zeros([BLOCK_D], tl.float32)
        acc = tl.zeros([BLOCK_D], tl.float32)
        for start in range(0, C, BLOCK_T):
            tile = window + (start + j)[:, None] * 1024  # [BLOCK_T, 1]
            values = tl.load(tile + dims[None, :]).to(tl.float32)
            scores = tl.load(tile + (512 + dims)[None, :]).to(tl.float32)
            m, l, acc = online_softmax_update(m, l, acc, values, scores)
        tl.store(pooled_ptr + i * 512 + dims, acc / l)


def launch(args, spec) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run ``spec`` (from ``stages.kernel_specializations``): ``(pooled c [N, 512] fp32, slot [N]
    int64, rope_pos [N] int64)``."""
    plan = plan_for(args)  # index math on the framework, no host sync
    block, offset = window_blocks_and_offsets(plan, args.block_table, args.block_size, args.compress_ratio)
    st = args.state_cache
    n, C = args.num_outputs, args.compress_ratio
    if st.is_contiguous():
        flat_rows = (block * args.block_size + offset).view(-1)
        rows = torch.index_select(st.view(-1, STATE_WIDTH), 0, flat_rows).view(n, C, STATE_WIDTH)
    else:
        rows = st[block, offset]
    pooled = torch.empty(n, HEAD_DIM, dtype=torch.float32, device=st.device)
    grid = (persistent_programs(st.device, n * (HEAD_DIM // spec.constexprs["BLOCK_D"])),)
    globals()[spec.kernel][grid](rows, pooled, n, **spec.constexprs)
    return pooled, plan.slot, plan.rope_pos
