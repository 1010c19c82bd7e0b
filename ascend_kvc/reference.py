"""Pure-PyTorch reference route: the official baseline's algorithm, step by step
(docs/CONTRACT.md, "What one output is").

It materialises the ``[N, C, 1024]`` window, takes the softmax over the window and reduces it,
exactly as the competition's PyTorch baseline does; every speed-up in this project is measured
against it. It imports no Triton and can compute in float64 (``dtype=torch.float64``).

It implements every cache format (``int8``, ``fp8_e4m3``, ``bf16``), any slots per page and the
overlapping ratio-4 compressor (a ``[N, 2C, 2048]`` window whose older rows give ``kv_a``/``score_a``
and newer rows ``kv_b``/``score_b``, rows at negative positions masked). The e4m3 bytes come from
torch's ``float8_e4m3fn`` conversion (round to nearest even), which the oracle does not use.
"""

from __future__ import annotations

import torch

from .indexing import OutputPlan, plan_for, window_blocks_and_offsets
from .layout import (
    AMAX_FLOOR,
    BF16_ROW,
    FP8_MAX,
    HEAD_DIM,
    NOPE_DIM,
    NOPE_GROUPS,
    QMAX,
    QUANT_GROUP,
    ROPE_PAIRS,
    SCALE_BIAS,
    SCALE_BYTES,
    slot_byte_columns,
    slots_per_page,
    window_rows,
)


def gather_window(
    state_cache: torch.Tensor, plan: OutputPlan, block_table: torch.Tensor, block_size: int, compress_ratio: int,
    overlap: bool = False,
) -> torch.Tensor:
    """Return the window rows, ``[N, C, 1024]`` (with overlap ``[N, 2C, 2048]``; invalid outputs and
    rows at negative positions get block 0's first row)."""
    window = window_rows(compress_ratio, overlap)
    block, offset = window_blocks_and_offsets(plan, block_table, block_size, compress_ratio, window)
    return state_cache[block, offset]


