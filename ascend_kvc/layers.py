"""A compressor layer for a model's forward pass: writes the compressed KV slots of one step.

The layer owns what is fixed per model (the RMSNorm weight, the RoPE cos/sin table, the window
length and block size) and takes what changes per step (the state cache, the batch's token
metadata, the block table, the slot mapping and the KV cache to write). It calls the registered
op ``torch.ops.ascend_kvc.compress_``, so ``torch.compile(layer, fullgraph=True)`` keeps it in
one graph, and with ``validate=False`` (the default here) a CUDA graph can capture it.
``step`` is the once-per-step form (``torch.ops.ascend_kvc.compress_step_``): the engine's token
metadata in, no boundary indices needed.
"""

from __future__ import annotations

import torch

from . import ops  # noqa: F401  (defines torch.ops.ascend_kvc.compress_)
from .validation import check_flag, check_scalars


class CompressorKVWriter(torch.nn.Module):
    """``forward(...)`` writes one slot (584 bytes, or a bf16 row) per boundary token into ``kv_cache`` in place;
    ``step(...)`` does the same for one engine step, finding the boundary tokens itself.

    Args:
        rms_norm_weight: ``[512]`` bfloat16 (float32 accepted), kept as a buffer.
        cos_sin_cache: ``[max_pos, 64]`` float32, 32 cos then 32 sin per position, kept as a buffer.
        block_size: rows per state block.
        compress_ratio: window length C, one of 128, 256, 512, or 4 (with or without ``overlap``).
        rms_norm_eps: RMSNorm epsilon.
        kv_format: ``"int8"`` (default), ``"fp8_e4m3"`` or ``"bf16"``: the cache this layer writes.
        overlap: the overlapping ratio-4 compressor (state rows of 2048: kv_a, kv_b, score_a, score_b).
        route: as for ``c128_256_512_compress`` (``"auto"`` picks by the tensors' device).
        validate: check index values on every call (one host sync; not capturable in a CUDA
            graph). Off by default: this is the hot path, where the kernels skip out-of-range
            outputs and never touch memory outside the tensors.
    """

    def __init__(
        self,
        rms_norm_weight: torch.Tensor,
        cos_sin_cache: torch.Tensor,
        *,
        block_size: int,
        compress_ratio: int,
        rms_norm_eps: float = 1.0e-6,
        route: str = "auto",
        validate: bool = False,
        kv_format: str = "int8",
        overlap: bool = False,
    ) -> None:
        super().__init__()
        self.register_buffer("rms_norm_weight", rms_norm_weight)
        self.register_buffer("cos_sin_cache", cos_sin_cache)
        # The function's own checks: 8.9 is not a block size, and the op would coerce validate=None.
        (self.block_size, self.compress_ratio, self.rms_norm_eps, self.kv_format,
         self.overlap) = check_scalars(block_size, compress_ratio, rms_norm_eps, kv_format, overlap)
        if not isinstance(route, str):
            raise TypeError(f"route must be a str, got {type(route).__name__}")
        self.route = route
        self.validate = check_flag("validate", validate)

    def forward(
        self,
        state_cache: torch.Tensor,            # [num_state_blocks, block_size, 1024] float32/bfloat16
        token_to_req: torch.Tensor,           # [num_tokens] int32/int64
        positions: torch.Tensor,              # [num_tokens] int64/int32
        boundary_token_indices: torch.Tensor,  # [num_outputs] int64/int32
        block_table: torch.Tensor,            # [num_reqs, blocks_per_req] int32/int64
        kv_slot_mapping: torch.Tensor,        # [num_tokens] int64/int32, < 0 skips
        kv_cache: torch.Tensor,               # [num_pages, P * 584] uint8 (or bf16 rows), written in place
    ) -> torch.Tensor:
        torch.ops.ascend_kvc.compress_(
            state_cache, token_to_req, positions, boundary_token_indices, block_table,
            self.rms_norm_weight, self.cos_sin_cache, kv_slot_mapping, kv_cache,
            self.block_size, self.compress_ratio, self.rms_norm_eps, self.route, self.validate,
            self.kv_format, self.overlap,
        )
        return kv_cache

    def step(
        self,
        state_cache: torch.Tensor,            # [num_state_blocks, block_size, 1024] float32/bfloat16
        token_to_req: torch.Tensor,           # [num_tokens] int32/int64
        positions: torch.Tensor,              # [num_tokens] int64/int32
        block_table: torch.Tensor,            # [num_reqs, blocks_per_req] int32/int64
        kv_slot_mapping: torch.Tensor,        # [num_tokens] int64/int32, < 0: no output
        kv_cache: torch.Tensor,               # [num_pages, P * 584] uint8 (or bf16 rows), written in place
        state_slot_mapping: torch.Tensor | None = None,  # [num_tokens] int64/int32, < 0: no output
    ) -> torch.Tensor:
        """One engine step: every token ``t`` of the step with ``(positions[t] + 1) % C == 0``, a
        slot ``>= 0`` and (if given) a state slot ``>= 0`` writes its compressed slot
        (``ascend_kvc.compress_step`` through ``torch.ops.ascend_kvc.compress_step_``). What a
        model's forward calls with the metadata the engine already has; with ``validate=False`` it
        finds the boundary tokens on the device, so a graph captured once replays for any step."""
        torch.ops.ascend_kvc.compress_step_(
            state_cache, token_to_req, positions, block_table, self.rms_norm_weight, self.cos_sin_cache,
            kv_slot_mapping, kv_cache, self.block_size, self.compress_ratio, self.rms_norm_eps, state_slot_mapping,
            self.route, self.validate, self.kv_format, self.overlap,
        )
        return kv_cache

    def extra_repr(self) -> str:
        return (f"block_size={self.block_size}, compress_ratio={self.compress_ratio}, "
                f"rms_norm_eps={self.rms_norm_eps}, route={self.route!r}, validate={self.validate}, "
                f"kv_format={self.kv_format!r}, overlap={self.overlap}")
