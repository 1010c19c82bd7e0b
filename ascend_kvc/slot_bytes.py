"""The slot-byte math as one Triton device function, shared by every kernel that writes a slot.

From the pooled vector ``c`` of one output to its 584 bytes in the page: RMSNorm scale, bf16
round-to-nearest-even, per-group amax, power-of-two exponent, truncating int8 cast, GPT-J RoPE,
little-endian bf16 and the byte layout of the stores. The ``gpgpu`` finalizer and the Ascend
``fused`` rung both call ``store_slot_bytes``; there is no second copy of this math.

Exact on every backend and within the Triton 3.2 language (triton-ascend 3.2.0): bf16 rounding
and ``2^-e`` come from integer bit operations, never from ``.to(tl.bfloat16)`` or ``log2``/``exp2``;
every store is a plain uint8 store.

Shapes are chosen for bishengir-compile's unified-buffer planner: with ``PAIRS_BY_ONE_HOT``
(the Ascend ``fused`` rung) nothing is reshaped to a trailing dimension of 2. The planner pads
every dimension of an int8 cast's buffers to 32, and a ``[32, 2]`` reshape spreads to the tensors
it touches, so the ``[8, 64]`` quantised block became ``[8, 32, 2]`` with 384 KiB of cast buffers
(the unified buffer holds 192 KiB). There the RoPE pairs are picked apart with one-hot maxima;
on a GPU (the ``gpgpu`` finalizer) a split is a cheap register shuffle. The RoPE bytes leave as
one contiguous ``[32, 4]`` tile built by broadcasting, on every backend.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .layout import NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, SCALE_REGION, SLOTS_PER_PAGE
from .triton_helpers import bf16_rne_bits, bf16_round, int8_groups

# The layout constants a kernel passes through as constexprs to ``store_slot_bytes``.
SLOT_LAYOUT_CONSTEXPRS = dict(
    NOPE_DIM=NOPE_DIM, PAYLOAD_BYTES=PAYLOAD_BYTES, SCALE_REGION=SCALE_REGION, SCALE_BYTES=SCALE_BYTES,
    SLOTS_PER_PAGE=SLOTS_PER_PAGE,
)


@triton.jit
def _row(x8, r: tl.constexpr):
    """Row ``r`` of an ``[8, 64]`` tensor as ``[64]``: a max over rows with every other row -inf.

    Exact for every value but NaN (whose bytes are free); the sign of zero is kept. An integer
    masked sum of the bits would be exact for NaN too, but bishengir-compile planned it past the
    unified buffer.
    """
    return tl.max(tl.where(tl.arange(0, 8)[:, None] == r, x8, float("-inf")), axis=0)


@triton.jit
def _pick(y, b: tl.constexpr):
    """``[32]``: ``y[2k + b]`` of a ``[64]`` vector, by a one-hot max (exact as in ``_row``)."""
    j = tl.arange(0, 64)[None, :]
    return tl.max(tl.where(j == 2 * tl.arange(0, 32)[:, None] + b, y[None, :], float("-inf")), axis=1)


@triton.jit
def gptj_pairs(y, ONE_HOT: tl.constexpr):
    """``(y[2k], y[2k + 1])``, each ``[32]``, of a ``[64]`` vector.

    ``ONE_HOT``: by one-hot maxima, for bishengir-compile (see the module docstring); else by a
    ``[32, 2]`` split, a register shuffle on a GPU.
    """
    if ONE_HOT:
        return _pick(y, 0), _pick(y, 1)
    else:
        return tl.split(tl.reshape(y, [32, 2]))


@triton.jit
def rope_row(c8):
    """The RoPE dims of ``c8 = c`` as ``[8, 64]`` (its row 7) as a ``[64]`` vector, reshape-free."""
    return _row(c8, 7)


@triton.jit
def inverse_rms(c8, eps):
    """``1 / sqrt(mean(c^2) + eps)`` over the 512 dims of ``c8 [8, 64]``, the RMSNorm scale."""
    return 1.0 / tl.sqrt(tl.sum(tl.sum(c8 * c8, axis=1), axis=0) / 512 + eps)


@triton.jit
def rotated_pair_bits(y, cos_sin_row_ptr, cs_s1, ok, PAIRS_BY_ONE_HOT: tl.constexpr):
    """GPT-J rotation of the normalised RoPE dims ``y [64]``: for each pair ``k``, the bf16 bits
    (round to nearest even, int32 with the low 16 bits zero) of ``u' = u cos - w sin`` and
    ``w' = w cos + u sin``, ``u = y[2k]``, ``w = y[2k + 1]``. The cos/sin row is not read when
    ``ok`` is false."""
    u, w = gptj_pairs(y, PAIRS_BY_ONE_HOT)
    k = tl.arange(0, 32)
    cos = tl.load(cos_sin_row_ptr + k * cs_s1, mask=ok, other=1.0)
    sin = tl.load(cos_sin_row_ptr + (32 + k) * cs_s1, mask=ok, other=0.0)
    return bf16_rne_bits(u * cos - w * sin), bf16_rne_bits(w * cos + u * sin)


@triton.jit
def store_slot_bytes(
    c8,  # [8, 64] fp32: the pooled c, dims g * 64 + j (rows 0..6 the NOPE groups, row 7 the RoPE dims)
    c_rope,  # [64] fp32: c[NOPE_DIM:], row 7 of c8 again (``rope_row(c8)``, or loaded by the caller)
    weight_ptr,  # in, [512], bfloat16/float32, unit stride
    eps,
    cos_sin_row_ptr,  # in, the cos_sin_cache row of (p // C) * C: 32 cos, then 32 sin, cs_s1 apart
    cs_s1,
    kv_cache_ptr,  # out, [num_pages, 37376], uint8, rows kv_s0 apart
    slot,  # int64 >= 0, the destination slot (the caller has checked it)
    kv_s0,
    NOPE_DIM: tl.constexpr, PAYLOAD_BYTES: tl.constexpr, SCALE_REGION: tl.constexpr,
    SCALE_BYTES: tl.constexpr, SLOTS_PER_PAGE: tl.constexpr, PAIRS_BY_ONE_HOT: tl.constexpr,
):
    """RMSNorm, quantise and rotate one output's ``c`` and store its 584 bytes into ``slot``.

    ``PAIRS_BY_ONE_HOT`` picks the RoPE pairs apart with one-hot maxima instead of a ``[32, 2]``
    split (see the module docstring); the bytes are the same either way.
    """
    g = tl.arange(0, 8)
    d2 = g[:, None] * 64 + tl.arange(0, 64)[None, :]  # [8, 64]
    rrms = inverse_rms(c8, eps)
    z = bf16_round(c8 * rrms * tl.load(weight_ptr + d2).to(tl.float32))  # [8, 64]
    q, e = int8_groups(z)  # [8, 64] int32, [8] exponents

    page = slot // SLOTS_PER_PAGE
    in_page = slot - page * SLOTS_PER_PAGE
    payload = kv_cache_ptr + page * kv_s0 + in_page * PAYLOAD_BYTES
    tl.store(payload + d2, (q & 0xFF).to(tl.uint8), mask=g[:, None] < 7)
    scale_bytes = tl.where(g < 7, tl.minimum(tl.maximum(e + 127, 0), 255), 0)  # byte 7: the pad
    scales = kv_cache_ptr + page * kv_s0 + SCALE_REGION + in_page * SCALE_BYTES
    tl.store(scales + g, scale_bytes.to(tl.uint8))

    y = c_rope * rrms * tl.load(weight_ptr + NOPE_DIM + tl.arange(0, 64)).to(tl.float32)  # [64]
    u_bits, w_bits = rotated_pair_bits(y, cos_sin_row_ptr, cs_s1, True, PAIRS_BY_ONE_HOT)
    k = tl.arange(0, 32)
    # Byte b of pair k (u' lo, u' hi, w' lo, w' hi: little-endian bf16) as one contiguous [32, 4]
    # tile, built by broadcasting, not by joins.
    b = tl.arange(0, 4)[None, :]
    bits = tl.where(b < 2, u_bits[:, None], w_bits[:, None])  # [32, 4]
    rope_bytes = (bits >> (16 + 8 * (b % 2))) & 0xFF
    tl.store(payload + NOPE_DIM + 4 * k[:, None] + b, rope_bytes.to(tl.uint8))


@triton.jit
def store_pooled_slot_bytes(
    c,  # [512] fp32: the pooled c of one output
    pos, weight_ptr, eps, cos_sin_ptr, cs_s0, cs_s1, kv_cache_ptr, slot, kv_s0,
    C: tl.constexpr, NOPE_DIM: tl.constexpr, PAYLOAD_BYTES: tl.constexpr, SCALE_REGION: tl.constexpr,
    SCALE_BYTES: tl.constexpr, SLOTS_PER_PAGE: tl.constexpr,
):
    """``store_slot_bytes`` for a ``[512]`` pooled ``c`` at position ``pos``, as the Ascend kernels
    hold it: reshaped to ``[8, 64]``, the RoPE dims picked by a reduction, the RoPE pairs by one-hot
    maxima, the cos/sin row of ``(pos // C) * C``."""
    c8 = tl.reshape(c, [8, 64])
    store_slot_bytes(c8, rope_row(c8), weight_ptr, eps, cos_sin_ptr + (pos // C) * C * cs_s0, cs_s1,
                     kv_cache_ptr, slot, kv_s0, NOPE_DIM, PAYLOAD_BYTES, SCALE_REGION, SCALE_BYTES,
                     SLOTS_PER_PAGE, True)
