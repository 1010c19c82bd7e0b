"""The public operator: argument checks, ``out=`` semantics and route dispatch."""

from __future__ import annotations

import torch

from . import routes
from .launch import call_signature
from .validation import check_flag, check_metadata, check_values

# Launch plans of routes that make them (``launch_plan(args, out)``), by argument signature. A
# plan is stored only after ``check_metadata`` accepted its signature, and the signature holds
# everything that check reads, so finding one means the metadata checks pass.
_PLANS: dict[tuple, object] = {}
_MAX_PLANS = 512


def clear_launch_plans() -> None:
    """Forget every cached launch plan (after changing a route's tuning table, say)."""
    _PLANS.clear()


def _signature(route, tensors, scalars) -> tuple:
    """``(key, plan or None, data pointers)``; ``(None, None, None)`` when the arguments cannot
    form a key."""
    try:
        sig, pointers = call_signature(tensors, scalars)
        key = (route, sig)
        return key, _PLANS.get(key), pointers
    except (AttributeError, TypeError, RuntimeError):  # not plain tensors, unhashable: no plan
        return None, None, None


def _compress_in_graph(state_cache, token_to_req, positions, boundary_token_indices, block_table,
                       rms_norm_weight, cos_sin_cache, kv_slot_mapping, kv_cache, block_size, compress_ratio,
                       rms_norm_eps, out, route, validate, kv_format, overlap) -> torch.Tensor:
    """The call inside ``torch.compile``: through the registered op, which Dynamo neither traces into
    (the routes log, cache plans and sync) nor breaks the graph on. The metadata checks run at trace
    time on fake tensors, with the eager messages; index values are checked (``validate``) when the
    op runs, and the route logs its choice there too."""
    check_metadata(
        state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
        cos_sin_cache, kv_slot_mapping, kv_cache, block_size, compress_ratio, rms_norm_eps, out, kv_format, overlap,
    )
    if not isinstance(route, str):
        raise TypeError(f"route must be a str, got {type(route).__name__}")
    if out is None:  # the op writes in place: a zeroed cache then holds only the written slots
        out = torch.zeros_like(kv_cache, memory_format=torch.contiguous_format)
    torch.ops.ascend_kvc.compress_(
        state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
        cos_sin_cache, kv_slot_mapping, out, block_size, compress_ratio, rms_norm_eps, route, validate,
        kv_format, overlap,
    )
    return out


