"""The last rung's scatter: a Triton kernel that only copies uint8 bytes into the pages.

Keeping the byte path free of any arithmetic other than address math is what made it reliable
on Ascend (ASCEND.md); it also replaces the host sync an index_put of the valid outputs needs.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .device import persistent_programs


@triton.jit
def _byte_scatter_kernel(
    payload_ptr,  # in, [num_outputs, 576], uint8
    scales_ptr,  # in, [num_outputs, 8], uint8
    slot_ptr,  # in, [num_outputs], int64: destination slot, < 0 = skip
    kv_cache_ptr,  # out, [num_pages, 37376], uint8, rows kv_s0 apart
    num_outputs,
    kv_s0,
    PAYLOAD_BYTES: tl.constexpr, SCALE_BYTES: tl.constexpr, SCALE_REGION: tl.constexpr,
    SLOTS_PER_PAGE: tl.constexpr,
):
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    head = tl.arange(0, 512)
    tail = tl.arange(0, PAYLOAD_BYTES - 512)
    sc = tl.arange(0, SCALE_BYTES)
    for i in range(pid, num_outputs, num_programs):
        slot = tl.load(slot_ptr + i)
        if slot >= 0:
            page = slot // SLOTS_PER_PAGE
            in_page = slot - page * SLOTS_PER_PAGE
            dst = kv_cache_ptr + page * kv_s0 + in_page * PAYLOAD_BYTES
            src = payload_ptr + tl.cast(i, tl.int64) * PAYLOAD_BYTES
            tl.store(dst + head, tl.load(src + head))
            tl.store(dst + 512 + tail, tl.load(src + 512 + tail))
            sdst = kv_cache_ptr + page * kv_s0 + SCALE_REGION + in_page * SCALE_BYTES
            tl.store(sdst + sc, tl.load(scales_ptr + tl.cast(i, tl.int64) * SCALE_BYTES + sc))


def launch(out: torch.Tensor, slot: torch.Tensor, payload: torch.Tensor, scales: torch.Tensor, spec) -> None:
    """Copy each output's 584 bytes into ``out`` at ``slot`` (skipping slot < 0); no host sync.

    ``spec`` comes from ``stages.kernel_specializations``.
    """
    n = slot.shape[0]
    grid = (persistent_programs(out.device, n),)
    globals()[spec.kernel][grid](payload, scales, slot, out, n, out.stride(0), **spec.constexprs)
