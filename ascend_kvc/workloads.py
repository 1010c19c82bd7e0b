"""Inputs for the official workloads (docs/CONTRACT.md, "Official workloads") and smaller look-alikes.

A case has ``num_reqs`` requests of ``total_tokens / num_reqs`` tokens at positions ``0..L-1``;
boundary tokens are those with ``(p + 1) % C == 0``. Options cover what a real serving engine
hands over and the official data does not: a shuffled block table (an allocator's output, with
spare blocks), a non-zero cache written in place, any ``block_size`` and index dtypes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .layout import (
    BF16_ROW,
    COS_SIN_WIDTH,
    HEAD_DIM,
    PAGE_BYTES,
    ROPE_PAIRS,
    SLOT_BYTES,
    SLOTS_PER_PAGE,
    STATE_WIDTH,
    page_bytes,
    state_width,
)

OFFICIAL_BLOCK_SIZE = 8  # rows per state block in every official case
OFFICIAL_CASES: tuple[tuple[int, int, int], ...] = tuple(
    (r, t, c) for c in (128, 256, 512) for r, t in ((1, 8192), (4, 32768), (8, 65536), (8, 131072))
)
# Interpreter-sized look-alikes: a few outputs per C, windows crossing block edges.
SMALL_CASES: tuple[tuple[int, int, int], ...] = ((2, 512, 128), (1, 512, 256), (1, 1024, 512))
# Not an official case: a prefill chunk of DeepSeek-V4's overlapping compressor (compress_ratio 4,
# overlap: 2048 outputs of 8-row windows of the 2048-wide state), run with shuffled blocks.
C4_CASE: tuple[int, int, int] = (1, 8192, 4)


@dataclass
class Workload:
    num_reqs: int
    total_tokens: int
    compress_ratio: int
    block_size: int
    state_cache: torch.Tensor
    token_to_req: torch.Tensor
    positions: torch.Tensor
    boundary_token_indices: torch.Tensor
    block_table: torch.Tensor
    rms_norm_weight: torch.Tensor
    cos_sin_cache: torch.Tensor
    kv_slot_mapping: torch.Tensor
    kv_cache: torch.Tensor
    rms_norm_eps: float = 1.0e-6
    tags: dict = field(default_factory=dict)
    kv_format: str = "int8"
    overlap: bool = False

    @property
    def name(self) -> str:
        return f"R{self.num_reqs}-T{self.total_tokens}-C{self.compress_ratio}" + ("-overlap" if self.overlap else "")

    @property
    def num_outputs(self) -> int:
        return self.boundary_token_indices.shape[0]

    def args(self) -> tuple:
        """Positional arguments of ``c128_256_512_compress``."""
        return (
            self.state_cache, self.token_to_req, self.positions, self.boundary_token_indices,
            self.block_table, self.rms_norm_weight, self.cos_sin_cache, self.kv_slot_mapping,
            self.kv_cache, self.block_size, self.compress_ratio, self.rms_norm_eps,
        )

    def format_kwargs(self) -> dict:
        """``kv_format`` and ``overlap``, the keyword arguments a non-default cache needs."""
        return dict(kv_format=self.kv_format, overlap=self.overlap)

    def checked_args(self, out: torch.Tensor | None = None):
        """The arguments after the operator's metadata checks (what the oracle takes)."""
        from .validation import check_metadata

        return check_metadata(*self.args(), out, self.kv_format, self.overlap)

    def bytes_to_move(self) -> int:
        """Fewest bytes any implementation moves: each window row read once, each slot written once
        (with overlap, ``2C`` rows of which half of each is read)."""
        row_bytes = STATE_WIDTH * self.state_cache.element_size()
        slot = 2 * BF16_ROW if self.kv_format == "bf16" else SLOT_BYTES
        return self.num_outputs * ((2 if self.overlap else 1) * self.compress_ratio * row_bytes + slot)


