"""``compress_step``: the compressor's once-per-engine-step call, which finds its own boundary tokens.

A serving engine calls the compressor once per step with all of the step's tokens, as vLLM's
DeepSeek-V4 compressor is called; it does not know which tokens close a window and must not find
out on the host. ``compress_step`` takes the step's token metadata and writes, in place, one slot
for every token ``t`` with ``(positions[t] + 1) % compress_ratio == 0``, ``kv_slot_mapping[t] >= 0``
and (when given) ``state_slot_mapping[t] >= 0``: the bytes ``c128_256_512_compress`` writes for
that token as a boundary token, and no other byte.

On the sync-free routes (``gpgpu``, the Ascend default ``ascend`` = ``ascend:triton-quant`` and
``ascend:fused``) the boundary tokens are found on the device (``ascend_kvc.boundaries``: an int32
list and its count) and the gathers read the count there: with ``validate=False`` a call makes no
host sync and no allocation whose size depends on the outputs, so a CUDA graph (or torch-npu's
NPU graph) captured for one step replays for any step of the same token count. The work is
planned from what the host knows without a sync, the token count, an upper bound on the outputs
(``docs/SERVING.md`` says what that costs). The other routes (``reference``, the study rungs of
the ladder) find the tokens with a ``nonzero`` (one sync) and call ``c128_256_512_compress``.
"""

from __future__ import annotations

import torch

from . import routes
from .launch import call_signature
from .validation import _INDEX_DTYPES, check_flag, check_metadata, check_values

# Step plans by argument signature, as ``api`` keeps the operator's.
_STEP_PLANS: dict[tuple, object] = {}
_MAX_PLANS = 512


def clear_step_plans() -> None:
    """Forget every cached step plan."""
    _STEP_PLANS.clear()


def boundary_tokens(positions: torch.Tensor, kv_slot_mapping: torch.Tensor, compress_ratio: int,
                    state_slot_mapping: torch.Tensor | None = None) -> torch.Tensor:
    """The step's boundary tokens as ``c128_256_512_compress`` takes them (``[num_outputs]``
    int64, token order): framework ops and one host sync (``nonzero``), for the routes that have
    no device search and for ``validate=True``."""
    flags = ((positions + 1) % compress_ratio == 0) & (kv_slot_mapping >= 0)
    if state_slot_mapping is not None:
        flags &= state_slot_mapping >= 0
    return flags.nonzero().squeeze(1)


def _check_state_slots(state_slot_mapping, positions: torch.Tensor) -> torch.Tensor | None:
    if state_slot_mapping is None:
        return None
    if not isinstance(state_slot_mapping, torch.Tensor):
        raise TypeError(f"state_slot_mapping must be a torch.Tensor or None, got {type(state_slot_mapping).__name__}")
    if state_slot_mapping.dtype not in _INDEX_DTYPES:
        raise TypeError(f"state_slot_mapping must have dtype int32 or int64, got "
                        f"{str(state_slot_mapping.dtype).replace('torch.', '')}")
    if state_slot_mapping.dim() != 1 or state_slot_mapping.shape[0] != positions.shape[0]:
        raise ValueError(f"state_slot_mapping must have shape ({positions.shape[0]},) (num_tokens, like "
                         f"token_to_req), got {tuple(state_slot_mapping.shape)}")
    if state_slot_mapping.device != positions.device:
        raise ValueError(f"state_slot_mapping is on {state_slot_mapping.device} but the other tensors are on "
                         f"{positions.device}; all tensors must share one device")
    return state_slot_mapping.contiguous()


def check_step_metadata(state_cache, token_to_req, positions, block_table, rms_norm_weight, cos_sin_cache,
                        kv_slot_mapping, kv_cache, block_size, compress_ratio, rms_norm_eps, state_slot_mapping,
                        kv_format="int8", overlap=False):
    """``(args, state_slots)``: the operator's metadata checks (``kv_cache`` written in place), with
    ``positions`` standing for ``boundary_token_indices`` (a step's outputs are at most its
    tokens), and the state slot mapping checked and contiguous (``None`` if not given)."""
    if not isinstance(positions, torch.Tensor):
        raise TypeError(f"positions must be a torch.Tensor, got {type(positions).__name__}")
    args = check_metadata(state_cache, token_to_req, positions, positions, block_table, rms_norm_weight,
                          cos_sin_cache, kv_slot_mapping, kv_cache, block_size, compress_ratio, rms_norm_eps, kv_cache,
                          kv_format, overlap)
    return args, _check_state_slots(state_slot_mapping, args.positions)


