"""The correctness oracle: an independent float64 truth, byte-exact wherever the math is unambiguous.

The truth shares no code with the routes it judges. It imports only the layout constants and
implements the operator's contract from scratch in float64: its own index resolution (which
outputs are written, and where), its own window gather, softmax, RMSNorm, bf16 rounding, scale
exponent (exact comparisons against ``127 * 2^e``, no ``log2``), RoPE and byte packing (bf16 bits
split into little-endian bytes by integer arithmetic). A bug in a shared route helper therefore
cannot hide in the truth as well.

Each pre-rounding value is known to within a tolerance: 1e-5 of itself, plus what fp32
summation of the softmax-weighted window can lose to cancellation (a few ulps times sqrt(C) of
the sum of |terms|). The bf16 values, int8 values and scale exponents that any point of that
interval rounds to form the acceptable set:

- where the interval rounds to one result (almost everywhere), the bytes must be exactly that;
- near a bf16 rounding midpoint or where ``amax / 127`` is near a power of two, both neighbours
  pass (one step; a group's int8 values are judged at the group's written scale);
- where cancellation leaves a value small next to its terms (a RoPE output ``u cos - w sin``
  close to 0, say), every result inside the tolerance passes, which can be more than one step.

Outputs outside float32's range (docs/CONTRACT.md, "Range": a window sum, the pooled vector's sum
of squares, y or a RoPE product reaching ``RANGE_LIMIT = 2^127``, or a NaN anywhere in their math)
are not judged: the contract promises nothing for their bytes but that they stay in their own
slot. ``OracleReport.out_of_range`` counts them; which outputs they are depends on the inputs only.

The cache formats (docs/CONTRACT.md, "Cache formats") are judged the same way: ``fp8_e4m3``
values by the oracle's own e4m3 rounding (``e4m3_round_f64``, nearest even, subnormals kept,
bits by integer arithmetic; never torch's float8 conversion) at the slot's written scale, whose
exponent interval is taken against 448 instead of 127; the ``bf16`` format's 512 values each
within the bf16 rounding of their interval. A nonzero e4m3 value's sign is its truth's sign, and
so is a zero's when the whole interval lies on one side of 0 (``-tiny`` is ``0x80``). Every slot
address follows the cache's ``P`` slots a page. With overlap, the window is ``2C`` rows whose
rows at negative positions are masked.

Placement, pad and untouched bytes are always exact. The bytes shown in messages are the
truth's own: the float64 values rounded once (``Truth.expected``). Two written outputs sharing a
slot (possible with ``validate=False`` only) make each byte of that slot acceptable if it is
acceptable for any of the writers. Tests and benchmarks both use this module.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .layout import (
    AMAX_FLOOR,
    BF16_ROW,
    BF16_ROW_BYTES,
    E4M3_EXPONENT_BIAS,
    E4M3_MANTISSA_BITS,
    E4M3_MIN_NORMAL_EXPONENT,
    FP8_MAX,
    HEAD_DIM,
    NOPE_DIM,
    NOPE_GROUPS,
    PAYLOAD_BYTES,
    QMAX,
    QUANT_GROUP,
    ROPE_PAIRS,
    SCALE_BIAS,
    SCALE_BYTES,
    SLOT_BYTES,
    format_qmax,
    num_slots,
    slots_per_page,
    window_rows,
)

REL_TOL = 1.0e-5  # relative to the value itself
# fp32 error of a C-term softmax-weighted sum grows like sqrt(C) ulps of the sum of |terms|; the
# part of a value's tolerance that comes from cancellation in that sum.
SUM_TOL_PER_SQRT_TERM = 2.0e-7
# Half of float32's range (its largest value is just under 2^128): the contract covers an output
# while its window sums, sum of squares, mean square + eps, y and RoPE products stay below this,
# whatever the summation order and rounding of a float32 route.
RANGE_LIMIT = 2.0**127
# Window rows materialised at once in float64 (8 KiB each): bounds the truth's memory.
_ROWS_PER_CHUNK = 1 << 16


@dataclass
class OracleReport:
    ok: bool
    num_outputs_written: int
    ambiguous_elements: int  # values and scales whose truth interval admits more than one result
    ambiguous_differences: int  # bytes that differ from the truth's own bytes yet lie inside its tolerance
    first_mismatch: str = ""
    mismatches: int = 0
    notes: list[str] = field(default_factory=list)
    out_of_range: int = 0  # written outputs outside float32's range: only their placement is judged

    def __str__(self) -> str:
        head = "ok" if self.ok else f"MISMATCH ({self.mismatches} bytes): {self.first_mismatch}"
        tail = f"; {self.out_of_range} outputs outside float32's range, not judged" if self.out_of_range else ""
        return (
            f"{head}; {self.num_outputs_written} outputs written, {self.ambiguous_elements} ambiguous elements, "
            f"{self.ambiguous_differences} bytes differ from the float64 truth's bytes inside its tolerance{tail}"
        )


# --- exact float64 helpers ---------------------------------------------------------------------

def bf16_round_f64(x: torch.Tensor) -> torch.Tensor:
    """Round float64 ``x`` to the nearest bf16 value (ties to even), exactly, as float64."""
    _, exp = torch.frexp(x)  # |x| = m * 2^exp, m in [0.5, 1)
    ulp = torch.ldexp(torch.ones_like(x), exp - 8)  # bf16 keeps 8 significant bits
    return torch.round(x / ulp) * ulp  # x / ulp is exact; torch.round rounds half to even


def e4m3_round_f64(x: torch.Tensor) -> torch.Tensor:
    """Round float64 ``x`` with ``|x| <= 448`` to the nearest OCP e4m3fn value (ties to even), as float64.

    A normal value ``1.mmm * 2^E`` (``E >= -6``) keeps 4 significant bits, so its step is
    ``2^(E - 3)``; below ``2^-6`` the subnormals are spaced ``2^-9`` apart. The sign of a value that
    rounds to zero is kept (``-tiny`` becomes ``-0``).
    """
    _, k = torch.frexp(x)  # |x| = m * 2^k, m in [0.5, 1): E = k - 1
    ulp = torch.ldexp(torch.ones_like(x), (k - 1).clamp_min(E4M3_MIN_NORMAL_EXPONENT) - E4M3_MANTISSA_BITS)
    return torch.round(x / ulp) * ulp


def e4m3_bits(values: torch.Tensor) -> torch.Tensor:
    """e4m3-exact float64 -> int64 bit patterns ``s eeee mmm`` (bias 7; exponent field 0: subnormal)."""
    sign = torch.signbit(values).long() << 7
    a = values.abs()
    _, k = torch.frexp(a)
    normal = a >= 2.0**E4M3_MIN_NORMAL_EXPONENT
    field_e = torch.where(normal, k - 1 + E4M3_EXPONENT_BIAS, torch.zeros_like(k)).long()
    mant = torch.where(normal, torch.ldexp(a, 1 - k) * 8 - 8, a * 2.0**(E4M3_MANTISSA_BITS - E4M3_MIN_NORMAL_EXPONENT))
    return sign | (field_e << E4M3_MANTISSA_BITS) | mant.long()


def e4m3_value(byte: torch.Tensor) -> torch.Tensor:
    """uint8 e4m3fn bit patterns -> float64 values (``0x7f``/``0xff`` are NaN; ``0x80`` is -0)."""
    b = byte.long()
    e, m = (b >> 3) & 0xF, (b & 7).double()
    mag = torch.where(e == 0, m * 2.0**-9, torch.ldexp(1 + m / 8, e - E4M3_EXPONENT_BIAS))
    mag = torch.where((e == 15) & (b & 7 == 7), torch.full_like(mag, float("nan")), mag)
    return torch.where(b & 0x80 != 0, -mag, mag)


def scale_exponent_f64(amax: torch.Tensor, qmax: float = QMAX) -> torch.Tensor:
    """``ceil(log2(max(amax, 1e-4) / qmax))`` as float64, without a logarithm.

    It is the least integer ``e`` with ``qmax * 2^e >= a``. With ``a = m * 2^k`` and
    ``qmax = q * 2^j`` (``m, q in [0.5, 1)``): ``qmax * 2^(k-j-1) < 2^(k-1) <= a < 2^k <=
    qmax * 2^(k-j+1)``, so ``e`` is ``k - j`` or ``k - j + 1``, and one exact comparison (``ldexp``
    of ``qmax``) decides which. ``qmax`` is 127 (int8) or 448 (e4m3).
    """
    a = amax.clamp_min(AMAX_FLOOR)
    _, k = torch.frexp(a)
    j = math.frexp(qmax)[1]
    low = (k - j).to(torch.float64)
    return torch.where(torch.ldexp(torch.full_like(a, float(qmax)), k - j) >= a, low, low + 1)


def bf16_le_bytes(values: torch.Tensor) -> torch.Tensor:
    """bf16-exact float64 ``[..., K]`` -> ``[..., 2K]`` uint8, each value's bits low byte first."""
    bits = values.to(torch.bfloat16).view(torch.int16).to(torch.int32) & 0xFFFF  # exact: already bf16
    return torch.stack([bits & 0xFF, bits >> 8], dim=-1).flatten(-2).to(torch.uint8)


