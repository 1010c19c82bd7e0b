"""The conservative finalize of the Ascend route: quantisation from a real bf16 tensor.

On Ascend, fusing bf16 rounding, log2/exp2 scales, int8 casts and stride-2 RoPE stores into one
Triton kernel has been reported to produce INT8 byte mismatches; the reliable fix was a real
bf16 tensor, made by the framework's own cast, as the boundary before quantisation, then plain
tensor ops that CANN has mature kernels for. That is what this stage does, in few ops (each
framework op is one device launch, ~10-20 us of host time on an NPU): the scale exponent and
``2^e`` come from the bits of the group maximum (integer tensor ops), not from ``log2``/``exp2``,
whose results at exact powers of two a backend does not promise.
"""

from __future__ import annotations

import torch

from .. import reference
from ..layout import NOPE_DIM, NOPE_GROUPS, QUANT_GROUP, SCALE_BIAS, SCALE_BYTES

# For a bf16-valued float32 group maximum with bits b, the scale byte e + 127 of
# e = ceil(log2(max(amax, 1e-4) / 127)) is (max(b, _FLOOR_BITS) - _BITS_OFFSET) >> 23: adding 2^16
# carries into the exponent exactly when the 7-bit mantissa is all ones (then amax / 127 exceeds
# the next power of two down), and -6 turns amax's exponent into amax / 127's. Maxima below the
# 1e-4 floor all give e = -20, which the clamp to _FLOOR_BITS produces.
_FLOOR_EXPONENT = -20
_BITS_OFFSET = 6 * 2**23 - 2**16
_FLOOR_BITS = (_FLOOR_EXPONENT + SCALE_BIAS) * 2**23 + _BITS_OFFSET


def quantize_nope(y_bf16: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Real bf16 ``[N, 512]`` -> ``(q [N, 7, 64] int8, scale [N, 7, 1] int32 = e + 127)``; 7 ops.

    ``q = trunc(z / 2^e)``: division by a power of two is exact, ``|q| <= 127`` by the choice of
    ``e``, and the int8 cast truncates toward zero. ``scale`` is in [107, 250], so its low byte is
    the scale byte.
    """
    z = y_bf16[:, :NOPE_DIM].view(-1, NOPE_GROUPS, QUANT_GROUP)
    bits = z.abs().amax(dim=-1, keepdim=True).float().view(torch.int32)
    scale = (bits.clamp_min(_FLOOR_BITS) - _BITS_OFFSET) >> 23
    pow2 = (scale << 23).view(torch.float32)  # 2^e
    return (z / pow2).to(torch.int8), scale


def finalize_bytes(
    pooled: torch.Tensor,
    normalised: bool,
    rope_pos: torch.Tensor,
    args,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``pooled [N, 512]`` (c, or y when ``normalised``) -> ``(payload [N, 576], scales [N, 8])`` uint8.

    For the index_put rungs. Outputs that will be skipped may hold NaN; their bytes are computed
    and never copied.
    """
    y = pooled if normalised else reference.rms_norm(pooled, args.rms_norm_weight, args.rms_norm_eps)
    q, scale = quantize_nope(y.to(torch.bfloat16))
    rope = reference.rotate_rope(y, rope_pos, args.cos_sin_cache).to(torch.bfloat16)
    payload = torch.cat([q.view(-1, NOPE_DIM).view(torch.uint8), rope.view(torch.uint8)], dim=1)
    scales = torch.zeros(y.shape[0], SCALE_BYTES, dtype=torch.uint8, device=y.device)
    scales[:, :NOPE_GROUPS] = scale.view(-1, NOPE_GROUPS)
    return payload, scales


def finalize_rotated(y_rotated: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``y [N, 512]`` fp32 with its RoPE dims already rotated -> the byte sources of the scatter.

    One framework cast makes the real bf16 tensor; its RoPE half is the payload's bf16 bytes as
    they are. Returns ``(nope [N, 448] int8, y_bf16 [N, 512], scale [N, 7] int32)``; 8 ops.
    """
    y_bf16 = y_rotated.to(torch.bfloat16)
    q, scale = quantize_nope(y_bf16)
    return q.view(-1, NOPE_DIM), y_bf16, scale.view(-1, NOPE_GROUPS)
