"""The merge: window pieces' softmax states -> the pooled ``c`` -> the slot's bytes.

Run by the last program of an output to finish (see ``compress.py``). Piece states are read
with ``.cg`` loads (from L2, never a stale L1 line): other programs wrote them. The slot-byte
math itself is ``ascend_kvc.slot_bytes.store_format_slot_bytes`` (int8 and fp8_e4m3 slots, any
slots a page) and, for bf16 rows, ``ascend_kvc.stages.fused.store_output``: shared with the
Ascend ``fused`` rung.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascend_kvc.slot_bytes import store_format_slot_bytes
from ascend_kvc.stages.fused import store_output


@triton.jit
def _merge_pieces(part_ptr, base, offs, SPLITS: tl.constexpr):
    """Softmax-pooled ``c`` at dims ``offs`` (any shape) from the ``SPLITS`` piece states.

    ``part_ptr + base`` is the output's ``[3, SPLITS, 512]`` block: max, sum, weighted sum.
    """
    m_ptr = part_ptr + base
    l_ptr = m_ptr + SPLITS * 512
    acc_ptr = l_ptr + SPLITS * 512
    mx = tl.load(m_ptr + offs, cache_modifier=".cg")
    for s in tl.static_range(1, SPLITS):
        mx = tl.maximum(mx, tl.load(m_ptr + s * 512 + offs, cache_modifier=".cg"))
    den = tl.zeros(offs.shape, tl.float32)
    num = tl.zeros(offs.shape, tl.float32)
    for s in tl.static_range(SPLITS):
        w = tl.exp(tl.load(m_ptr + s * 512 + offs, cache_modifier=".cg") - mx)
        den += tl.load(l_ptr + s * 512 + offs, cache_modifier=".cg") * w
        num += tl.load(acc_ptr + s * 512 + offs, cache_modifier=".cg") * w
    return num / den


@triton.jit
def merge_and_store(
    part_ptr,  # in, [num_outputs, 3, SPLITS, 512], float32: the pieces' max, sum, weighted sum
    i, pos, slot, weight_ptr, eps, cos_sin_ptr, cs_s0, cs_s1, kv_cache_ptr, kv_s0,
    C: tl.constexpr, SPLITS: tl.constexpr,
    NOPE_DIM: tl.constexpr, PAYLOAD_BYTES: tl.constexpr, SCALE_BYTES: tl.constexpr,
    SLOTS_PER_PAGE: tl.constexpr, KV_FORMAT: tl.constexpr,
):
    """Merge output ``i``'s pieces and write it into ``slot``: its 584 bytes in a page of
    ``SLOTS_PER_PAGE`` slots (``KV_FORMAT`` ``int8`` or ``fp8_e4m3``, ``slot_bytes.KV_FORMAT_CODES``),
    or row ``slot`` of a bf16 cache, ``kv_s0`` values apart (``bf16``)."""
    base = tl.cast(i, tl.int64) * (3 * SPLITS * 512)
    if KV_FORMAT == 2:  # bf16 rows: the fused rung's store of the whole normalised, rotated row
        c = _merge_pieces(part_ptr, base, tl.arange(0, 512), SPLITS)
        store_output(c, pos, weight_ptr, eps, cos_sin_ptr, cs_s0, cs_s1, kv_cache_ptr, slot, kv_s0, 1,
                     C, NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, KV_FORMAT)
    else:
        g = tl.arange(0, 8)
        d2 = g[:, None] * 64 + tl.arange(0, 64)[None, :]  # [8, 64]
        c8 = _merge_pieces(part_ptr, base, d2, SPLITS)
        c_rope = _merge_pieces(part_ptr, base, NOPE_DIM + tl.arange(0, 64), SPLITS)  # row 7 again, as [64]
        store_format_slot_bytes(c8, c_rope, weight_ptr, eps, cos_sin_ptr + (pos // C) * C * cs_s0, cs_s1,
                                kv_cache_ptr, slot, kv_s0, SLOTS_PER_PAGE, NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES,
                                False, KV_FORMAT)
