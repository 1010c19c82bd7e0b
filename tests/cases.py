"""General inputs that the official workloads never exercise, shared by every route's tests."""

from __future__ import annotations

import torch

from ascend_kvc import c128_256_512_compress
from ascend_kvc.oracle import check_cache
from ascend_kvc.workloads import Workload, make_workload


def general_case(
    C: int,
    block_size: int = 8,
    *,
    seed: int = 0,
    tokens_per_req: int | None = None,
    num_reqs: int = 2,
    outputs_per_req: int = 3,
    index_dtype: torch.dtype | None = None,
    skip_some: bool = True,
    nonzero_cache: bool = True,
    device: str = "cpu",
    **kw,
) -> Workload:
    """Unaligned boundary positions (p = C - 1 always among them), shuffled tables, a few slots -1.

    Small enough for the Triton interpreter: ``num_reqs * outputs_per_req`` outputs.
    """
    L = tokens_per_req or C + 3 * block_size + 37
    w = make_workload(num_reqs, num_reqs * L, C, block_size=block_size, shuffle=True,
                      nonzero_cache=nonzero_cache, seed=seed, device=device, index_dtype=index_dtype, **kw)
    g = torch.Generator().manual_seed(seed + 1)
    picks = []
    for r in range(num_reqs):
        p = torch.randint(C - 1, L, (outputs_per_req,), generator=g)
        p[0] = C - 1
        picks.append(r * L + torch.unique(p))
    boundary = torch.cat(picks)
    n = boundary.numel()
    num_slots = w.kv_cache.shape[0] * 64
    if num_slots < n + 1:
        extra = (n + 1 - num_slots + 63) // 64
        w.kv_cache = torch.cat([w.kv_cache, torch.randint(0, 256, (extra, w.kv_cache.shape[1]), dtype=torch.uint8,
                                                          generator=g).to(w.kv_cache.device)])
        num_slots = w.kv_cache.shape[0] * 64
    slots = torch.randperm(num_slots, generator=g)[:n]
    if skip_some and n > 2:
        slots[1] = -1
    mapping = torch.full((w.token_to_req.shape[0],), -1, dtype=torch.int64)
    mapping[boundary] = slots
    dev = w.kv_cache.device
    w.boundary_token_indices = boundary.to(index_dtype or torch.int64).to(dev)
    w.kv_slot_mapping = mapping.to(index_dtype or torch.int64).to(dev)
    return w


def run_and_check(w: Workload, route: str, *, inplace: bool = True, validate: bool = True):
    """Run ``route`` on ``w`` (in place on a copy of its cache, or out=None; its cache format and
    overlap) and judge the bytes."""
    original = w.kv_cache.clone()
    before = original if inplace else torch.zeros_like(original)
    out = original.clone() if inplace else None
    got = c128_256_512_compress(*w.args(), out=out, route=route, validate=validate, **w.format_kwargs())
    if inplace:
        assert got is out
    assert torch.equal(w.kv_cache, original), "kv_cache itself was modified"
    report = check_cache(w.checked_args(), got, before)
    assert report.ok, f"route {route} on {w.name} (block_size={w.block_size}): {report}"
    return report


def check_slot_past_the_cache_is_skipped(w: Workload, route: str):
    """``validate=False`` with output 1's slot just past the last one (``num_pages * P`` slots, or
    the rows of a bf16 cache): that output writes nothing, not even past the cache (two guard pages
    or rows follow it in memory); the other outputs are exact."""
    before = w.kv_cache.clone()
    token = w.boundary_token_indices[1]
    w.kv_slot_mapping[token] = w.checked_args().num_slots
    pages = w.kv_cache.shape[0]
    guarded = torch.cat([w.kv_cache, w.kv_cache[:2]])  # the cache, then two pages (rows) a stray write would hit
    guard = guarded[pages:].clone()
    got = c128_256_512_compress(*w.args(), out=guarded[:pages], route=route, validate=False, **w.format_kwargs())
    assert torch.equal(guarded[pages:], guard), f"{route}: a byte past the cache was written"
    w.kv_slot_mapping[token] = -1  # the truth: that output is skipped
    report = check_cache(w.checked_args(), got, before)
    assert report.ok and report.num_outputs_written == w.num_outputs - 1, report
