"""The Ascend ladder: which gather, finalize and scatter each stage of ``ASCEND_STAGES`` runs.

Every rung computes the same bytes; they differ in how the window reaches the chip and how the
bytes leave it. Rungs 1-7 finalize with framework tensor ops and write with an ``index_put``
(the seed's route before its last step); ``byte-scatter`` (the default ``ascend`` route) adds
the pure-uint8 Triton scatter.
"""

from __future__ import annotations

import functools

from . import finalize, reference, scatter
from .routes import ASCEND_STAGES


def _block(block_d: int, unmasked_middle: bool):
    def gather(args):
        from . import gather_block

        return gather_block.gather(args, block_d, unmasked_middle)

    return gather


def _random(args):
    from . import gather_random

    return gather_random.gather(args)


def _pregather(args):
    from . import gather_pregather

    return gather_pregather.gather(args)


# stage -> (gather, gather output is RMS-normalised, byte writer)
_LADDER = {
    "random-gather": (_random, False, "index_put"),
    "pre-gather": (_pregather, False, "index_put"),
    "block-gather": (_block(64, False), False, "index_put"),
    "block-gather-nomask": (_block(64, True), False, "index_put"),
    "block-d128": (_block(128, True), False, "index_put"),
    "block-d256": (_block(256, True), False, "index_put"),
    "block-d512": (_block(512, True), True, "index_put"),
    "byte-scatter": (_block(512, True), True, "triton"),
}
assert tuple(_LADDER) == ASCEND_STAGES


@functools.lru_cache(maxsize=None)
def stage_of(route_name: str) -> str:
    return route_name.split(":", 1)[1]


def run(args, route_name: str, plan, out) -> None:
    """Route entry point for ``ascend:<stage>``."""
    gather, normalised, writer = _LADDER[stage_of(route_name)]
    pooled, slot, rope_pos = gather(args)
    payload, scales = finalize.finalize_bytes(pooled, normalised, rope_pos, args)
    if writer == "triton":
        scatter.scatter_bytes(out, slot, payload, scales)
    else:
        reference.scatter_slot_bytes(out, slot, payload, scales)