def _step_in_graph(state_cache, token_to_req, positions, block_table, rms_norm_weight, cos_sin_cache,
                   kv_slot_mapping, kv_cache, block_size, compress_ratio, rms_norm_eps, state_slot_mapping,
                   route, validate, kv_format, overlap) -> None:
    """Inside ``torch.compile``: the registered op, opaque to Dynamo (``ops``)."""
    check_step_metadata(state_cache, token_to_req, positions, block_table, rms_norm_weight, cos_sin_cache,
                        kv_slot_mapping, kv_cache, block_size, compress_ratio, rms_norm_eps, state_slot_mapping,
                        kv_format, overlap)
    if not isinstance(route, str):
        raise TypeError(f"route must be a str, got {type(route).__name__}")
    torch.ops.ascend_kvc.compress_step_(
        state_cache, token_to_req, positions, block_table, rms_norm_weight, cos_sin_cache, kv_slot_mapping,
        kv_cache, block_size, compress_ratio, rms_norm_eps, state_slot_mapping, route, validate, kv_format, overlap)


def compress_step(
    state_cache: torch.Tensor,
    token_to_req: torch.Tensor,
    positions: torch.Tensor,
    block_table: torch.Tensor,
    rms_norm_weight: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_slot_mapping: torch.Tensor,
    kv_cache: torch.Tensor,
    *,
    block_size: int,
    compress_ratio: int,
    rms_norm_eps: float = 1.0e-6,
    state_slot_mapping: torch.Tensor | None = None,
    route: str = "auto",
    validate: bool = True,
    kv_format: str = "int8",
    overlap: bool = False,
) -> None:
    """Write the compressed KV slot of every boundary token of one engine step into ``kv_cache``.

    Token ``t`` gives an output iff ``(positions[t] + 1) % compress_ratio == 0``,
    ``kv_slot_mapping[t] >= 0`` and ``state_slot_mapping`` is ``None`` or ``state_slot_mapping[t]
    >= 0``. Each output's 584 bytes are those ``c128_256_512_compress`` writes for that token as a
    boundary token (``out=kv_cache``); no other byte of ``kv_cache`` changes.

    Args:
        state_cache: ``[num_state_blocks, block_size, 1024]`` float32 (or bfloat16).
        token_to_req: ``[num_tokens]`` int32/int64, request of each of the step's tokens.
        positions: ``[num_tokens]`` int64/int32, position of each token in its request.
        block_table: ``[num_reqs, blocks_per_req]`` int32/int64, physical state blocks.
        rms_norm_weight: ``[512]`` bfloat16 (float32 accepted).
        cos_sin_cache: ``[max_pos, 64]`` float32, 32 cos then 32 sin per position.
        kv_slot_mapping: ``[num_tokens]`` int64/int32, destination slot per token; < 0 gives no output.
        kv_cache: ``[num_pages, P * 584]`` uint8 (64 slots: ``[num_pages, 37376]``), or the ``bf16``
            format's bfloat16 ``[num_blocks, block_size(, 1), 512]``; written in place (rows may be
            strided, not overlapping).
        block_size: rows per state block (``state_cache.shape[1]``), any value >= 1.
        compress_ratio: window length C, one of 128, 256, 512, or 4 (with or without ``overlap``).
        rms_norm_eps: RMSNorm epsilon.
        state_slot_mapping: ``[num_tokens]`` int64/int32 or ``None``; a token whose entry is < 0
            (padding, a request without compressor state) gives no output.
        route: as for ``c128_256_512_compress``. ``gpgpu``, ``ascend`` (``ascend:triton-quant``) and
            ``ascend:fused`` find the boundary tokens on the device; the others with a host sync.
        validate: check shapes, dtypes and devices, and the index values of the tokens that give
            outputs as ``c128_256_512_compress`` does (one host sync); ``ValueError``/``TypeError``
            naming the argument, before anything is written. With ``False``, on the device-search
            routes: no host sync, no allocation that depends on the outputs, capturable in a graph;
            tokens with out-of-range indices are skipped, and nothing outside the tensors is touched.
        kv_format, overlap: as for ``c128_256_512_compress`` (a route that cannot compute them raises
            ``RouteUnavailableError`` when named; ``"auto"`` picks as that function does, ``gpgpu``
            on CUDA tensors and ``ascend:fused`` on NPU tensors for what the default rung does not
            compute).
    """
    check_flag("validate", validate)
    if torch.compiler.is_compiling():
        _step_in_graph(state_cache, token_to_req, positions, block_table, rms_norm_weight, cos_sin_cache,
                       kv_slot_mapping, kv_cache, block_size, compress_ratio, rms_norm_eps, state_slot_mapping,
                       route, validate, kv_format, overlap)
        return
    # Argument 3 of a step plan is the state slot mapping (the kv slot mapping when there is none).
    slots3 = kv_slot_mapping if state_slot_mapping is None else state_slot_mapping
    tensors = (state_cache, token_to_req, positions, slots3, block_table, rms_norm_weight, cos_sin_cache,
               kv_slot_mapping, kv_cache)
    key, plan, pointers = None, None, None
    try:
        sig, pointers = call_signature(tensors, (block_size, compress_ratio, rms_norm_eps, state_slot_mapping is None,
                                                        kv_format, overlap))
        key = (route, sig)
        plan = _STEP_PLANS.get(key)
    except (AttributeError, TypeError, RuntimeError):  # not plain tensors, unhashable: no plan
        pass
    if plan is not None and not validate:
        plan(*tensors, kv_cache, pointers)
        return

    args, state_slots = check_step_metadata(
        state_cache, token_to_req, positions, block_table, rms_norm_weight, cos_sin_cache, kv_slot_mapping,
        kv_cache, block_size, compress_ratio, rms_norm_eps, state_slot_mapping, kv_format, overlap)
    chosen = routes.for_arguments(route, routes.resolve(route, args.device), args)
    routes.check_can_run(chosen, args.device)

    boundary = None
    if validate:
        boundary = boundary_tokens(args.positions, args.kv_slot_mapping, args.compress_ratio, state_slots)
        check_values(_with_boundaries(args, boundary))

    if plan is None:
        make = getattr(chosen.load(), "step_plan", None)
        plan = make(args, kv_cache, chosen.name, state_slots is not None) if make is not None else None
        # The plan runs on the caller's tensors next time: only if no check made a copy.
        as_given = all(getattr(args, name) is t for name, t in (
            ("token_to_req", token_to_req), ("positions", positions), ("rms_norm_weight", rms_norm_weight),
            ("kv_slot_mapping", kv_slot_mapping))) and state_slots is state_slot_mapping
        if plan is not None and key is not None and as_given:
            if len(_STEP_PLANS) >= _MAX_PLANS:
                _STEP_PLANS.clear()
            _STEP_PLANS[key] = plan
    if plan is not None:
        plan(args.state_cache, args.token_to_req, args.positions,
             args.kv_slot_mapping if state_slots is None else state_slots, args.block_table, args.rms_norm_weight,
             args.cos_sin_cache, args.kv_slot_mapping, kv_cache, kv_cache)
        return

    # A route without a device search: find the tokens here (one sync) and run the operator.
    from .api import c128_256_512_compress

    if boundary is None:
        boundary = boundary_tokens(args.positions, args.kv_slot_mapping, args.compress_ratio, state_slots)
    c128_256_512_compress(args.state_cache, args.token_to_req, args.positions, boundary, args.block_table,
                          args.rms_norm_weight, args.cos_sin_cache, args.kv_slot_mapping, kv_cache, args.block_size,
                          args.compress_ratio, args.rms_norm_eps, out=kv_cache, route=chosen.name, validate=False,
                          kv_format=args.kv_format, overlap=args.overlap)


def _with_boundaries(args, boundary: torch.Tensor):
    from dataclasses import replace

    return replace(args, boundary_token_indices=boundary)
