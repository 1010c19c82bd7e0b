"""The slot-byte math as one Triton device function, shared by every kernel that writes a slot.

From the pooled vector ``c`` of one output to its 584 bytes in the page: RMSNorm scale, bf16
round-to-nearest-even, per-group amax, power-of-two exponent, truncating int8 cast or OCP e4m3fn
rounding (``kv_format="fp8_e4m3"``), GPT-J RoPE, little-endian bf16 and the byte layout of the
stores, for a page of any number of slots. The ``gpgpu`` finalizer (its merged ``[8, 64]`` ``c``)
and the Ascend ``fused`` rung (``store_pooled_slot_bytes``) both end in
``store_format_slot_bytes``; there is no second copy of this math.

Exact on every backend and within the Triton 3.2 language (triton-ascend 3.2.0): bf16 and e4m3
rounding and ``2^-e`` come from integer bit operations on the fp32 bit pattern, never from
``.to(tl.bfloat16)``, an FP8 type or ``log2``/``exp2`` (the 910B has no FP8 unit, bishengir-compile
rejects ``f8E4M3FN``, and Triton's CPU interpreter truncates fp32 -> bf16 casts); every store is
a plain uint8 store.

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

from .layout import NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES
from .triton_helpers import bf16_rne_bits, bf16_round, exp2_int, int8_groups

# The layout constants a kernel passes as constexprs to ``store_format_slot_bytes`` (which takes the
# slots a page at run time).
FORMAT_SLOT_CONSTEXPRS = dict(NOPE_DIM=NOPE_DIM, PAYLOAD_BYTES=PAYLOAD_BYTES, SCALE_BYTES=SCALE_BYTES)
# The ``KV_FORMAT`` constexpr of the kernels that write any cache format.
KV_FORMAT_CODES = {"int8": 0, "fp8_e4m3": 1, "bf16": 2}


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
def e4m3_scale_exponent(amax):
    """The least integer ``e`` with ``448 * 2^e >= max(amax, 1e-4)``, from the bits of fp32 ``amax >= 0``.

    ``amax = 1.m * 2^E``: ``448 = 1.75 * 2^8``, so ``e = E - 8`` when ``1.m <= 1.75`` (mantissa
    bits ``<= 0x600000``) and ``E - 7`` above. The floor ``1e-4 = 1.6384 * 2^-14`` gives ``-22``.
    """
    bits = amax.to(tl.int32, bitcast=True)
    e = ((bits >> 23) & 0xFF) - 127 - 8 + ((bits & 0x7FFFFF) > 0x600000).to(tl.int32)
    return tl.where(amax < 1.0e-4, -22, e)


@triton.jit
def e4m3_bits(x):
    """fp32 ``x`` -> the OCP e4m3fn byte it rounds to (nearest even; bias 7, subnormals kept, the
    sign of zero kept, magnitudes past 448 saturated to 448 = 0x7E), as int32 in [0, 255].

    Integer operations on the fp32 bit pattern only. A magnitude of ``2^-6`` or more keeps 3 of its
    23 mantissa bits: add ``0x7FFFF`` plus the lowest kept bit and drop 20 bits; the carry moves it
    to the next binade, and the exponent is rebiased from 127 to 7 (``120 << 3 = 960``). Below
    ``2^-6`` the value is a multiple of ``2^-9``: the 24-bit significand shifted right by
    ``14 - E`` bits (at most 25, which leaves 0), rounded to nearest even by the dropped bits.
    fp32 zeros and subnormals (exponent field 0) land there and give 0: every one of them is below
    ``2^-10``, half the least e4m3 subnormal, so it does not matter whether the hardware flushed
    them to zero before.
    """
    bits = x.to(tl.int32, bitcast=True)
    sign = (bits >> 24) & 0x80
    mag = tl.minimum(bits & 0x7FFFFFFF, 0x43E00000)  # 448.0: positive floats order as their bits
    biased = mag >> 23
    normal = ((mag + 0x7FFFF + ((mag >> 20) & 1)) >> 20) - 960
    significand = (mag & 0x7FFFFF) | 0x800000
    drop = tl.minimum(141 - biased, 25)  # 141 - biased = 14 - E
    q = significand >> drop
    rest = significand & ((1 << drop) - 1)
    half = 1 << (drop - 1)
    q = q + ((rest > half) | ((rest == half) & ((q & 1) == 1))).to(tl.int32)
    return tl.where(biased >= 121, normal, q) | sign


@triton.jit
def e4m3_groups(z):
    """Quantise bf16-valued ``z [groups, 64]`` to e4m3: ``(q, e)``, ``q`` the int32 e4m3fn bytes of
    ``clamp(z * 2^-e, -448, 448)`` and ``e`` int32 per group (``e4m3_scale_exponent`` of its amax).

    ``e`` is in [-22, 120], so ``2^-e`` is a normal fp32 and ``z * 2^-e`` exact unless it falls
    below fp32's normals, where ``e4m3_bits`` gives 0 with ``z``'s sign either way.
    """
    e = e4m3_scale_exponent(tl.max(tl.abs(z), axis=1))
    return e4m3_bits(z * exp2_int(-e)[:, None]), e


@triton.jit
def store_format_slot_bytes(
    c8,  # [8, 64] fp32: the pooled c, dims g * 64 + j (rows 0..6 the NOPE groups, row 7 the RoPE dims)
    c_rope,  # [64] fp32: c[NOPE_DIM:], row 7 of c8 again (``rope_row(c8)``, or loaded by the caller)
    weight_ptr,  # in, [512], bfloat16/float32, unit stride
    eps,
    cos_sin_row_ptr,  # in, the cos_sin_cache row of (p // C) * C: 32 cos, then 32 sin, cs_s1 apart
    cs_s1,
    kv_cache_ptr,  # out, [num_pages, slots_per_page * 584], uint8, rows kv_s0 apart
    slot,  # int64 >= 0, the destination slot (the caller has checked it)
    kv_s0,
    slots_per_page,  # P >= 1: the scale bytes start at P * PAYLOAD_BYTES
    NOPE_DIM: tl.constexpr, PAYLOAD_BYTES: tl.constexpr, SCALE_BYTES: tl.constexpr,
    PAIRS_BY_ONE_HOT: tl.constexpr, KV_FORMAT: tl.constexpr,
):
    """RMSNorm, quantise (``KV_FORMAT``: ``KV_FORMAT_CODES["int8"]`` or ``["fp8_e4m3"]``) and rotate
    one output's ``c`` and store its 584 bytes into ``slot``, page ``slot // P`` at offset
    ``slot % P`` (docs/CONTRACT.md, "Cache formats"). The page offset is int64.

    ``PAIRS_BY_ONE_HOT`` picks the RoPE pairs apart with one-hot maxima instead of a ``[32, 2]``
    split (see the module docstring); the bytes are the same either way.
    """
    g = tl.arange(0, 8)
    d2 = g[:, None] * 64 + tl.arange(0, 64)[None, :]  # [8, 64]
    rrms = inverse_rms(c8, eps)
    z = bf16_round(c8 * rrms * tl.load(weight_ptr + d2).to(tl.float32))  # [8, 64]
    if KV_FORMAT == 1:  # fp8_e4m3
        q, e = e4m3_groups(z)  # [8, 64] e4m3fn bytes, [8] exponents
    else:
        q, e = int8_groups(z)  # [8, 64] int32, [8] exponents

    page = slot // slots_per_page
    in_page = slot - page * slots_per_page
    page_ptr = kv_cache_ptr + page.to(tl.int64) * kv_s0
    payload = page_ptr + in_page * PAYLOAD_BYTES
    tl.store(payload + d2, (q & 0xFF).to(tl.uint8), mask=g[:, None] < 7)
    scale_bytes = tl.where(g < 7, tl.minimum(tl.maximum(e + 127, 0), 255), 0)  # byte 7: the pad
    scales = page_ptr + slots_per_page * PAYLOAD_BYTES + in_page * SCALE_BYTES
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
    pos, weight_ptr, eps, cos_sin_ptr, cs_s0, cs_s1, kv_cache_ptr, slot, kv_s0, slots_per_page,
    C: tl.constexpr, NOPE_DIM: tl.constexpr, PAYLOAD_BYTES: tl.constexpr, SCALE_BYTES: tl.constexpr,
    KV_FORMAT: tl.constexpr,
):
    """``store_format_slot_bytes`` for a ``[512]`` pooled ``c`` at position ``pos``, as the Ascend
    kernels hold it: reshaped to ``[8, 64]``, the RoPE dims picked by a reduction, the RoPE pairs by
    one-hot maxima, the cos/sin row of ``(pos // C) * C``."""
    c8 = tl.reshape(c, [8, 64])
    store_format_slot_bytes(c8, rope_row(c8), weight_ptr, eps, cos_sin_ptr + (pos // C) * C * cs_s0, cs_s1,
                            kv_cache_ptr, slot, kv_s0, slots_per_page, NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, True,
                            KV_FORMAT)
