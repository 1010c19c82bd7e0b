"""The default rung's quantisation: one Triton kernel that reads the real bf16 tensor from memory.

The gather (or the merge of a split window) leaves ``bf16(y)`` as a real bf16 tensor in memory,
the boundary that kept Ascend's INT8 bytes right in the competition write-ups. This kernel reads
it back as 16-bit integers, widens each value to fp32 exactly by a shift, and makes the INT8
values and the power-of-two scale exponents by integer bit operations
(``triton_helpers.int8_groups``, the same code as the ``fused`` rung's): no ``log2``/``exp2``,
no ``.to(tl.bfloat16)``, no framework op. The pure-uint8 scatter then copies the bytes.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..boundaries import counted_outputs
from ..triton_helpers import int8_groups


@triton.jit
def _quantize_bf16_kernel(
    y_bf16_ptr,  # in, [num_outputs, 512], int16: the bf16 tensor's bits
    slot_ptr,  # in, [num_outputs], int64: destination slot, < 0 = skip (its row, read, is not used)
    nope_ptr,  # out, [num_outputs, 448], int8
    scale_ptr,  # out, [num_outputs, 7], int32: e + 127, whose low byte is the scale byte
    num_outputs,
    count_ptr,  # in, [1], int32: outputs in the boundary list (read with COUNTED: a step's device list)
    NOPE_DIM: tl.constexpr, COUNTED: tl.constexpr,
):
    NOPE_GROUPS: tl.constexpr = NOPE_DIM // 64
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    g = tl.arange(0, 8)
    d2 = g[:, None] * 64 + tl.arange(0, 64)[None, :]  # [8, 64]; row 7 (the RoPE dims) masked off
    nope = g[:, None] < NOPE_GROUPS
    for i in range(pid, counted_outputs(count_ptr, num_outputs, COUNTED), num_programs):
        row = tl.cast(i, tl.int64)
        # Read before the slot test, so that the two reads overlap; only a written slot's row is used.
        bits = tl.load(y_bf16_ptr + row * 512 + d2, mask=nope, other=0).to(tl.int32) << 16
        if tl.load(slot_ptr + i) >= 0:
            q, e = int8_groups(bits.to(tl.float32, bitcast=True))
            tl.store(nope_ptr + row * NOPE_DIM + d2, q.to(tl.int8), mask=nope)
            tl.store(scale_ptr + row * NOPE_GROUPS + g, e + 127, mask=g < NOPE_GROUPS)