def _bf16_values(le_bytes: torch.Tensor) -> torch.Tensor:
    """``[..., 2K]`` uint8 little-endian bf16 -> ``[..., K]`` float64."""
    bits = le_bytes[..., 0::2].to(torch.int32) | (le_bytes[..., 1::2].to(torch.int32) << 8)
    bits = torch.where(bits >= 0x8000, bits - 0x10000, bits).to(torch.int16)
    return bits.view(torch.bfloat16).to(torch.float64)


def _quantise(z: torch.Tensor, exponent: torch.Tensor, kv_format: str) -> torch.Tensor:
    """``z [M, 7, 64]`` at the scale ``2^exponent [M, 7]``: int8 (clamp to 127, truncate) or e4m3
    (clamp to 448, round to nearest even), as float64."""
    scaled = z * torch.exp2(-exponent)[..., None]
    if kv_format == "fp8_e4m3":
        return e4m3_round_f64(torch.clamp(scaled, -FP8_MAX, FP8_MAX))
    return torch.trunc(torch.clamp(scaled, -QMAX, QMAX))


# --- which outputs are written, and where ---------------------------------------------------------

@dataclass
class _Resolved:
    written: torch.Tensor  # [N] bool: every index in range and slot >= 0
    slot: torch.Tensor  # [N] int64
    pos: torch.Tensor  # [N] int64
    block: torch.Tensor  # [N, W] int64: physical block of each window row (0 where not written or masked)
    row: torch.Tensor  # [N, W] int64: row inside that block
    present: torch.Tensor  # [N, W] bool: the row's position is >= 0 (overlap masks the others)


