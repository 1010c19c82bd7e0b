"""Argument checks (docs/CONTRACT.md, "Bad input"): metadata always, values when ``validate=True``.

Metadata checks read only shapes, dtypes and devices. Value checks (``check_values``) cost a
couple of dozen framework ops and one host sync, whatever the number of outputs: on an NPU every
framework op is a launch, so the common case (nothing wrong) only asks "is anything wrong?". When
something is, the detailed per-check pass (``indexing.plan_outputs``) names the first offending
output; that path may cost more, it raises anyway. Both raise before anything is written.
"""

from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass

import torch

from .indexing import OutputPlan, plan_for
from .layout import (
    BF16_ROW,
    COMPRESS_RATIOS,
    COS_SIN_WIDTH,
    DEFAULT_KV_FORMAT,
    HEAD_DIM,
    KV_FORMATS,
    OVERLAP_RATIO,
    PAGE_BYTES,
    PLAIN_RATIOS,
    SLOT_BYTES,
    num_slots,
    slots_per_page,
    state_width,
    window_rows,
)

_INDEX_DTYPES = (torch.int32, torch.int64)


@dataclass
class CompressArgs:
    """The operator's arguments after metadata checks."""

    state_cache: torch.Tensor
    token_to_req: torch.Tensor
    positions: torch.Tensor
    boundary_token_indices: torch.Tensor
    block_table: torch.Tensor
    rms_norm_weight: torch.Tensor
    cos_sin_cache: torch.Tensor
    kv_slot_mapping: torch.Tensor
    kv_cache: torch.Tensor
    block_size: int
    compress_ratio: int
    rms_norm_eps: float
    kv_format: str = DEFAULT_KV_FORMAT
    overlap: bool = False

    @property
    def device(self) -> torch.device:
        return self.state_cache.device

    @property
    def window(self) -> int:
        """State rows one output pools: ``C``, or ``2C`` with overlap."""
        return window_rows(self.compress_ratio, self.overlap)

    @property
    def slots_per_page(self) -> int:
        """``P``: slots in one page row of a 584-byte-format cache (1 for bf16 rows)."""
        return slots_per_page(self.kv_cache)

    @property
    def num_slots(self) -> int:
        return num_slots(self.kv_cache)

    @property
    def num_outputs(self) -> int:
        return self.boundary_token_indices.shape[0]

    @property
    def nothing_to_read(self) -> bool:
        """No token, state block or table entry exists: every output is skipped."""
        return self.token_to_req.shape[0] == 0 or self.state_cache.shape[0] == 0 or self.block_table.numel() == 0


def _tensor(name: str, value, dtypes: tuple[torch.dtype, ...], rank: int) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dtype not in dtypes:
        names = " or ".join(str(d).replace("torch.", "") for d in dtypes)
        raise TypeError(f"{name} must have dtype {names}, got {str(value.dtype).replace('torch.', '')}")
    if value.dim() != rank:
        raise ValueError(f"{name} must have rank {rank}, got shape {tuple(value.shape)}")
    return value


def _width(name: str, value: torch.Tensor, dim: int, expected: int) -> None:
    if value.shape[dim] != expected:
        raise ValueError(f"{name} must have size {expected} in dim {dim}, got shape {tuple(value.shape)}")


