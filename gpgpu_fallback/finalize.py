"""The fused finalizer: merge window pieces, RMSNorm, bf16, INT8 with power-of-two scales, RoPE,
and the byte writes into the pages, in one program per output.

Exact to the byte on every backend: bf16 rounding and the scale exponent come from integer bit
operations (``ascend_kvc.triton_helpers``), the int8 cast truncates toward zero.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascend_kvc.triton_helpers import bf16_rne_bits, bf16_round, exp2_int, pow2_scale_exponent, resolve_output


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
        d2 = g[:, None] * 64 + tl.arange(0, 64)[None, :]  # [8, 64]: 7 NOPE groups, then the RoPE dims
        c = _merge_pieces(part_m_ptr, part_l_ptr, part_acc_ptr, base, d2, SPLITS)
        rrms = 1.0 / tl.sqrt(tl.sum(tl.sum(c * c, axis=1), axis=0) / 512 + eps)
        z = bf16_round(c * rrms * tl.load(weight_ptr + d2).to(tl.float32))  # [8, 64]
        e = pow2_scale_exponent(tl.max(tl.abs(z), axis=1))  # [8]
        q = (z * exp2_int(-e)[:, None]).to(tl.int32)  # truncates toward zero; |q| <= 127 by construction
        q = tl.minimum(tl.maximum(q, -127), 127)

        page = slot // SLOTS_PER_PAGE
        in_page = slot - page * SLOTS_PER_PAGE
        payload = kv_cache_ptr + page * kv_s0 + in_page * PAYLOAD_BYTES
        tl.store(payload + d2, (q & 0xFF).to(tl.uint8), mask=g[:, None] < 7)
        scale_bytes = tl.where(g < 7, tl.minimum(tl.maximum(e + 127, 0), 255), 0)  # byte 7: the pad
        scales = kv_cache_ptr + page * kv_s0 + SCALE_REGION + in_page * SCALE_BYTES
        tl.store(scales + g, scale_bytes.to(tl.uint8))

        k = tl.arange(0, 32)
        even = NOPE_DIM + 2 * k
        u = _merge_pieces(part_m_ptr, part_l_ptr, part_acc_ptr, base, even, SPLITS)
        w = _merge_pieces(part_m_ptr, part_l_ptr, part_acc_ptr, base, even + 1, SPLITS)
        u = u * rrms * tl.load(weight_ptr + even).to(tl.float32)
        w = w * rrms * tl.load(weight_ptr + even + 1).to(tl.float32)
        rope_row = cos_sin_ptr + (pos // C) * C * cs_s0
        cos = tl.load(rope_row + k * cs_s1)
        sin = tl.load(rope_row + (32 + k) * cs_s1)
        u_bits = bf16_rne_bits(u * cos - w * sin)
        w_bits = bf16_rne_bits(w * cos + u * sin)
        rope = payload + NOPE_DIM + 4 * k  # little-endian bf16 pairs
        tl.store(rope, ((u_bits >> 16) & 0xFF).to(tl.uint8))
        tl.store(rope + 1, ((u_bits >> 24) & 0xFF).to(tl.uint8))
        tl.store(rope + 2, ((w_bits >> 16) & 0xFF).to(tl.uint8))
        tl.store(rope + 3, ((w_bits >> 24) & 0xFF).to(tl.uint8))
