"""The byte layout of one compressed-KV slot: the one place that spells these numbers.

Three cache formats (``kv_format``) exist, the ones DeepSeek-V4 serving engines keep:

- ``"int8"`` (the default) and ``"fp8_e4m3"`` share the 584-byte slot. A page holds ``P`` slots
  (``SLOTS_PER_PAGE = 64`` by default, any ``P >= 1``; a page row is ``P * 584`` bytes, so
  ``P = kv_cache.shape[1] // 584``). Its first ``P * PAYLOAD_BYTES`` bytes are the payloads, one
  after another; the scale bytes of all slots follow::

      page = [payload slot 0 | ... | payload slot P-1 | scales slot 0 | ... | scales slot P-1]
      payload = [448 x int8 or e4m3 NOPE][64 x bf16 RoPE, little-endian]   (576 bytes)
      scales  = [7 x uint8 exponent + 127][1 x 0 pad]                      (8 bytes)

  Slot ``s`` is page ``s // P``, offset ``o = s % P``: payload at ``o * 576``, scales at
  ``P * 576 + o * 8``. ``fp8_e4m3`` is vLLM's ``fp8_ds_mla`` slot (OCP e4m3fn values, UE8M0 scales).
- ``"bf16"``: vLLM-Ascend's row, 512 bfloat16 values (the NOPE dims after RMSNorm, then the rotated
  RoPE dims). The cache is bfloat16 ``[num_blocks, block_size, 512]`` or
  ``[num_blocks, block_size, 1, 512]``; slot ``s`` is row ``s`` of its ``[-1, 512]`` view.

The compressor state row is ``[values 512 | scores 512]`` (``STATE_WIDTH``), or with the
overlapping ratio-4 compressor ``[kv_a 512 | kv_b 512 | score_a 512 | score_b 512]``
(``OVERLAP_STATE_WIDTH``).
"""

from __future__ import annotations

import torch

HEAD_DIM = 512  # width of the pooled vector
STATE_WIDTH = 2 * HEAD_DIM  # one state row: 512 values, then 512 scores
OVERLAP_STATE_WIDTH = 4 * HEAD_DIM  # with overlap: kv_a, kv_b, score_a, score_b
NOPE_DIM = 448  # dims quantised to int8 / e4m3
ROPE_DIM = HEAD_DIM - NOPE_DIM  # dims rotated and stored as bf16
ROPE_PAIRS = ROPE_DIM // 2
QUANT_GROUP = 64  # dims sharing one power-of-two scale
NOPE_GROUPS = NOPE_DIM // QUANT_GROUP  # 7

SLOTS_PER_PAGE = 64  # the default page: P = 64
PAYLOAD_BYTES = NOPE_DIM + 2 * ROPE_DIM  # 576
SCALE_BYTES = 8  # 7 scales + 1 pad byte
SCALE_REGION = SLOTS_PER_PAGE * PAYLOAD_BYTES  # 36864: where the scale bytes start (P = 64)
PAGE_BYTES = SCALE_REGION + SLOTS_PER_PAGE * SCALE_BYTES  # 37376 (P = 64)
SLOT_BYTES = PAYLOAD_BYTES + SCALE_BYTES  # 584 bytes written per output

BF16_ROW = HEAD_DIM  # bf16 values in one slot of the "bf16" format
BF16_ROW_BYTES = 2 * BF16_ROW

COMPRESS_RATIOS = (128, 256, 512)
OVERLAP_RATIO = 4  # the overlapping compressor's ratio (DeepSeek-V4: overlap = compress_ratio == 4)
PLAIN_RATIOS = (OVERLAP_RATIO, *COMPRESS_RATIOS)  # ratios accepted without overlap
COS_SIN_WIDTH = ROPE_DIM  # 32 cos, then 32 sin

KV_FORMATS = ("int8", "fp8_e4m3", "bf16")
DEFAULT_KV_FORMAT = "int8"
SLOT_FORMATS = ("int8", "fp8_e4m3")  # the formats with the 584-byte slot and scale bytes

AMAX_FLOOR = 1.0e-4  # per-group |z| max is clamped up to this before taking the exponent
QMAX = 127  # int8: largest magnitude
FP8_MAX = 448.0  # OCP e4m3fn: largest finite magnitude
E4M3_MANTISSA_BITS = 3
E4M3_EXPONENT_BIAS = 7
E4M3_MIN_NORMAL_EXPONENT = 1 - E4M3_EXPONENT_BIAS  # -6: below 2^-6 the values are subnormal
SCALE_BIAS = 127


def format_qmax(kv_format: str) -> float:
    """The largest quantised magnitude of a 584-byte format: 127 (int8) or 448 (e4m3)."""
    return FP8_MAX if kv_format == "fp8_e4m3" else float(QMAX)


def window_rows(compress_ratio: int, overlap: bool) -> int:
    """State rows one output pools: ``C``, or ``2C`` with overlap."""
    return 2 * compress_ratio if overlap else compress_ratio


def state_width(overlap: bool) -> int:
    return OVERLAP_STATE_WIDTH if overlap else STATE_WIDTH


def page_bytes(slots_per_page: int) -> int:
    """Bytes of one page row of a 584-byte format with ``slots_per_page`` slots."""
    return slots_per_page * SLOT_BYTES


def slots_per_page(kv_cache: torch.Tensor) -> int:
    """``P`` of a 584-byte-format cache ``[num_pages, P * 584]``; 1 for a bf16 cache (one slot a row)."""
    if kv_cache.dtype == torch.bfloat16:
        return 1
    return kv_cache.shape[-1] // SLOT_BYTES


def num_slots(kv_cache: torch.Tensor) -> int:
    """How many slots a checked cache holds: ``num_pages * P`` (uint8 pages), or its rows of 512 (bf16)."""
    if kv_cache.dtype == torch.bfloat16:
        return kv_cache.numel() // BF16_ROW
    return kv_cache.shape[0] * slots_per_page(kv_cache)


def slot_byte_offsets(slots: torch.Tensor, slots_per_page: int = SLOTS_PER_PAGE
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Map slot numbers to ``(page, payload_column, scale_column)``, each shaped like ``slots``.

    ``payload_column`` and ``scale_column`` are the first byte of the slot's payload and scale
    bytes inside its page row of ``slots_per_page`` slots.
    """
    page = torch.div(slots, slots_per_page, rounding_mode="floor")
    in_page = slots - page * slots_per_page
    return page, in_page * PAYLOAD_BYTES, slots_per_page * PAYLOAD_BYTES + in_page * SCALE_BYTES


def slot_byte_columns(slots: torch.Tensor, slots_per_page: int = SLOTS_PER_PAGE) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(page [N, 1], columns [N, 584])``: every byte column a slot owns in its page.

    The first ``PAYLOAD_BYTES`` columns are the payload, the last ``SCALE_BYTES`` the scales, in the
    order the bytes of ``torch.cat([payload, scales], 1)`` are laid out.
    """
    page, payload_col, scale_col = slot_byte_offsets(slots.long(), slots_per_page)
    payload = payload_col[:, None] + torch.arange(PAYLOAD_BYTES, device=slots.device)
    scales = scale_col[:, None] + torch.arange(SCALE_BYTES, device=slots.device)
    return page[:, None], torch.cat([payload, scales], dim=1)