def c128_256_512_compress(
    state_cache: torch.Tensor,
    token_to_req: torch.Tensor,
    positions: torch.Tensor,
    boundary_token_indices: torch.Tensor,
    block_table: torch.Tensor,
    rms_norm_weight: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_slot_mapping: torch.Tensor,
    kv_cache: torch.Tensor,
    block_size: int,
    compress_ratio: int,
    rms_norm_eps: float = 1.0e-6,
    *,
    out: torch.Tensor | None = None,
    route: str = "auto",
    validate: bool = True,
    kv_format: str = "int8",
    overlap: bool = False,
) -> torch.Tensor:
    """Pool, normalise, quantise and pack one KV slot per boundary token (584 bytes, or a bf16 row).

    Args:
        state_cache: ``[num_state_blocks, block_size, 1024]`` float32 (or bfloat16); a row is 512
            values, then 512 scores (with ``overlap``: ``[..., 2048]``, kv_a, kv_b, score_a, score_b). Any strides.
        token_to_req: ``[num_tokens]`` int32/int64, request of each token.
        positions: ``[num_tokens]`` int64/int32, position of each token in its request.
        boundary_token_indices: ``[num_outputs]`` int64/int32, the tokens that close a window.
        block_table: ``[num_reqs, blocks_per_req]`` int32 (int64 accepted), physical state blocks.
        rms_norm_weight: ``[512]`` bfloat16 (float32 accepted).
        cos_sin_cache: ``[max_pos, 64]`` float32, 32 cos then 32 sin per position.
        kv_slot_mapping: ``[num_tokens]`` int64/int32, destination slot per token; < 0 skips.
        kv_cache: ``[num_pages, P * 584]`` uint8 paged KV cache, ``P >= 1`` slots a page (64:
            ``[num_pages, 37376]``); for ``kv_format="bf16"`` bfloat16 ``[num_blocks, block_size, 512]``
            or ``[num_blocks, block_size, 1, 512]``, one slot a row.
        block_size: rows per state block (``state_cache.shape[1]``), any value >= 1.
        compress_ratio: window length C, one of 128, 256, 512, or 4 (with or without ``overlap``).
        rms_norm_eps: RMSNorm epsilon.
        out: ``None`` returns a new zeroed tensor shaped like ``kv_cache`` holding only the written
            slots (``kv_cache`` is untouched). A uint8 tensor shaped like ``kv_cache`` (may be
            ``kv_cache`` itself) is written in place: only the 584 bytes of each written slot change.
        route: ``"auto"`` (NPU -> ascend, CUDA -> gpgpu, CPU -> reference), ``"reference"``,
            ``"ascend"``, ``"ascend:<stage>"`` (see ``ASCEND_STAGES``) or ``"gpgpu"``.
        validate: check index values before writing (one host sync); two outputs sharing a slot
            are rejected. With ``False`` the kernels skip outputs with out-of-range indices and
            never touch memory outside the tensors; outputs sharing a slot may mix their bytes.
        kv_format: ``"int8"`` (the default: int8 NOPE values), ``"fp8_e4m3"`` (vLLM's ``fp8_ds_mla``
            slot: e4m3fn NOPE values, UE8M0 scales) or ``"bf16"`` (vLLM-Ascend's bf16 row).
        overlap: the overlapping ratio-4 compressor (``compress_ratio=4`` only): each output pools the
            ``2C`` rows ``p - 2C + 1 .. p``, the older ``C`` through ``kv_a``/``score_a``, the newer
            through ``kv_b``/``score_b``; rows at negative positions are masked.
        ``gpgpu`` and ``ascend:fused`` compute every ``kv_format``, any slots per page, ``C`` in
        {4, 128, 256, 512} and the overlap; ``ascend`` (the default rung, ``ascend:triton-quant``)
        ``"int8"`` with 64 slots a page, with ``C`` in {4, 128, 256, 512} and the overlap; the
        study rungs ``"int8"`` with 64 slots a page, ``C`` in {128, 256, 512}, no overlap. For
        anything else a route named explicitly raises ``RouteUnavailableError``; ``route="auto"``
        runs ``gpgpu`` on a GPU, and on an NPU the default where it computes the arguments, else
        ``ascend:fused``.

    Returns:
        The written cache: ``out`` if given, else the new tensor.
    """
    check_flag("validate", validate)
    if torch.compiler.is_compiling():
        return _compress_in_graph(
            state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
            cos_sin_cache, kv_slot_mapping, kv_cache, block_size, compress_ratio, rms_norm_eps, out, route, validate,
            kv_format, overlap)
    tensors = (state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
               cos_sin_cache, kv_slot_mapping, kv_cache, out)
    key, launch, pointers = _signature(route, tensors, (block_size, compress_ratio, rms_norm_eps, kv_format, overlap))
    if launch is not None and not validate:
        return launch(*tensors, pointers)

    args = check_metadata(
        state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
        cos_sin_cache, kv_slot_mapping, kv_cache, block_size, compress_ratio, rms_norm_eps, out, kv_format, overlap,
    )
    chosen = routes.for_arguments(route, routes.resolve(route, args.device), args)
    routes.check_can_run(chosen, args.device)

    if validate:
        check_values(args)

    if launch is None:
        make = getattr(chosen.load(), "launch_plan", None)
        launch = make(args, out, chosen.name) if make is not None else None
        if launch is not None:
            # The plan runs on the caller's tensors next time: only if check_metadata made no copy.
            as_given = all(getattr(args, name) is t for name, t in (
                ("token_to_req", token_to_req), ("positions", positions), ("rms_norm_weight", rms_norm_weight),
                ("boundary_token_indices", boundary_token_indices), ("kv_slot_mapping", kv_slot_mapping)))
            if key is not None and as_given:
                if len(_PLANS) >= _MAX_PLANS:
                    _PLANS.clear()
                _PLANS[key] = launch
    if launch is not None:
        return launch(args.state_cache, args.token_to_req, args.positions, args.boundary_token_indices,
                      args.block_table, args.rms_norm_weight, args.cos_sin_cache, args.kv_slot_mapping,
                      kv_cache, out)

    if out is None:
        out = torch.zeros_like(kv_cache, memory_format=torch.contiguous_format)
    if args.num_outputs == 0 or args.nothing_to_read:
        return out
    chosen.load().run(args, chosen.name, None, out)
    return out
