"""The byte layout of one compressed-KV slot: the one place that spells these numbers.

A KV page holds ``SLOTS_PER_PAGE`` slots. Its first ``SLOTS_PER_PAGE * PAYLOAD_BYTES`` bytes are
the payloads, one after another; the scale bytes of all slots follow::

    page = [payload slot 0 | ... | payload slot 63 | scales slot 0 | ... | scales slot 63]
    payload = [448 x int8 NOPE][64 x bf16 RoPE, little-endian]     (576 bytes)
    scales  = [7 x uint8 exponent + 127][1 x 0 pad]                 (8 bytes)
"""

from __future__ import annotations

import torch

HEAD_DIM = 512  # width of the pooled vector
STATE_WIDTH = 2 * HEAD_DIM  # one state row: 512 values, then 512 scores
NOPE_DIM = 448  # dims quantised to int8
ROPE_DIM = HEAD_DIM - NOPE_DIM  # dims rotated and stored as bf16
ROPE_PAIRS = ROPE_DIM // 2
QUANT_GROUP = 64  # dims sharing one power-of-two scale
NOPE_GROUPS = NOPE_DIM // QUANT_GROUP  # 7

SLOTS_PER_PAGE = 64
PAYLOAD_BYTES = NOPE_DIM + 2 * ROPE_DIM  # 576
SCALE_BYTES = 8  # 7 scales + 1 pad byte
SCALE_REGION = SLOTS_PER_PAGE * PAYLOAD_BYTES  # 36864: where the scale bytes start
PAGE_BYTES = SCALE_REGION + SLOTS_PER_PAGE * SCALE_BYTES  # 37376
SLOT_BYTES = PAYLOAD_BYTES + SCALE_BYTES  # 584 bytes written per output

COMPRESS_RATIOS = (128, 256, 512)
COS_SIN_WIDTH = ROPE_DIM  # 32 cos, then 32 sin

AMAX_FLOOR = 1.0e-4  # per-group |z| max is clamped up to this before taking the exponent
QMAX = 127
SCALE_BIAS = 127


def slot_byte_offsets(slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Map slot numbers to ``(page, payload_column, scale_column)``, each shaped like ``slots``.

    ``payload_column`` and ``scale_column`` are the first byte of the slot's payload and scale
    bytes inside its page row.
    """
    page = torch.div(slots, SLOTS_PER_PAGE, rounding_mode="floor")
    in_page = slots - page * SLOTS_PER_PAGE
    return page, in_page * PAYLOAD_BYTES, SCALE_REGION + in_page * SCALE_BYTES


def slot_byte_columns(slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(page [N, 1], columns [N, 584])``: every byte column a slot owns in its page.

    The first ``PAYLOAD_BYTES`` columns are the payload, the last ``SCALE_BYTES`` the scales, in the
    order the bytes of ``torch.cat([payload, scales], 1)`` are laid out.
    """
    page, payload_col, scale_col = slot_byte_offsets(slots.long())
    payload = payload_col[:, None] + torch.arange(PAYLOAD_BYTES, device=slots.device)
    scales = scale_col[:, None] + torch.arange(SCALE_BYTES, device=slots.device)
    return page[:, None], torch.cat([payload, scales], dim=1)
