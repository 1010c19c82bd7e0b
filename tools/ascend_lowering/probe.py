"""A kernel whose unified-buffer need grows with one constexpr, to show the audit catches overflows.

``_tile_softmax_probe_kernel`` holds two ``[ROWS, 512]`` fp32 tiles (values and scores) and pools
them like the gathers do: at ``ROWS = 8`` the 910B compiler plans it inside the 192 KiB unified
buffer, at ``ROWS = 64`` it cannot (``ub overflow``).
"""

from __future__ import annotations

import triton
import triton.language as tl

FITS_ROWS = 8
OVERFLOWS_ROWS = 64


@triton.jit
def _tile_softmax_probe_kernel(
    state_ptr,  # in, [n, ROWS, 1024], float32
    pooled_ptr,  # out, [n, 512], float32
    n,
    ROWS: tl.constexpr,
):
    d = tl.arange(0, 512)
    r = tl.arange(0, ROWS)
    for i in range(tl.program_id(0), n, tl.num_programs(0)):
        base = state_ptr + i.to(tl.int64) * (ROWS * 1024) + r[:, None] * 1024
        values = tl.load(base + d[None, :])
        scores = tl.load(base + 512 + d[None, :])
        w = tl.exp(scores - tl.max(scores, axis=0)[None, :])
        tl.store(pooled_ptr + i * 512 + d, tl.sum(w * values, axis=0) / tl.sum(w, axis=0))