def _resolve(args) -> _Resolved:
    """Follow every output's indices through the tensors, row by row of its window."""
    C, bs = args.compress_ratio, args.block_size
    W = window_rows(C, getattr(args, "overlap", False))
    b = args.boundary_token_indices.long()
    dev = b.device
    n = b.shape[0]
    num_tokens = args.token_to_req.shape[0]
    num_reqs, width = args.block_table.shape
    if num_tokens == 0 or num_reqs == 0 or width == 0 or args.state_cache.shape[0] == 0:
        zeros = torch.zeros(n, W, dtype=torch.long, device=dev)
        return _Resolved(torch.zeros(n, dtype=torch.bool, device=dev), zeros[:, 0] - 1, zeros[:, 0], zeros, zeros,
                         zeros.bool())
    in_tokens = (b >= 0) & (b < num_tokens)
    tok = torch.where(in_tokens, b, torch.zeros_like(b))
    slot = args.kv_slot_mapping.long()[tok]
    req = args.token_to_req.long()[tok]
    pos = args.positions.long()[tok]
    written = in_tokens & (slot >= 0) & (slot < num_slots(args.kv_cache))
    written &= (req >= 0) & (req < num_reqs)
    written &= (pos >= C - 1) & (torch.div(pos, C, rounding_mode="floor") * C < args.cos_sin_cache.shape[0])
    t = pos[:, None] - (W - 1) + torch.arange(W, device=dev)  # [N, W] window positions
    present = t >= 0
    col = torch.div(t, bs, rounding_mode="floor")
    written &= ((col >= 0) & (col < width) | ~present).all(dim=1)
    block = args.block_table.long()[req.clamp(0, num_reqs - 1)[:, None], col.clamp(0, width - 1)]
    written &= ((block >= 0) & (block < args.state_cache.shape[0]) | ~present).all(dim=1)
    keep = written[:, None] & present
    return _Resolved(written, slot, pos, torch.where(keep, block, 0), torch.where(keep, t - col * bs, 0),
                     present & written[:, None])