def _int(name: str, value, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


# eps is a float32 in every kernel. The least: float32's smallest normal number (eps = 0 leaves an
# all-zero window at 0 * rsqrt(0) = NaN, whose bytes differ between routes; a subnormal eps is 0 on
# a device that flushes subnormals). The most: float32's largest (more would be inf there).
RMS_NORM_EPS_MIN = 2.0**-126
RMS_NORM_EPS_MAX = float(torch.finfo(torch.float32).max)


def check_format(kv_format, overlap, compress_ratio) -> tuple[str, bool]:
    """``kv_format`` one of ``KV_FORMATS``; ``overlap`` a bool, only with ``compress_ratio == 4``."""
    if not isinstance(kv_format, str):
        raise TypeError(f"kv_format must be a str, got {type(kv_format).__name__}")
    if kv_format not in KV_FORMATS:
        raise ValueError(f"kv_format must be one of {KV_FORMATS}, got {kv_format!r}")
    overlap = check_flag("overlap", overlap)
    if overlap and compress_ratio != OVERLAP_RATIO:
        raise ValueError(f"overlap=True needs compress_ratio={OVERLAP_RATIO} (the overlapping compressor), "
                         f"got compress_ratio={compress_ratio}")
    return kv_format, overlap


def check_scalars(block_size, compress_ratio, rms_norm_eps, kv_format=DEFAULT_KV_FORMAT,
                  overlap=False) -> tuple[int, int, float, str, bool]:
    """``block_size``, ``compress_ratio``, ``rms_norm_eps``, ``kv_format`` and ``overlap`` as the
    operator takes them (the layer checks its own with this too): ints that are ints, not floats or
    bools; an eps in float32's normal range, ``[RMS_NORM_EPS_MIN, RMS_NORM_EPS_MAX]``; a known
    format; ``overlap`` a bool and only with ratio 4."""
    block_size = _int("block_size", block_size, 1)
    if isinstance(compress_ratio, bool) or not isinstance(compress_ratio, numbers.Integral):
        raise TypeError(f"compress_ratio must be an int, got {type(compress_ratio).__name__}")
    if compress_ratio not in PLAIN_RATIOS:
        raise ValueError(f"compress_ratio must be one of {COMPRESS_RATIOS}, got {compress_ratio} ({OVERLAP_RATIO} is "
                         f"accepted too, with or without overlap)")
    kv_format, overlap = check_format(kv_format, overlap, compress_ratio)
    if (isinstance(rms_norm_eps, bool) or not isinstance(rms_norm_eps, numbers.Real)
            or not math.isfinite(rms_norm_eps) or not RMS_NORM_EPS_MIN <= rms_norm_eps <= RMS_NORM_EPS_MAX):
        raise ValueError(f"rms_norm_eps must be a finite float >= 2**-126 (the smallest normal float32) and "
                         f"<= {RMS_NORM_EPS_MAX!r} (the largest), got {rms_norm_eps!r}")
    return block_size, int(compress_ratio), float(rms_norm_eps), kv_format, overlap


def check_flag(name: str, value) -> bool:
    """A flag must be a bool: ``validate=0`` or ``None`` reads as a wish nobody can be sure of."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return value


def _check_kv_cache(name: str, kv_cache, kv_format: str) -> None:
    """The cache's dtype and shape for ``kv_format`` (docs/CONTRACT.md, "Cache formats")."""
    if not isinstance(kv_cache, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(kv_cache).__name__}")
    if kv_format == "bf16":
        if kv_cache.dtype != torch.bfloat16:
            raise TypeError(f"{name} must have dtype bfloat16 for kv_format='bf16', got "
                            f"{str(kv_cache.dtype).replace('torch.', '')}")
        if kv_cache.dim() not in (3, 4) or kv_cache.shape[-1] != BF16_ROW or (
                kv_cache.dim() == 4 and kv_cache.shape[2] != 1):
            raise ValueError(f"{name} must be shaped [num_blocks, block_size, {BF16_ROW}] or "
                             f"[num_blocks, block_size, 1, {BF16_ROW}] for kv_format='bf16', "
                             f"got {tuple(kv_cache.shape)}")
        return
    if kv_cache.dtype != torch.uint8:
        raise TypeError(f"{name} must have dtype uint8 for kv_format={kv_format!r}, got "
                        f"{str(kv_cache.dtype).replace('torch.', '')}")
    if kv_cache.dim() != 2:
        raise ValueError(f"{name} must have rank 2, got shape {tuple(kv_cache.shape)}")
    width = kv_cache.shape[1]
    if width < SLOT_BYTES or width % SLOT_BYTES:
        raise ValueError(f"{name} must have size {PAGE_BYTES} (64 slots of {SLOT_BYTES} bytes a page) or another "
                         f"multiple of {SLOT_BYTES} (P >= 1 slots a page) in dim 1, got shape {tuple(kv_cache.shape)}")


def _check_out_rows(out: torch.Tensor, kv_format: str) -> None:
    """``out``'s rows (pages, or bf16 rows of 512) are contiguous and do not overlap."""
    if kv_format == "bf16":
        try:
            rows = out.view(-1, BF16_ROW)
        except RuntimeError:
            raise ValueError(f"out must be viewable as [-1, {BF16_ROW}] rows (kv_format='bf16'), got shape "
                             f"{tuple(out.shape)} with strides {out.stride()}") from None
        if rows.stride(1) != 1 or (rows.shape[0] > 1 and rows.stride(0) < BF16_ROW):
            raise ValueError(f"out must have contiguous, non-overlapping rows of {BF16_ROW} values "
                             f"(kv_format='bf16'), got strides {out.stride()}")
        return
    if out.stride(1) != 1:
        raise ValueError(f"out must have contiguous rows (stride 1 in dim 1), got strides {out.stride()}")
    if out.shape[0] > 1 and out.stride(0) < out.shape[1]:  # page.expand(n, -1), say: aliased pages
        raise ValueError(f"out must not have overlapping rows (stride(0) >= {out.shape[1]} when it has more than "
                         f"one row), got strides {out.stride()}")


def check_metadata(
    state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
    cos_sin_cache, kv_slot_mapping, kv_cache, block_size, compress_ratio, rms_norm_eps, out,
    kv_format=DEFAULT_KV_FORMAT, overlap=False,
) -> CompressArgs:
    """Check dtypes, ranks, widths, devices and scalar arguments; return the normalised arguments."""
    # The scalars first: the state width and the cache's shape depend on overlap and kv_format.
    block_size, compress_ratio, rms_norm_eps, kv_format, overlap = check_scalars(
        block_size, compress_ratio, rms_norm_eps, kv_format, overlap)
    _tensor("state_cache", state_cache, (torch.float32, torch.bfloat16), 3)
    if state_cache.shape[2] != state_width(overlap):
        what = ("[kv_a 512 | kv_b 512 | score_a 512 | score_b 512] with overlap=True" if overlap
                else "512 values, then 512 scores")
        raise ValueError(f"state_cache must have size {state_width(overlap)} in dim 2 ({what}), got shape "
                         f"{tuple(state_cache.shape)}")
    _tensor("token_to_req", token_to_req, _INDEX_DTYPES, 1)
    _tensor("positions", positions, _INDEX_DTYPES, 1)
    _tensor("boundary_token_indices", boundary_token_indices, _INDEX_DTYPES, 1)
    _tensor("block_table", block_table, _INDEX_DTYPES, 2)
    _tensor("rms_norm_weight", rms_norm_weight, (torch.bfloat16, torch.float32), 1)
    _width("rms_norm_weight", rms_norm_weight, 0, HEAD_DIM)
    _tensor("cos_sin_cache", cos_sin_cache, (torch.float32,), 2)
    _width("cos_sin_cache", cos_sin_cache, 1, COS_SIN_WIDTH)
    _tensor("kv_slot_mapping", kv_slot_mapping, _INDEX_DTYPES, 1)
    _check_kv_cache("kv_cache", kv_cache, kv_format)

    if state_cache.shape[1] != block_size:
        raise ValueError(
            f"state_cache must have block_size={block_size} rows per block in dim 1, "
            f"got shape {tuple(state_cache.shape)}"
        )

    num_tokens = token_to_req.shape[0]
    for name, t in (("positions", positions), ("kv_slot_mapping", kv_slot_mapping)):
        if t.shape[0] != num_tokens:
            raise ValueError(f"{name} must have num_tokens={num_tokens} entries (like token_to_req), got {t.shape[0]}")

    device = state_cache.device
    tensors = {
        "token_to_req": token_to_req, "positions": positions, "boundary_token_indices": boundary_token_indices,
        "block_table": block_table, "rms_norm_weight": rms_norm_weight, "cos_sin_cache": cos_sin_cache,
        "kv_slot_mapping": kv_slot_mapping, "kv_cache": kv_cache,
    }
    if out is not None:
        _check_kv_cache("out", out, kv_format)
        if out.shape != kv_cache.shape:
            raise ValueError(f"out must have kv_cache's shape {tuple(kv_cache.shape)}, got {tuple(out.shape)}")
        _check_out_rows(out, kv_format)
        tensors["out"] = out
    for name, t in tensors.items():
        if t.device != device:
            raise ValueError(f"{name} is on {t.device} but state_cache is on {device}; "
                             "all tensors must share one device")

    # Kernels index the 1-D tensors with unit stride; a strided view is copied (a no-op otherwise).
    return CompressArgs(
        state_cache, token_to_req.contiguous(), positions.contiguous(), boundary_token_indices.contiguous(),
        block_table, rms_norm_weight.contiguous(), cos_sin_cache, kv_slot_mapping.contiguous(), kv_cache,
        block_size, compress_ratio, rms_norm_eps, kv_format, overlap,
    )


@functools.lru_cache(maxsize=64)
def _window_samples(window: int, block_size: int, device: torch.device) -> torch.Tensor:
    """Offsets ``0, bs, 2 bs, ... (< W), W - 1`` back from p: positions that hit every block column
    of the window ``[p - W + 1, p]`` at least once (consecutive samples are at most bs apart)."""
    offsets = list(range(0, window, block_size)) + [window - 1]
    return torch.tensor(offsets, dtype=torch.int64, device=device)


def _anything_wrong(args: CompressArgs) -> torch.Tensor | None:
    """A 0-d bool tensor: does any output fail a value check, or share a slot with another?

    About two dozen framework ops and no host sync. ``None`` when a dimension is empty or no
    position can be valid, which the detailed pass handles.
    """
    C, bs = args.compress_ratio, args.block_size
    num_tokens = args.token_to_req.shape[0]
    num_reqs, width = args.block_table.shape
    num_blocks = args.state_cache.shape[0]
    # The last valid boundary position: its window must fit the table and its RoPE row the cache.
    max_pos = min(width * bs, C * -(-args.cos_sin_cache.shape[0] // C)) - 1
    if min(num_tokens, num_reqs, width, num_blocks) == 0 or max_pos < C - 1:
        return None
    b = args.boundary_token_indices
    b_safe = b.clamp(0, num_tokens - 1)
    per_token = torch.stack([args.token_to_req, args.positions, args.kv_slot_mapping], dim=1)  # [T, 3] int64
    req, pos, slot = per_token[b_safe].unbind(1)
    samples = _window_samples(args.window, bs, b.device)
    t = pos[:, None] - samples  # [N, K] window positions, every column hit
    if args.overlap:  # the older C rows at negative positions are masked, not read
        t = torch.where(samples >= C, t.clamp(min=0), t)
    t_safe = t.clamp(0, max_pos)  # catches p < C - 1, a column past the table, a RoPE row past the cache
    req_safe = req.clamp(0, num_reqs - 1)
    blk = args.block_table[req_safe[:, None], t_safe.div(bs, rounding_mode="floor")]  # [N, K]
    got = torch.cat([t, blk, req[:, None], slot[:, None]], dim=1)
    safe = torch.cat([t_safe, blk.clamp(0, num_blocks - 1), req_safe[:, None],
                      slot.clamp(max=args.num_slots - 1)[:, None]], dim=1)
    bad = ((got != safe).any(dim=1) & (slot >= 0)) | (b != b_safe)  # skipped outputs: only b is checked
    ordered = slot.sort().values
    shared = (ordered[1:] == ordered[:-1]) & (ordered[1:] >= 0)
    return torch.cat([bad, shared]).any()


def check_values(args: CompressArgs) -> None:
    """Raise ``ValueError`` naming the first offending output, or two outputs sharing a slot.

    One host sync. Two outputs (not skipped) mapped to the same slot are rejected: their bytes
    would race. With ``validate=False`` nothing checks this, and a shared slot ends up with the
    bytes of one writer, or a per-byte mix of several.
    """
    if args.num_outputs == 0:
        return
    wrong = _anything_wrong(args)
    if wrong is not None and not bool(wrong):  # the one sync
        return
    plan = plan_for(args)
    _raise_first_offending(plan, args)
    _raise_on_shared_slots(plan, args)
    if wrong is not None:
        raise AssertionError("ascend_kvc: the value checks disagree; please report this input")


def _raise_on_shared_slots(plan: OutputPlan, args: CompressArgs) -> None:
    slots = plan.slot.tolist()
    first_writer: dict[int, int] = {}
    for j, s in enumerate(slots):
        if s < 0:
            continue
        if s in first_writer:
            i = first_writer[s]
            bi, bj = int(args.boundary_token_indices[i]), int(args.boundary_token_indices[j])
            raise ValueError(f"kv_slot_mapping: outputs {i} and {j} (boundary tokens {bi} and {bj}) map to the "
                             f"same slot {s}; nothing was written")
        first_writer[s] = j


def raise_on_bad_values(plan: OutputPlan | None, args: CompressArgs) -> None:
    """``check_values`` for a caller that has already paid for a detailed ``plan``: the same
    errors, from the plan's checks, and one host sync. Without a plan: ``check_values(args)``."""
    if plan is None:
        check_values(args)
        return
    if not plan.checks or plan.slot.numel() == 0:
        return
    ordered = plan.slot.sort().values  # -1 for skipped and invalid outputs
    shared = (ordered[1:] == ordered[:-1]) & (ordered[1:] >= 0)
    if not bool(torch.stack([b for _, _, b in plan.checks]).any() | shared.any()):  # the one sync
        return
    _raise_first_offending(plan, args)
    _raise_on_shared_slots(plan, args)


def _raise_first_offending(plan: OutputPlan, args: CompressArgs) -> None:
    """Raise ``ValueError`` naming the first offending output of a detailed ``plan``."""
    if not plan.checks or plan.slot.numel() == 0:
        return
    bad = torch.stack([b for _, _, b in plan.checks])  # [num_checks, N]
    any_bad = bad.any(dim=0)
    first_output = torch.where(any_bad.any(), any_bad.int().argmax(), -1)
    first_check = bad[:, first_output.clamp(min=0)].int().argmax()
    i, k = torch.stack([first_output, first_check]).tolist()  # the one sync
    if i < 0:
        return
    name, what, _ = plan.checks[k]
    b = int(args.boundary_token_indices[i])
    detail = f"boundary token {b}"
    if 0 <= b < args.token_to_req.shape[0]:
        detail += (f", request {int(args.token_to_req[b])}, position {int(args.positions[b])}, "
                   f"slot {int(args.kv_slot_mapping[b])}")
    raise ValueError(f"{name}: output {i} ({detail}) is invalid: {what}; nothing was written")
