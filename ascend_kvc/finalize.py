"""The conservative finalize of the Ascend route: quantisation and RoPE from a real bf16 tensor.

On Ascend, fusing bf16 rounding, log2/exp2 scales, int8 casts and stride-2 RoPE stores into one
Triton kernel has produced INT8 byte mismatches (ASCEND.md); the reliable fix was a real bf16
tensor as the boundary before quantisation, with plain tensor ops that CANN has mature kernels
for. That is what this stage does; its output is bytes for the scatter to copy. The scale
exponent and ``2^-e`` come from the bits of the bf16 group maximum (integer tensor ops), not from
``log2``/``exp2``, whose results at exact powers of two a backend does not promise.
"""

from __future__ import annotations

import torch

from . import reference


def finalize_bytes(
    pooled: torch.Tensor,
    normalised: bool,
    rope_pos: torch.Tensor,
    args,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``pooled [N, 512]`` (c, or y when ``normalised``) -> ``(payload [N, 576], scales [N, 8])`` uint8.

    Outputs that will be skipped may hold NaN; their bytes are computed and never copied.
    """
    y = pooled if normalised else reference.rms_norm(pooled, args.rms_norm_weight, args.rms_norm_eps)
    return reference.pack_slot_bytes(y, rope_pos, args.cos_sin_cache, exact_exponent=True)