# --- the truth -----------------------------------------------------------------------------------

@dataclass
class Truth:
    """The float64 truth of every written output, as intervals of acceptable results.

    Each value is known to within a tolerance (the spread two correct fp32 implementations can
    have); every bf16/int8/e4m3 result any point of that interval rounds to is acceptable. Where the
    interval holds one result, only that exact byte pattern passes.
    """

    outputs: torch.Tensor  # [M] indices of written outputs
    slots: torch.Tensor  # [M]
    expected: torch.Tensor  # [M, 584] uint8 (bf16 format: [M, 1024]): the float64 values rounded once
    z_lo: torch.Tensor  # [M, 448] float64: bf16 z interval of each NOPE value
    z_hi: torch.Tensor
    e_lo: torch.Tensor  # [M, 7] float64: scale exponent interval of each group
    e_hi: torch.Tensor
    rope_lo: torch.Tensor  # [M, 64] float64: bf16 interval of each rotated value
    rope_hi: torch.Tensor
    in_range: torch.Tensor  # [M] bool: inside float32's range, so judged (docs/CONTRACT.md, "Range")
    kv_format: str = "int8"
    slots_per_page: int = 64

    def ambiguous_elements(self) -> int:
        judged = self.in_range[:, None]
        scales = 0 if self.kv_format == "bf16" else ((self.e_lo != self.e_hi) & judged).sum()
        return int(((self.z_lo != self.z_hi) & judged).sum() + scales
                   + ((self.rope_lo != self.rope_hi) & judged).sum())