def overlap_window(rows: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """``[N, 2C, 2048]`` overlap rows -> ``[N, 2C, 1024]`` rows of (values, scores): the older ``C``
    rows' ``kv_a``/``score_a``, the newer ``C`` rows' ``kv_b``/``score_b``; a row at a negative
    position (``p - 2C + 1 + j < 0``) becomes value 0, score ``-inf``."""
    C = rows.shape[1] // 2
    older = torch.cat([rows[:, :C, :HEAD_DIM], rows[:, :C, 2 * HEAD_DIM:3 * HEAD_DIM]], dim=2)
    newer = torch.cat([rows[:, C:, HEAD_DIM:2 * HEAD_DIM], rows[:, C:, 3 * HEAD_DIM:]], dim=2)
    both = torch.cat([older, newer], dim=1)
    t = pos[:, None] - 2 * C + 1 + torch.arange(2 * C, device=pos.device)  # [N, 2C]
    masked = torch.tensor([0.0] * HEAD_DIM + [float("-inf")] * HEAD_DIM, dtype=rows.dtype, device=rows.device)
    return torch.where((t >= 0)[..., None], both, masked)


def pool_window(rows: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Per-dimension softmax over the window, then the weighted sum: ``[N, W, 1024] -> [N, 512]``."""
    rows = rows.to(dtype)
    values, scores = rows[..., :HEAD_DIM], rows[..., HEAD_DIM:]
    return (values * torch.softmax(scores, dim=1)).sum(dim=1)


def rms_norm(c: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``y = c * rsqrt(mean(c^2) + eps) * weight`` in ``c``'s dtype."""
    return c * torch.rsqrt(c.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.to(c.dtype)


def quantize_nope(y: torch.Tensor, exact_exponent: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """NOPE dims -> ``(int8 values [N, 448], exponents [N, 7])``, computed in ``y``'s dtype.

    ``z`` is ``y`` rounded to a real bf16 tensor (round to nearest even); each 64-dim group gets the
    power-of-two scale ``2^e`` with ``e = ceil(log2(max(amax, 1e-4) / 127))``; the int8 cast
    truncates toward zero. The default computes ``e`` and ``2^-e`` as the official baseline does,
    with ``log2``/``exp2``; ``exact_exponent`` (float32 only) derives both from the bits of the
    bf16-valued ``amax``, which is exact on any backend whatever its ``log2`` does at powers of two.
    """
    z = y[:, :NOPE_DIM].to(torch.bfloat16).to(y.dtype).view(-1, NOPE_GROUPS, QUANT_GROUP)
    amax = z.abs().amax(dim=-1, keepdim=True)
    if exact_exponent:
        exponent = _pow2_exponent_from_bits(amax)
        inv_scale = ((127 - exponent) << 23).view(torch.float32)
        exponent = exponent.to(y.dtype)
    else:
        exponent = torch.ceil(torch.log2(amax.clamp_min(AMAX_FLOOR) / QMAX))
        inv_scale = torch.exp2(-exponent)
    q = torch.trunc(torch.clamp(z * inv_scale, -QMAX, QMAX))
    return q.to(torch.int8).view(-1, NOPE_DIM), exponent.view(-1, NOPE_GROUPS)


def _pow2_exponent_from_bits(amax: torch.Tensor) -> torch.Tensor:
    """int32 ``ceil(log2(max(amax, 1e-4) / 127))`` for bf16-valued float32 ``amax >= 0``.

    ``amax = 1.m * 2^E`` with a 7-bit ``m``: ``amax / 127`` lies in ``(2^(E-7), 2^(E-6)]`` unless
    ``m = 127``, when it lies in ``(2^(E-6), 2^(E-5))``. Below the floor: ``ceil(log2(1e-4/127)) = -20``.
    """
    bits = amax.view(torch.int32)
    e = ((bits >> 23) & 0xFF) - (127 + 6) + (((bits >> 16) & 0x7F) == 0x7F).to(torch.int32)
    return torch.where(amax < AMAX_FLOOR, torch.full_like(e, -20), e)


def quantize_nope_e4m3(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """NOPE dims -> ``(e4m3fn bytes [N, 448] uint8, exponents [N, 7])`` (vLLM's ``fp8_ds_mla`` slot).

    ``z`` is ``y`` rounded to bf16; each 64-dim group gets ``2^e`` with ``e`` the least integer
    with ``448 * 2^e >= max(amax, 1e-4)``, found exactly from ``frexp`` (``ceil(log2(amax / 448))``
    without a logarithm); each value is ``clamp(z * 2^-e, -448, 448)`` converted by torch to
    ``float8_e4m3fn`` (round to nearest even).
    """
    z = y[:, :NOPE_DIM].to(torch.bfloat16).to(torch.float32).view(-1, NOPE_GROUPS, QUANT_GROUP)
    a = z.abs().amax(dim=-1, keepdim=True).clamp_min(AMAX_FLOOR)
    _, k = torch.frexp(a)  # a = m 2^k, m in [0.5, 1); 448 = 0.875 * 2^9, so e is k - 9 or k - 8
    exponent = torch.where(torch.ldexp(torch.full_like(a, FP8_MAX), k - 9) >= a, k - 9, k - 8)
    scaled = torch.clamp(z * torch.ldexp(torch.ones_like(a), -exponent), -FP8_MAX, FP8_MAX)
    q = scaled.to(torch.float8_e4m3fn).view(torch.uint8)
    return q.view(-1, NOPE_DIM), exponent.to(torch.float32).view(-1, NOPE_GROUPS)


def rotate_rope(y: torch.Tensor, rope_pos: torch.Tensor, cos_sin_cache: torch.Tensor) -> torch.Tensor:
    """GPT-J interleaved RoPE of dims 448..511 at position ``rope_pos``: ``[N, 64]`` in ``y``'s dtype."""
    if cos_sin_cache.shape[0] == 0:  # no row exists, so every output is invalid: rotate by zeros
        cos_sin_cache = cos_sin_cache.new_zeros(1, cos_sin_cache.shape[1])
    cos_sin = cos_sin_cache[rope_pos].to(y.dtype)
    cos, sin = cos_sin[:, :ROPE_PAIRS], cos_sin[:, ROPE_PAIRS:]
    u, w = y[:, NOPE_DIM::2], y[:, NOPE_DIM + 1 :: 2]
    return torch.stack([u * cos - w * sin, w * cos + u * sin], dim=-1).view(-1, 2 * ROPE_PAIRS)


def pack_slot_bytes(
    y: torch.Tensor, rope_pos: torch.Tensor, cos_sin_cache: torch.Tensor, exact_exponent: bool = False,
    kv_format: str = "int8",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalised ``y [N, 512]`` -> ``(payload [N, 576] uint8, scales [N, 8] uint8)`` of an ``int8``
    or ``fp8_e4m3`` slot."""
    if kv_format == "fp8_e4m3":
        q, exponent = quantize_nope_e4m3(y)
    else:
        q, exponent = quantize_nope(y, exact_exponent)
    rope = rotate_rope(y, rope_pos, cos_sin_cache).to(torch.bfloat16)
    payload = torch.cat([q.view(torch.uint8), rope.contiguous().view(torch.uint8)], dim=1)
    scales = torch.zeros(y.shape[0], SCALE_BYTES, dtype=torch.uint8, device=y.device)
    scales[:, :NOPE_GROUPS] = torch.clamp(exponent + SCALE_BIAS, 0, 255).to(torch.uint8)
    return payload, scales


def pack_bf16_row(y: torch.Tensor, rope_pos: torch.Tensor, cos_sin_cache: torch.Tensor) -> torch.Tensor:
    """Normalised ``y [N, 512]`` -> the ``bf16`` format's rows ``[N, 512]`` bfloat16: the NOPE dims
    of ``y`` and the rotated RoPE dims, each rounded to bf16 (nearest even)."""
    rope = rotate_rope(y, rope_pos, cos_sin_cache)
    return torch.cat([y[:, :NOPE_DIM], rope], dim=1).to(torch.bfloat16)


def scatter_bf16_rows(kv_cache: torch.Tensor, slots: torch.Tensor, rows: torch.Tensor) -> None:
    """Write each output's row into row ``slot`` of ``kv_cache.view(-1, 512)``; slot < 0 is skipped."""
    idx = (slots >= 0).nonzero().squeeze(1)  # one host sync, as for the byte scatter
    kv_cache.view(-1, BF16_ROW)[slots[idx]] = rows[idx]


def scatter_slot_bytes(
    kv_cache: torch.Tensor, slots: torch.Tensor, payload: torch.Tensor, scales: torch.Tensor
) -> None:
    """Write each output's 584 bytes into its slot with an index_put; outputs with slot < 0 are
    skipped. The page width says how many slots a page holds."""
    keep = slots >= 0
    page, columns = slot_byte_columns(torch.where(keep, slots, 0), slots_per_page(kv_cache))
    data = torch.cat([payload, scales], dim=1)
    # Dropping the skipped outputs needs their count: one host sync, which the baseline affords.
    idx = keep.nonzero().squeeze(1)
    kv_cache[page[idx], columns[idx]] = data[idx]


def compress(
    state_cache: torch.Tensor,
    plan: OutputPlan,
    block_table: torch.Tensor,
    rms_norm_weight: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    block_size: int,
    compress_ratio: int,
    rms_norm_eps: float,
    dtype: torch.dtype = torch.float32,
    overlap: bool = False,
) -> torch.Tensor:
    """The pooled and normalised ``y [N, 512]`` of every output."""
    rows = gather_window(state_cache, plan, block_table, block_size, compress_ratio, overlap)
    if overlap:
        rows = overlap_window(rows, plan.pos)
    return rms_norm(pool_window(rows, dtype), rms_norm_weight, rms_norm_eps)


def run(args, route_name: str, plan: OutputPlan | None, out: torch.Tensor) -> None:
    """Route entry point: compute every output and write the valid ones into ``out``."""
    if plan is None:
        plan = plan_for(args)
    y = compress(
        args.state_cache, plan, args.block_table, args.rms_norm_weight, args.cos_sin_cache,
        args.block_size, args.compress_ratio, args.rms_norm_eps, overlap=args.overlap,
    )
    if args.kv_format == "bf16":
        scatter_bf16_rows(out, plan.slot, pack_bf16_row(y, plan.rope_pos, args.cos_sin_cache))
        return
    payload, scales = pack_slot_bytes(y, plan.rope_pos, args.cos_sin_cache, kv_format=args.kv_format)
    scatter_slot_bytes(out, plan.slot, payload, scales)