def make_workload(
    num_reqs: int,
    total_tokens: int,
    compress_ratio: int,
    *,
    block_size: int = OFFICIAL_BLOCK_SIZE,
    shuffle: bool = False,
    nonzero_cache: bool = False,
    seed: int = 0,
    device: str | torch.device = "cpu",
    state_dtype: torch.dtype = torch.float32,
    index_dtype: torch.dtype | None = None,
    score_scale: float = 1.0,
    value_scale: float = 1.0,
    kv_format: str = "int8",
    overlap: bool = False,
    slots_per_page: int = SLOTS_PER_PAGE,
) -> Workload:
    """Build one case on ``device``.

    ``shuffle`` draws each request's blocks from a random permutation of a pool with 25% spare
    blocks and shuffles the slot numbers too; ``nonzero_cache`` fills ``kv_cache`` with random
    bytes (to be written in place). ``index_dtype`` overrides every index tensor's dtype.
    ``kv_format``, ``overlap`` and ``slots_per_page`` pick the cache format, the overlapping
    ratio-4 state (rows of 2048) and the slots of a page (the pages of a ``bf16`` cache are
    ``[num_pages, slots_per_page, 512]`` bfloat16).
    """
    if total_tokens % num_reqs:
        raise ValueError(f"total_tokens={total_tokens} must be a multiple of num_reqs={num_reqs}")
    g = torch.Generator().manual_seed(seed)
    C = compress_ratio
    L = total_tokens // num_reqs
    blocks_per_req = math.ceil(L / block_size)
    num_blocks = num_reqs * blocks_per_req
    if shuffle:
        pool = num_blocks + num_blocks // 4 + 1
        block_table = torch.randperm(pool, generator=g)[:num_blocks].view(num_reqs, blocks_per_req)
    else:
        pool = num_blocks
        block_table = torch.arange(num_blocks).view(num_reqs, blocks_per_req)

    positions = torch.arange(L).repeat(num_reqs)
    token_to_req = torch.arange(num_reqs).repeat_interleave(L)
    boundary = ((positions + 1) % C == 0).nonzero().squeeze(1)
    num_outputs = boundary.numel()

    P = slots_per_page
    num_pages = max(1, math.ceil(num_outputs / P)) + (1 if shuffle else 0)
    slots = torch.randperm(num_pages * P, generator=g)[:num_outputs] if shuffle else torch.arange(num_outputs)
    kv_slot_mapping = torch.full((num_reqs * L,), -1, dtype=torch.int64)
    kv_slot_mapping[boundary] = slots

    # The state is drawn on the device itself: the largest case is 512 MiB.
    device = torch.device(device)
    state = torch.randn(pool, block_size, state_width(overlap), device=device,
                        generator=torch.Generator(device=device).manual_seed(seed))
    values = 2 * HEAD_DIM if overlap else HEAD_DIM
    state[..., :values] *= value_scale
    state[..., values:] *= score_scale

    rms_norm_weight = (1.0 + 0.25 * torch.randn(HEAD_DIM, generator=g)).to(torch.bfloat16)
    max_pos = L + C  # room past the last compressed position
    inv_freq = 10000.0 ** (-torch.arange(ROPE_PAIRS, dtype=torch.float64) / ROPE_PAIRS)
    angles = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv_freq
    cos_sin_cache = torch.cat([angles.cos(), angles.sin()], dim=1).to(torch.float32)
    assert cos_sin_cache.shape[1] == COS_SIN_WIDTH

    shape = (num_pages, page_bytes(P))
    if nonzero_cache:
        kv_cache = torch.randint(0, 256, shape, dtype=torch.uint8, generator=g)
    else:
        kv_cache = torch.zeros(shape, dtype=torch.uint8)
    if kv_format == "bf16":  # random finite bf16 values, or zeros
        kv_cache = (torch.randn(num_pages, P, BF16_ROW, generator=g) if nonzero_cache
                    else torch.zeros(num_pages, P, BF16_ROW)).to(torch.bfloat16)

    def idx(t: torch.Tensor, default: torch.dtype) -> torch.Tensor:
        return t.to(index_dtype or default).to(device)

    return Workload(
        num_reqs=num_reqs, total_tokens=total_tokens, compress_ratio=C, block_size=block_size,
        state_cache=state.to(state_dtype),
        token_to_req=idx(token_to_req, torch.int32),
        positions=idx(positions, torch.int64),
        boundary_token_indices=idx(boundary, torch.int64),
        block_table=idx(block_table, torch.int32),
        rms_norm_weight=rms_norm_weight.to(device),
        cos_sin_cache=cos_sin_cache.to(device),
        kv_slot_mapping=idx(kv_slot_mapping, torch.int64),
        kv_cache=kv_cache.to(device),
        tags={"shuffle": shuffle, "nonzero_cache": nonzero_cache, "seed": seed},
        kv_format=kv_format, overlap=overlap,
    )


