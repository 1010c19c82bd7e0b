"""The slot-byte math as one Triton device function, shared by every kernel that writes a slot.

From the pooled vector ``c`` of one output to its 584 bytes in the page: RMSNorm scale, bf16
round-to-nearest-even, per-group amax, power-of-two exponent, truncating int8 cast, GPT-J RoPE,
little-endian bf16 and the byte layout of the stores. The ``gpgpu`` finalizer and the Ascend
``fused`` rung both call ``store_slot_bytes``; there is no second copy of this math.

Exact on every backend and within the Triton 3.2 language (triton-ascend 3.2.0): bf16 rounding
and ``2^-e`` come from integer bit operations, never from ``.to(tl.bfloat16)`` or ``log2``/``exp2``;
every store is a plain uint8 store.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .layout import NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, SCALE_REGION, SLOTS_PER_PAGE
from .triton_helpers import bf16_rne_bits, bf16_round, exp2_int, pow2_scale_exponent

# The layout constants a kernel passes through as constexprs to ``store_slot_bytes``.
SLOT_LAYOUT_CONSTEXPRS = dict(
    NOPE_DIM=NOPE_DIM, PAYLOAD_BYTES=PAYLOAD_BYTES, SCALE_REGION=SCALE_REGION, SCALE_BYTES=SCALE_BYTES,
    SLOTS_PER_PAGE=SLOTS_PER_PAGE,
)


@triton.jit
def store_slot_bytes(
    c8,  # [8, 64] fp32: the pooled c, dims g * 64 + j (rows 0..6 the NOPE groups, row 7 the RoPE dims)
    cu,  # [32] fp32: c[NOPE_DIM + 2k], the first of each RoPE pair
    cw,  # [32] fp32: c[NOPE_DIM + 2k + 1], the second
    weight_ptr,  # in, [512], bfloat16/float32, unit stride
    eps,
    cos_sin_row_ptr,  # in, the cos_sin_cache row of (p // C) * C: 32 cos, then 32 sin, cs_s1 apart
    cs_s1,
    kv_cache_ptr,  # out, [num_pages, 37376], uint8, rows kv_s0 apart
    slot,  # int64 >= 0, the destination slot (the caller has checked it)
    kv_s0,
    NOPE_DIM: tl.constexpr, PAYLOAD_BYTES: tl.constexpr, SCALE_REGION: tl.constexpr,
    SCALE_BYTES: tl.constexpr, SLOTS_PER_PAGE: tl.constexpr,
):
    """RMSNorm, quantise and rotate one output's ``c`` and store its 584 bytes into ``slot``."""
    g = tl.arange(0, 8)
    d2 = g[:, None] * 64 + tl.arange(0, 64)[None, :]  # [8, 64]
    rrms = 1.0 / tl.sqrt(tl.sum(tl.sum(c8 * c8, axis=1), axis=0) / 512 + eps)
    z = bf16_round(c8 * rrms * tl.load(weight_ptr + d2).to(tl.float32))  # [8, 64]
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

    # The RoPE weights and bytes move as contiguous vectors, split and joined in registers:
    # triton-ascend's front end rejects stride-2 accesses at these offsets.
    w_u, w_w = tl.split(tl.reshape(tl.load(weight_ptr + NOPE_DIM + tl.arange(0, 64)).to(tl.float32), [32, 2]))
    u = cu * rrms * w_u
    w = cw * rrms * w_w
    k = tl.arange(0, 32)
    cos = tl.load(cos_sin_row_ptr + k * cs_s1)
    sin = tl.load(cos_sin_row_ptr + (32 + k) * cs_s1)
    u_bits = bf16_rne_bits(u * cos - w * sin)
    w_bits = bf16_rne_bits(w * cos + u * sin)
    low = tl.join((u_bits >> 16) & 0xFF, (w_bits >> 16) & 0xFF)  # [32, 2]: low byte of u', w'
    high = tl.join((u_bits >> 24) & 0xFF, (w_bits >> 24) & 0xFF)
    rope = tl.reshape(tl.join(low, high), [128])  # little-endian bf16 pairs: u' lo, u' hi, w' lo, w' hi
    tl.store(payload + NOPE_DIM + tl.arange(0, 128), rope.to(tl.uint8))