def _pooled_f64(args, res: _Resolved, outputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(c, sum_j w_j |v_j|, max_d sum_j |v_j[d]|)`` in float64 for ``outputs``, window by window in
    bounded chunks. The last bounds every partial sum a float32 softmax accumulation can form
    (its weights are at most 1).

    With overlap the window's older ``C`` rows give ``kv_a``/``score_a`` (state columns 0..511 and
    1024..1535), its newer ``C`` rows ``kv_b``/``score_b`` (512..1023 and 1536..2047); rows at negative
    positions count as score ``-inf``, value 0."""
    C = args.compress_ratio
    overlap = getattr(args, "overlap", False)
    W = window_rows(C, overlap)
    c = torch.empty(outputs.numel(), HEAD_DIM, dtype=torch.float64, device=outputs.device)
    mag = torch.empty_like(c)
    window_sum = torch.empty(outputs.numel(), dtype=torch.float64, device=outputs.device)
    step = max(1, _ROWS_PER_CHUNK // W)
    for start in range(0, outputs.numel(), step):
        idx = outputs[start:start + step]
        rows = args.state_cache[res.block[idx], res.row[idx]].to(torch.float64)  # [n, W, 1024 or 2048]
        if overlap:
            values = torch.cat([rows[:, :C, :HEAD_DIM], rows[:, C:, HEAD_DIM:2 * HEAD_DIM]], dim=1)
            scores = torch.cat([rows[:, :C, 2 * HEAD_DIM:3 * HEAD_DIM], rows[:, C:, 3 * HEAD_DIM:]], dim=1)
            present = res.present[idx][..., None]
            values = torch.where(present, values, 0.0)
            scores = torch.where(present, scores, float("-inf"))
        else:
            values, scores = rows[..., :HEAD_DIM], rows[..., HEAD_DIM:]
        e = torch.exp(scores - scores.amax(dim=1, keepdim=True))
        weights = e / e.sum(dim=1, keepdim=True)
        c[start:start + step] = (weights * values).sum(dim=1)
        mag[start:start + step] = (weights * values.abs()).sum(dim=1)
        window_sum[start:start + step] = values.abs().sum(dim=1).amax(dim=1)
    return c, mag, window_sum


def compute_truth(args) -> Truth:
    """The float64 truth of every output the contract says is written (``args``: checked arguments)."""
    kv_format = getattr(args, "kv_format", "int8")
    res = _resolve(args)
    outputs = res.written.nonzero().squeeze(1)
    c, c_mag, window_sum = _pooled_f64(args, res, outputs)
    weight = args.rms_norm_weight.to(torch.float64)
    sum_sq = (c * c).sum(dim=1, keepdim=True)
    rrms = 1.0 / torch.sqrt(sum_sq / HEAD_DIM + args.rms_norm_eps)
    y = c * rrms * weight
    terms = window_rows(args.compress_ratio, getattr(args, "overlap", False))
    tol = REL_TOL * y.abs() + SUM_TOL_PER_SQRT_TERM * terms ** 0.5 * c_mag * rrms * weight.abs()

    # NOPE: bf16 z, one power-of-two exponent per 64-dim group, int8 (truncating) or e4m3 (nearest even).
    qmax = format_qmax(kv_format)
    y_nope, t_nope = y[:, :NOPE_DIM], tol[:, :NOPE_DIM]
    z = bf16_round_f64(y_nope)
    z_lo, z_hi = bf16_round_f64(y_nope - t_nope), bf16_round_f64(y_nope + t_nope)
    straddles = (z_lo <= 0) & (z_hi >= 0)
    abs_lo = torch.where(straddles, torch.zeros_like(z_lo), torch.minimum(z_lo.abs(), z_hi.abs()))
    abs_hi = torch.maximum(z_lo.abs(), z_hi.abs())
    e_lo = scale_exponent_f64(abs_lo.view(-1, NOPE_GROUPS, QUANT_GROUP).amax(dim=-1), qmax)
    e_hi = scale_exponent_f64(abs_hi.view(-1, NOPE_GROUPS, QUANT_GROUP).amax(dim=-1), qmax)
    e = scale_exponent_f64(z.abs().view(-1, NOPE_GROUPS, QUANT_GROUP).amax(dim=-1), qmax)
    q = _quantise(z.view(-1, NOPE_GROUPS, QUANT_GROUP), e, kv_format)

    # RoPE: GPT-J pairs (448 + 2k, 449 + 2k) rotated by the angle of row (p // C) * C.
    rope_row = torch.div(res.pos[outputs], args.compress_ratio, rounding_mode="floor") * args.compress_ratio
    cs = args.cos_sin_cache[rope_row].to(torch.float64)
    cos, sin = cs[:, :ROPE_PAIRS], cs[:, ROPE_PAIRS:]
    u, w = y[:, NOPE_DIM::2], y[:, NOPE_DIM + 1 :: 2]
    rope = torch.stack([u * cos - w * sin, w * cos + u * sin], dim=-1).flatten(1)
    # float32's range (NaN compares False, so a NaN anywhere counts as outside).
    largest_term = torch.maximum(u.abs(), w.abs()) * torch.maximum(cos.abs(), sin.abs())
    in_range = ((window_sum < RANGE_LIMIT) & (sum_sq[:, 0] < RANGE_LIMIT)
                & (sum_sq[:, 0] / HEAD_DIM + args.rms_norm_eps < RANGE_LIMIT)
                & (y.abs() < RANGE_LIMIT).all(dim=1) & (largest_term < RANGE_LIMIT).all(dim=1))
    tu, tw = tol[:, NOPE_DIM::2], tol[:, NOPE_DIM + 1 :: 2]
    rope_tol = torch.stack([tu * cos.abs() + tw * sin.abs(), tw * cos.abs() + tu * sin.abs()], dim=-1).flatten(1)
    rope_tol = rope_tol + REL_TOL * rope.abs()

    m = outputs.numel()
    if kv_format == "bf16":
        expected = bf16_le_bytes(torch.cat([z, bf16_round_f64(rope)], dim=1))  # [M, 1024]
    else:
        expected = torch.zeros(m, SLOT_BYTES, dtype=torch.uint8, device=outputs.device)
        nope = e4m3_bits(q) if kv_format == "fp8_e4m3" else q.to(torch.int16).bitwise_and(0xFF)
        expected[:, :NOPE_DIM] = nope.view(m, NOPE_DIM).to(torch.uint8)
        expected[:, NOPE_DIM:PAYLOAD_BYTES] = bf16_le_bytes(bf16_round_f64(rope))
        expected[:, PAYLOAD_BYTES:PAYLOAD_BYTES + NOPE_GROUPS] = torch.clamp(e + SCALE_BIAS, 0, 255).to(torch.uint8)
    return Truth(
        outputs=outputs, slots=res.slot[outputs], expected=expected,
        z_lo=z_lo, z_hi=z_hi, e_lo=e_lo, e_hi=e_hi,
        rope_lo=bf16_round_f64(rope - rope_tol), rope_hi=bf16_round_f64(rope + rope_tol), in_range=in_range,
        kv_format=kv_format, slots_per_page=slots_per_page(args.kv_cache),
    )


# --- judging a written cache -----------------------------------------------------------------------

def slot_columns(slots: torch.Tensor, slots_per_page: int = 64,
                 kv_format: str = "int8") -> tuple[torch.Tensor, torch.Tensor]:
    """``(row [M, 1], columns [M, W])`` of each slot in the cache's byte rows (``cache_bytes``): for
    the 584-byte formats the page and its payload bytes, then its scale bytes; for bf16 the slot's
    own row of 1024 bytes."""
    if kv_format == "bf16":
        return slots[:, None], torch.arange(BF16_ROW_BYTES, device=slots.device).expand(slots.numel(), -1)
    page = torch.div(slots, slots_per_page, rounding_mode="floor")
    o = slots - page * slots_per_page
    payload = (o * PAYLOAD_BYTES)[:, None] + torch.arange(PAYLOAD_BYTES, device=slots.device)
    scales = ((slots_per_page * PAYLOAD_BYTES + o * SCALE_BYTES)[:, None]
              + torch.arange(SCALE_BYTES, device=slots.device))
    return page[:, None], torch.cat([payload, scales], dim=1)


def cache_bytes(cache: torch.Tensor) -> torch.Tensor:
    """A cache as 2-D uint8 rows: a uint8 page cache itself; a bf16 cache as ``[slots, 1024]`` bytes."""
    if cache.dtype == torch.bfloat16:
        return cache.contiguous().view(-1, BF16_ROW).view(torch.uint8)
    return cache


def _sign_ok(got_values: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """An e4m3 value's sign bit must be its interval's when the interval lies on one side of 0
    (its rounded ends share a sign bit, so ``-tiny`` must be written ``-0``, ``0x80``)."""
    lo_neg, hi_neg = torch.signbit(lo), torch.signbit(hi)
    return (lo_neg != hi_neg) | (torch.signbit(got_values) == lo_neg)


def _acceptable(slot_bytes: torch.Tensor, truth: Truth, writer_scale: bool = False) -> torch.Tensor:
    """[M, 584] (bf16: [M, 1024]) bool: whether each byte belongs to a value inside its truth interval.

    int8 and e4m3 values are judged at the scale written in the slot; with ``writer_scale`` (a slot
    that several outputs wrote, whose bytes may mix) at any scale of their own output's interval.
    """
    ok = torch.zeros_like(slot_bytes, dtype=torch.bool)
    if truth.kv_format == "bf16":
        values = _bf16_values(slot_bytes)  # [M, 512]
        nope_ok = (values[:, :NOPE_DIM] >= truth.z_lo) & (values[:, :NOPE_DIM] <= truth.z_hi)
        rope_ok = (values[:, NOPE_DIM:] >= truth.rope_lo) & (values[:, NOPE_DIM:] <= truth.rope_hi)
        return torch.cat([nope_ok, rope_ok], dim=1).repeat_interleave(2, dim=1)
    # Scales: the exponent within its interval; the pad byte exactly 0.
    scale_cols = slice(PAYLOAD_BYTES, PAYLOAD_BYTES + NOPE_GROUPS)
    e = slot_bytes[:, scale_cols].to(torch.float64) - SCALE_BIAS
    scale_ok = (e >= truth.e_lo) & (e <= truth.e_hi)
    ok[:, scale_cols] = scale_ok
    ok[:, PAYLOAD_BYTES + NOPE_GROUPS :] = slot_bytes[:, PAYLOAD_BYTES + NOPE_GROUPS :] == 0
    # NOPE values: inside the interval the z interval quantises to, at the slot's own scale.
    nope = slot_bytes[:, :NOPE_DIM]
    if truth.kv_format == "fp8_e4m3":
        q = e4m3_value(nope).view(-1, NOPE_GROUPS, QUANT_GROUP)
    else:
        q = nope.view(torch.int8).to(torch.float64).view(-1, NOPE_GROUPS, QUANT_GROUP)

    def quantised_within(exponent):
        q_lo = _quantise(truth.z_lo.view_as(q), exponent, truth.kv_format)
        q_hi = _quantise(truth.z_hi.view_as(q), exponent, truth.kv_format)
        inside = (q >= q_lo) & (q <= q_hi)
        return inside & _sign_ok(q, q_lo, q_hi) if truth.kv_format == "fp8_e4m3" else inside

    if writer_scale:
        q_ok = quantised_within(truth.e_lo) | quantised_within(truth.e_hi)
    else:
        q_ok = quantised_within(e) & scale_ok[:, :, None]
    ok[:, :NOPE_DIM] = q_ok.view(-1, NOPE_DIM)
    # bf16 RoPE values, little-endian: inside their interval (NaN never is).
    rope = _bf16_values(slot_bytes[:, NOPE_DIM:PAYLOAD_BYTES])
    rope_ok = (rope >= truth.rope_lo) & (rope <= truth.rope_hi)
    ok[:, NOPE_DIM:PAYLOAD_BYTES] = rope_ok.repeat_interleave(2, dim=1)
    return ok


def _truth_of(truth: Truth, i: int, j: int) -> str:
    """What the float64 truth allows for byte ``j`` of written output ``i``, for messages."""
    if truth.kv_format == "bf16":
        k = j // 2
        lo, hi = (truth.z_lo, truth.z_hi) if k < NOPE_DIM else (truth.rope_lo, truth.rope_hi)
        k = k if k < NOPE_DIM else k - NOPE_DIM
        return f" (bf16 value in [{lo[i, k].item():.6g}, {hi[i, k].item():.6g}])"
    if j < NOPE_DIM:
        return f" (bf16 z in [{truth.z_lo[i, j].item():.6g}, {truth.z_hi[i, j].item():.6g}])"
    if j < PAYLOAD_BYTES:
        k = (j - NOPE_DIM) // 2
        return f" (bf16 value in [{truth.rope_lo[i, k].item():.6g}, {truth.rope_hi[i, k].item():.6g}])"
    if j < PAYLOAD_BYTES + NOPE_GROUPS:
        g = j - PAYLOAD_BYTES
        return f" (exponent in [{int(truth.e_lo[i, g])}, {int(truth.e_hi[i, g])}])"
    return " (pad byte)"


def _region(j: int, kv_format: str = "int8") -> str:
    if kv_format == "bf16":
        return "bf16 NOPE" if j < 2 * NOPE_DIM else "bf16 RoPE"
    if j < NOPE_DIM:
        return "e4m3 NOPE" if kv_format == "fp8_e4m3" else "int8 NOPE"
    if j < PAYLOAD_BYTES:
        return "bf16 RoPE"
    return "scale" if j < PAYLOAD_BYTES + NOPE_GROUPS else "pad"


def check_cache(args, got: torch.Tensor, before: torch.Tensor, truth: Truth | None = None) -> OracleReport:
    """Compare a written cache ``got`` with what the contract says it must hold.

    ``before`` is what the cache held before the call: zeros for ``out=None``, the original bytes
    for an in-place write. Every byte outside the written slots must keep its ``before`` value.
    """
    truth = truth or compute_truth(args)
    got, before = cache_bytes(got), cache_bytes(before)
    width = truth.expected.shape[1]
    notes = []
    page, cols = slot_columns(truth.slots, truth.slots_per_page, truth.kv_format)
    got_slots = got[page, cols]
    judged = truth.in_range[:, None]
    bad_in_slots = ~_acceptable(got_slots, truth) & judged
    slot_mask = torch.zeros_like(got, dtype=torch.bool)
    slot_mask[page, cols] = True
    bad_outside = (got != before) & ~slot_mask

    # A slot written by several outputs: a byte passes if it passes for any of them.
    unique, inverse, counts = torch.unique(truth.slots, return_inverse=True, return_counts=True)
    if bool((counts > 1).any()):
        notes.append(f"{int((counts > 1).sum())} slots are written by more than one output")
        # Bytes of a shared slot may mix writers, so int8 values are judged at their own output's
        # scales, not at the scale byte that happens to be in the slot.
        shared = (counts > 1)[inverse]
        bad_mixed = ~_acceptable(got_slots, truth, writer_scale=True) & judged
        bad_in_slots = torch.where(shared[:, None], bad_mixed, bad_in_slots)
        still_bad = torch.ones(unique.numel(), width, dtype=torch.int32, device=got.device)
        still_bad.scatter_reduce_(0, inverse[:, None].expand(-1, width), bad_in_slots.to(torch.int32), "amin")
        first_writer = torch.arange(inverse.numel(), device=got.device) == _first_index(inverse)
        bad_in_slots = still_bad[inverse].bool() & first_writer[:, None]  # count each slot once

    amb_count = truth.ambiguous_elements()
    amb_diff = int(((got_slots != truth.expected) & ~bad_in_slots & judged).sum())
    out_of_range = int((~truth.in_range).sum())
    if out_of_range:
        notes.append(f"{out_of_range} written outputs are outside float32's range: only their placement is judged")
    mismatches = int(bad_in_slots.sum() + bad_outside.sum())
    first = ""
    if bool(bad_in_slots.any()):
        # Name a byte that differs where there is one: a wrong scale also fails its group's values.
        differing = bad_in_slots & (got_slots != truth.expected)
        i, j = (differing if bool(differing.any()) else bad_in_slots).nonzero()[0].tolist()
        first = (
            f"output {truth.outputs[i].item()} (slot {truth.slots[i].item()}) byte {j} "
            f"[{_region(j, truth.kv_format)}]: got {got_slots[i, j].item()}, expected {truth.expected[i, j].item()}"
            f"{_truth_of(truth, i, j)}"
        )
    elif bool(bad_outside.any()):
        p, c = bad_outside.nonzero()[0].tolist()
        P = truth.slots_per_page
        if truth.kv_format == "bf16":
            where = f"slot {p}"
        else:
            in_page = c // PAYLOAD_BYTES if c < P * PAYLOAD_BYTES else (c - P * PAYLOAD_BYTES) // SCALE_BYTES
            where = f"slot {p * P + in_page}"
        first = (
            f"byte [{p}, {c}] ({where}) is not a written slot's byte but changed: "
            f"got {got[p, c].item()}, expected {before[p, c].item()}"
        )
    return OracleReport(
        ok=mismatches == 0, num_outputs_written=int(truth.outputs.numel()), ambiguous_elements=amb_count,
        ambiguous_differences=amb_diff, first_mismatch=first, mismatches=mismatches, notes=notes,
        out_of_range=out_of_range,
    )


def _first_index(inverse: torch.Tensor) -> torch.Tensor:
    """For each position, the first position holding the same group id (so a slot counts once)."""
    n = inverse.numel()
    first = torch.full((int(inverse.max()) + 1,), n, dtype=torch.long, device=inverse.device)
    first.scatter_reduce_(0, inverse, torch.arange(n, device=inverse.device), "amin")
    return first[inverse]