@dataclass
class StepWorkload:
    """One engine step (``compress_step``'s arguments): the step's tokens, spans of consecutive
    positions of a few requests, over the requests' state, block table and cos/sin cache of
    ``base`` (a ``Workload`` whose requests are long enough to hold every span)."""

    base: Workload
    token_to_req: torch.Tensor
    positions: torch.Tensor
    kv_slot_mapping: torch.Tensor
    kv_cache: torch.Tensor
    state_slot_mapping: torch.Tensor | None = None
    name: str = "step"

    @property
    def num_tokens(self) -> int:
        return self.positions.shape[0]

    @property
    def compress_ratio(self) -> int:
        return self.base.compress_ratio

    @property
    def block_size(self) -> int:
        return self.base.block_size

    def args(self) -> tuple:
        """Positional arguments of ``compress_step``."""
        b = self.base
        return (b.state_cache, self.token_to_req, self.positions, b.block_table, b.rms_norm_weight, b.cos_sin_cache,
                self.kv_slot_mapping, self.kv_cache)

    def kwargs(self) -> dict:
        """Keyword arguments of ``compress_step`` (not ``route`` or ``validate``)."""
        return dict(block_size=self.block_size, compress_ratio=self.compress_ratio, rms_norm_eps=self.base.rms_norm_eps,
                    state_slot_mapping=self.state_slot_mapping, **self.base.format_kwargs())

    def as_operator(self, boundary_token_indices: torch.Tensor) -> Workload:
        """The same step as ``c128_256_512_compress``'s arguments, with the boundary tokens given."""
        b = self.base
        return Workload(
            num_reqs=b.num_reqs, total_tokens=self.num_tokens, compress_ratio=b.compress_ratio, block_size=b.block_size,
            state_cache=b.state_cache, token_to_req=self.token_to_req, positions=self.positions,
            boundary_token_indices=boundary_token_indices, block_table=b.block_table, rms_norm_weight=b.rms_norm_weight,
            cos_sin_cache=b.cos_sin_cache, kv_slot_mapping=self.kv_slot_mapping, kv_cache=self.kv_cache,
            rms_norm_eps=b.rms_norm_eps, tags=dict(b.tags, step=self.name), kv_format=b.kv_format, overlap=b.overlap)


def make_step_workload(
    spans: list[tuple[int, int]],
    compress_ratio: int,
    *,
    block_size: int = OFFICIAL_BLOCK_SIZE,
    seed: int = 0,
    device: str | torch.device = "cpu",
    skip_fraction: float = 0.0,
    state_slots: bool = False,
    state_dtype: torch.dtype = torch.float32,
    index_dtype: torch.dtype | None = None,
    name: str = "step",
    overlap: bool = False,
) -> StepWorkload:
    """A step with ``spans[r] = (first position, tokens)`` of request ``r``, requests' tokens one
    after another. Every token has its own kv slot (non-boundary tokens too: the boundary test is
    what must leave them out), a random non-zero cache; ``skip_fraction`` of the tokens get slot
    -1 (and, with ``state_slots``, as many others state slot -1). ``overlap``: the overlapping
    ratio-4 compressor's state (rows of 2048), with ``compress_ratio=4``."""
    num_reqs = len(spans)
    C = compress_ratio
    L = max(first + count for first, count in spans)
    base = make_workload(num_reqs, num_reqs * L, C, block_size=block_size, shuffle=True, nonzero_cache=False,
                         seed=seed, device=device, state_dtype=state_dtype, overlap=overlap)
    g = torch.Generator().manual_seed(seed + 17)
    token_to_req = torch.cat([torch.full((count,), r, dtype=torch.int64) for r, (_, count) in enumerate(spans)])
    positions = torch.cat([torch.arange(first, first + count) for first, count in spans])
    T = positions.numel()
    num_pages = T // SLOTS_PER_PAGE + 2
    kv_slot_mapping = torch.randperm(num_pages * SLOTS_PER_PAGE, generator=g)[:T]
    kv_slot_mapping[torch.rand(T, generator=g) < skip_fraction] = -1
    state_slot_mapping = None
    if state_slots:
        state_slot_mapping = torch.randperm(max(T, 1) * 2, generator=g)[:T]
        state_slot_mapping[torch.rand(T, generator=g) < skip_fraction] = -1
    kv_cache = torch.randint(0, 256, (num_pages, PAGE_BYTES), dtype=torch.uint8, generator=g)
    device = torch.device(device)

    def idx(t: torch.Tensor, default: torch.dtype) -> torch.Tensor:
        return t.to(index_dtype or default).to(device)

    return StepWorkload(
        base=base, token_to_req=idx(token_to_req, torch.int32), positions=idx(positions, torch.int64),
        kv_slot_mapping=idx(kv_slot_mapping, torch.int64), kv_cache=kv_cache.to(device),
        state_slot_mapping=None if state_slot_mapping is None else idx(state_slot_mapping, torch.int64), name=name)


