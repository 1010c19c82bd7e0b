"""Index math on the host framework (torch), shared by validation, the reference and pre-gather.

Everything here is vectorised over outputs and never syncs with the device. Out-of-range indices
are reported as masks and clamped to safe values, so a caller can always gather and then drop the
outputs whose ``valid`` flag is false.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .layout import num_slots as cache_slots
from .layout import slots_per_page


@dataclass
class OutputPlan:
    """Per-output indices, clamped to safe values, and what was wrong with each output."""

    token: torch.Tensor  # [N] int64, boundary token (clamped)
    req: torch.Tensor  # [N] int64, request row of block_table (clamped)
    pos: torch.Tensor  # [N] int64, boundary position p (clamped to >= C - 1)
    slot: torch.Tensor  # [N] int64, destination slot, -1 where the output is skipped
    rope_pos: torch.Tensor  # [N] int64, (p // C) * C (clamped)
    checks: list[tuple[str, str, torch.Tensor]]  # (argument, what is wrong, bad [N] bool)

    @property
    def valid(self) -> torch.Tensor:
        return self.slot >= 0


def plan_outputs(
    state_cache: torch.Tensor,
    token_to_req: torch.Tensor,
    positions: torch.Tensor,
    boundary_token_indices: torch.Tensor,
    block_table: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_slot_mapping: torch.Tensor,
    kv_cache: torch.Tensor,
    block_size: int,
    compress_ratio: int,
    window: int | None = None,
) -> OutputPlan:
    """Resolve every output's indices and check them against every tensor they index.

    Outputs whose slot is negative are skipped by contract, so only their boundary index is
    checked. ``plan.slot`` is -1 for skipped and for invalid outputs. ``window``: state rows an
    output pools (``C`` by default; ``2C`` with overlap, whose rows at negative positions are masked,
    not read).
    """
    num_tokens = token_to_req.shape[0]
    num_reqs, blocks_per_req = block_table.shape
    num_state_blocks = state_cache.shape[0]
    C = compress_ratio

    b = boundary_token_indices.long()
    bad_token = (b < 0) | (b >= num_tokens)
    b = b.clamp(0, max(num_tokens - 1, 0))
    if num_tokens == 0:  # nothing can be read; every output is bad_token
        zeros = torch.zeros_like(b)
        return OutputPlan(b, zeros, zeros + C - 1, zeros - 1, zeros,
                          [("boundary_token_indices", "outside [0, num_tokens)", bad_token)])

    slot = kv_slot_mapping[b].long()
    active = (slot >= 0) & ~bad_token

    r = token_to_req[b].long()
    bad_req = active & ((r < 0) | (r >= num_reqs))
    r = r.clamp(0, max(num_reqs - 1, 0))

    p = positions[b].long()
    bad_pos = active & (p < C - 1)
    p = torch.clamp(p, min=C - 1)

    # Logical block columns the window [p - C + 1, p] touches.
    W = window or C
    first_col = torch.div((p - W + 1).clamp(min=0), block_size, rounding_mode="floor")
    last_col = torch.div(p, block_size, rounding_mode="floor")
    bad_col = active & (last_col >= blocks_per_req)

    max_cols = (W - 1) // block_size + 2
    cols = first_col[:, None] + torch.arange(max_cols, device=b.device)
    in_window = cols <= last_col[:, None]
    if blocks_per_req > 0 and num_reqs > 0:
        blk = block_table[r[:, None], cols.clamp(max=blocks_per_req - 1)].long()
        bad_blk = active & (in_window & ((blk < 0) | (blk >= num_state_blocks))).any(dim=1)
    else:
        bad_blk = active.clone()

    bad_slot = active & (slot >= cache_slots(kv_cache))

    rope_pos = torch.div(p, C, rounding_mode="floor") * C
    bad_rope = active & (rope_pos >= cos_sin_cache.shape[0])
    rope_pos = rope_pos.clamp(max=max(cos_sin_cache.shape[0] - 1, 0))

    checks = [
        ("boundary_token_indices", "outside [0, num_tokens)", bad_token),
        ("token_to_req", "request id outside block_table rows", bad_req),
        ("positions", f"boundary position < compress_ratio - 1 = {C - 1}", bad_pos),
        ("block_table", "window needs a column past block_table's width", bad_col),
        ("block_table", "block id outside state_cache blocks", bad_blk),
        ("kv_slot_mapping", f"slot >= num_pages * {slots_per_page(kv_cache)}" if kv_cache.dtype == torch.uint8
         else "slot >= the cache's rows of 512", bad_slot),
        ("cos_sin_cache", "(p // C) * C >= cos_sin_cache rows", bad_rope),
    ]
    ok = active
    for _, _, bad in checks[1:]:
        ok = ok & ~bad
    return OutputPlan(b, r, p, torch.where(ok, slot, torch.full_like(slot, -1)), rope_pos, checks)


def plan_for(args) -> OutputPlan:
    """``plan_outputs`` on a checked ``CompressArgs``."""
    return plan_outputs(
        args.state_cache, args.token_to_req, args.positions, args.boundary_token_indices,
        args.block_table, args.cos_sin_cache, args.kv_slot_mapping, args.kv_cache,
        args.block_size, args.compress_ratio, args.window,
    )


def window_blocks_and_offsets(
    plan: OutputPlan, block_table: torch.Tensor, block_size: int, compress_ratio: int, window: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(block [N, W], offset [N, W])`` of every window row (``W = window``, default ``C``);
    invalid outputs, and rows at negative positions (overlap), read block 0 row 0."""
    W = window or compress_ratio
    t = plan.pos[:, None] - W + 1 + torch.arange(W, device=plan.pos.device)
    col = torch.div(t, block_size, rounding_mode="floor")
    offset = t - col * block_size
    blocks_per_req = block_table.shape[1]
    if blocks_per_req == 0:
        zeros = torch.zeros_like(t)
        return zeros, zeros
    block = block_table[plan.req[:, None], col.clamp(0, blocks_per_req - 1)].long()
    valid = plan.valid[:, None] & (t >= 0)
    return torch.where(valid, block, 0), torch.where(valid, offset, 0)
