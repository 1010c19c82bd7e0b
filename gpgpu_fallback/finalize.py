"""The fused finalizer: merge window pieces, RMSNorm, bf16, INT8 with power-of-two scales, RoPE,
and the byte writes into the pages, in one program per output.

The slot-byte math itself is ``ascend_kvc.slot_bytes.store_slot_bytes``, shared with the Ascend
``fused`` rung.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascend_kvc.slot_bytes import store_slot_bytes
from ascend_kvc.triton_helpers import resolve_output


@triton.jit
def _merge_pieces(part_m_ptr, part_l_ptr, part_acc_ptr, base, offs, SPLITS: tl.constexpr):
    """Softmax-pooled ``c`` at dims ``offs`` (any shape) from the ``SPLITS`` piece states."""
    mx = tl.load(part_m_ptr + base + offs)
    for s in tl.static_range(1, SPLITS):
        mx = tl.maximum(mx, tl.load(part_m_ptr + base + s * 512 + offs))
    den = tl.zeros(offs.shape, tl.float32)
    num = tl.zeros(offs.shape, tl.float32)
    for s in tl.static_range(SPLITS):
        w = tl.exp(tl.load(part_m_ptr + base + s * 512 + offs) - mx)
        den += tl.load(part_l_ptr + base + s * 512 + offs) * w
        num += tl.load(part_acc_ptr + base + s * 512 + offs) * w
    return num / den


@triton.jit
def _fused_finalize_scatter_kernel(
    part_m_ptr, part_l_ptr, part_acc_ptr,  # in, [num_outputs, SPLITS, 512], float32
    part_bad_ptr,  # in, [num_outputs, SPLITS], int32
    boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr,  # in, index tensors
    weight_ptr,  # in, [512], bfloat16/float32
    cos_sin_ptr,  # in, [max_pos, 64], float32
    kv_cache_ptr,  # out, [num_pages, 37376], uint8, rows kv_s0 apart
    num_tokens, num_reqs, blocks_per_req, num_slots, max_pos, block_size,
    cs_s0, cs_s1, kv_s0, eps,
    C: tl.constexpr, SPLITS: tl.constexpr, SPLITS_P2: tl.constexpr,
    NOPE_DIM: tl.constexpr, PAYLOAD_BYTES: tl.constexpr, SCALE_REGION: tl.constexpr,
    SCALE_BYTES: tl.constexpr, SLOTS_PER_PAGE: tl.constexpr,
):
    i = tl.program_id(0)
    ok, req, pos, slot = resolve_output(
        i, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr,
        num_tokens, num_reqs, blocks_per_req, num_slots, max_pos, block_size, C)
    sp = tl.arange(0, SPLITS_P2)
    n_bad = tl.sum(tl.load(part_bad_ptr + i * SPLITS + sp, mask=sp < SPLITS, other=0), axis=0)
    if ok & (n_bad == 0):
        base = tl.cast(i, tl.int64) * (SPLITS * 512)
        g = tl.arange(0, 8)
        d2 = g[:, None] * 64 + tl.arange(0, 64)[None, :]  # [8, 64]
        even = NOPE_DIM + 2 * tl.arange(0, 32)
        c8 = _merge_pieces(part_m_ptr, part_l_ptr, part_acc_ptr, base, d2, SPLITS)
        cu = _merge_pieces(part_m_ptr, part_l_ptr, part_acc_ptr, base, even, SPLITS)
        cw = _merge_pieces(part_m_ptr, part_l_ptr, part_acc_ptr, base, even + 1, SPLITS)
        store_slot_bytes(c8, cu, cw, weight_ptr, eps, cos_sin_ptr + (pos // C) * C * cs_s0, cs_s1,
                         kv_cache_ptr, slot, kv_s0, NOPE_DIM, PAYLOAD_BYTES, SCALE_REGION, SCALE_BYTES,
                         SLOTS_PER_PAGE)
