"""Argument checks (SPEC "Bad input"): metadata always, values when ``validate=True``.

Metadata checks read only shapes, dtypes and devices. Value checks run as one batched pass over
all outputs (``indexing.plan_outputs``) and cost one host sync; they raise before anything is
written.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import torch

from .indexing import OutputPlan
from .layout import COMPRESS_RATIOS, COS_SIN_WIDTH, HEAD_DIM, PAGE_BYTES, STATE_WIDTH

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

    @property
    def device(self) -> torch.device:
        return self.state_cache.device

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


def check_metadata(
    state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
    cos_sin_cache, kv_slot_mapping, kv_cache, block_size, compress_ratio, rms_norm_eps, out,
) -> CompressArgs:
    """Check dtypes, ranks, widths, devices and scalar arguments; return the normalised arguments."""
    _tensor("state_cache", state_cache, (torch.float32, torch.bfloat16), 3)
    _width("state_cache", state_cache, 2, STATE_WIDTH)
    _tensor("token_to_req", token_to_req, _INDEX_DTYPES, 1)
    _tensor("positions", positions, _INDEX_DTYPES, 1)
    _tensor("boundary_token_indices", boundary_token_indices, _INDEX_DTYPES, 1)
    _tensor("block_table", block_table, _INDEX_DTYPES, 2)
    _tensor("rms_norm_weight", rms_norm_weight, (torch.bfloat16, torch.float32), 1)
    _width("rms_norm_weight", rms_norm_weight, 0, HEAD_DIM)
    _tensor("cos_sin_cache", cos_sin_cache, (torch.float32,), 2)
    _width("cos_sin_cache", cos_sin_cache, 1, COS_SIN_WIDTH)
    _tensor("kv_slot_mapping", kv_slot_mapping, _INDEX_DTYPES, 1)
    _tensor("kv_cache", kv_cache, (torch.uint8,), 2)
    _width("kv_cache", kv_cache, 1, PAGE_BYTES)

    block_size = _int("block_size", block_size, 1)
    if state_cache.shape[1] != block_size:
        raise ValueError(
            f"state_cache must have block_size={block_size} rows per block in dim 1, got shape {tuple(state_cache.shape)}"
        )
    if isinstance(compress_ratio, bool) or not isinstance(compress_ratio, numbers.Integral):
        raise TypeError(f"compress_ratio must be an int, got {type(compress_ratio).__name__}")
    if compress_ratio not in COMPRESS_RATIOS:
        raise ValueError(f"compress_ratio must be one of {COMPRESS_RATIOS}, got {compress_ratio}")
    if isinstance(rms_norm_eps, bool) or not isinstance(rms_norm_eps, numbers.Real) or not rms_norm_eps >= 0:
        raise ValueError(f"rms_norm_eps must be a finite float >= 0, got {rms_norm_eps!r}")

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
        _tensor("out", out, (torch.uint8,), 2)
        if out.shape != kv_cache.shape:
            raise ValueError(f"out must have kv_cache's shape {tuple(kv_cache.shape)}, got {tuple(out.shape)}")
        if out.stride(1) != 1:
            raise ValueError(f"out must have contiguous rows (stride 1 in dim 1), got strides {out.stride()}")
        tensors["out"] = out
    for name, t in tensors.items():
        if t.device != device:
            raise ValueError(f"{name} is on {t.device} but state_cache is on {device}; all tensors must share one device")

    # Kernels index the 1-D tensors with unit stride; a strided view is copied (a no-op otherwise).
    return CompressArgs(
        state_cache, token_to_req.contiguous(), positions.contiguous(), boundary_token_indices.contiguous(),
        block_table, rms_norm_weight.contiguous(), cos_sin_cache, kv_slot_mapping.contiguous(), kv_cache,
        block_size, int(compress_ratio), float(rms_norm_eps),
    )


def raise_on_bad_values(plan: OutputPlan, args: CompressArgs) -> None:
    """Raise ``ValueError`` naming the first offending output; one host sync for all checks."""
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