def decode_spans(num_reqs: int, num_boundaries: int, compress_ratio: int,
                 context: int | None = None) -> list[tuple[int, int]]:
    """One token per request; ``num_boundaries`` of them (spread over the batch) close a window
    (position ``m * C - 1``), the others lie one past a window's end. ``context``: the longest
    request's position bound (default ``2 * C``)."""
    if not 0 <= num_boundaries <= num_reqs:
        raise ValueError(f"num_boundaries must be in [0, num_reqs={num_reqs}], got {num_boundaries}")
    C = compress_ratio
    windows = max(1, (context or 2 * C) // C)
    closing = {(k * num_reqs) // max(num_boundaries, 1) for k in range(num_boundaries)}
    spans = []
    for r in range(num_reqs):
        m = 1 + r % windows
        spans.append((m * C - 1 if r in closing else m * C, 1))
    return spans


def official_step(num_reqs: int, total_tokens: int, compress_ratio: int, **kw) -> tuple[StepWorkload, Workload]:
    """An official case run as one step (every token of every request, slots as the case has them):
    ``(step, the official workload)``; the step's boundary tokens are the case's."""
    w = make_workload(num_reqs, total_tokens, compress_ratio, **kw)
    step = StepWorkload(base=w, token_to_req=w.token_to_req, positions=w.positions,
                        kv_slot_mapping=w.kv_slot_mapping, kv_cache=w.kv_cache, name=w.name)
    return step, w


# Engine-shaped steps (``bench.steps``): decode batches of one token a request with 0, 1 and 8
# boundary tokens among them, a prefill chunk with decode tokens, and the official cases.
DECODE_STEPS: tuple[tuple[int, int], ...] = ((1, 0), (1, 1), (64, 0), (64, 1), (64, 8), (256, 0), (256, 1), (256, 8))
SMALL_DECODE_STEPS: tuple[tuple[int, int], ...] = ((1, 0), (1, 1), (4, 1))
PREFILL_CHUNK, MIXED_DECODE_TOKENS = 8192, 64


def decode_step(num_reqs: int, num_boundaries: int, compress_ratio: int, **kw) -> StepWorkload:
    """``num_reqs`` requests of one token each, ``num_boundaries`` of which close a window."""
    return make_step_workload(decode_spans(num_reqs, num_boundaries, compress_ratio), compress_ratio,
                              name=f"decode-R{num_reqs}-B{num_boundaries}-C{compress_ratio}", **kw)


def mixed_step(compress_ratio: int, prefill_tokens: int = PREFILL_CHUNK, decode_tokens: int = MIXED_DECODE_TOKENS,
               decode_boundaries: int = 1, **kw) -> StepWorkload:
    """A prefill chunk (positions ``0..prefill_tokens - 1`` of one request) and ``decode_tokens``
    decode requests of one token, ``decode_boundaries`` of them closing a window."""
    spans = [(0, prefill_tokens), *decode_spans(decode_tokens, decode_boundaries, compress_ratio)]
    return make_step_workload(spans, compress_ratio,
                              name=f"mixed-P{prefill_tokens}+D{decode_tokens}-C{compress_ratio}", **kw)
