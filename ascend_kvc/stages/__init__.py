"""The Ascend ladder: which kernels each stage of ``ASCEND_STAGES`` launches, with which constexprs.

The rungs, bottom first, and the modules of this package that run them:

| rung | modules |
|---|---|
| ``random-gather`` | ``random_gather``, ``finalize`` |
| ``pre-gather`` | ``pregather``, ``finalize`` |
| ``block-gather`` | ``block_gather`` (BLOCK_D 64, every tile masked), ``finalize`` |
| ``block-gather-nomask`` | ``block_gather`` (BLOCK_D 64), ``finalize`` |
| ``block-d128`` | ``block_gather`` (BLOCK_D 128), ``finalize`` |
| ``block-d256`` | ``block_gather`` (BLOCK_D 256), ``finalize`` |
| ``block-d512`` | ``block_gather`` (BLOCK_D 512, the RMSNorm too), ``finalize`` |
| ``byte-scatter`` | ``block_gather`` (the RoPE rotation too), ``finalize``, ``scatter`` |
| ``triton-quant`` | ``block_gather`` (its own kernel, bf16 out), ``quantize``, ``scatter``; |
| | split: ``split_window``; ``plan`` |
| ``fused`` | ``fused``; split: ``split_window``; ``plan`` |

Every rung computes the same bytes; they differ in how the window reaches the chip and how the
bytes leave it. Rungs up to ``block-d512`` finalize with framework tensor ops and write with an
``index_put``. ``byte-scatter`` rotates the RoPE dims in the gather, quantises a real bf16 tensor
with framework ops and copies the bytes with a pure-uint8 Triton scatter: 12 device launches, no
host sync. ``triton-quant`` (the default ``ascend`` route) keeps that design in 3 launches: the
gather writes the real bf16 tensor itself, one Triton kernel quantises it, the same scatter copies
the bytes. ``fused`` does all of it in one kernel, one launch. The last two split the windows'
rows into one equal run per vector core when whole windows would leave cores idle
(``work_split`` decides; the piece gather and the merge of ``split_window``, one more launch)
and run through a cached launch plan (``plan``).

``kernel_specializations`` is the one place that decides the kernels and constexprs of a stage:
the launchers below run exactly what it returns, and the Ascend lowering audit compiles exactly
what it returns, so the two cannot drift apart. This module imports no Triton at import time.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, replace

import torch

from ..routes import ASCEND_PLANNED_STAGES, ASCEND_STAGES


@dataclass(frozen=True)
class KernelSpec:
    """One Triton kernel specialisation a stage launches."""

    module: str  # "ascend_kvc.stages.<module>" that defines the kernel
    kernel: str  # the @triton.jit function's name in that module
    constexprs: dict  # every tl.constexpr argument, as the launcher passes it
    pointer_dtypes: dict[str, str]  # pointer argument -> Triton type ("*fp32") for the official dtypes


# stage -> (gather, BLOCK_D, UNMASKED_MIDDLE, gather output is RMS-normalised, byte writer)
_LADDER = {
    "random-gather": ("random", 64, False, False, "index_put"),
    "pre-gather": ("pregather", 64, False, False, "index_put"),
    "block-gather": ("block", 64, False, False, "index_put"),
    "block-gather-nomask": ("block", 64, True, False, "index_put"),
    "block-d128": ("block", 128, True, False, "index_put"),
    "block-d256": ("block", 256, True, False, "index_put"),
    "block-d512": ("block", 512, True, True, "index_put"),
    "byte-scatter": ("block", 512, True, True, "triton"),
    "triton-quant": ("block", 512, True, True, "quantize"),
    "fused": ("fused", 512, True, False, "fused"),
}
assert tuple(_LADDER) == ASCEND_STAGES

# Window rows a random-gather / pre-gather step reads (one indirect row each).
WINDOW_ROWS_PER_STEP = 32

_TRITON_DTYPES = {torch.float32: "*fp32", torch.bfloat16: "*bf16"}
# The operator's official index dtypes: int32 table and request ids, int64 positions, boundaries, slots.
_INDEX_POINTERS = {
    "boundary_ptr": "*i64", "token_to_req_ptr": "*i32", "positions_ptr": "*i64", "slot_mapping_ptr": "*i64",
    "block_table_ptr": "*i32",
}
_GATHER_OUTPUTS = {"pooled_ptr": "*fp32", "slot_out_ptr": "*i64", "rope_pos_out_ptr": "*i64"}


# Bytes of the two fp32 tiles (values + scores) one window step of a block-centric gather holds.
# On a 910B vector core (192 KiB unified buffer) bishengir-compile planned 190 KiB for the
# [8, 512] step at block_size 8 (no headroom for the fused finalize) and overflowed from
# [32, 512] / [64, 256] on; 16 KiB ([4, 512], [8, 256], [16, 128], [32, 64]) keeps half of that.
ROW_TILE_BYTES = 16 * 1024
# The piece gather of a split window ends in a 6 KiB state store, not in the slot finalize, so its
# step may hold twice as much: [8, 512], a whole block of the official block_size in one step
# (bishengir-compile plans at most 190 KiB for it; on an H200 at 40 programs it ran 15-25%
# faster than [4, 512]).
PIECE_ROW_TILE_BYTES = 32 * 1024
# Read the next block's table entry one block ahead (``block_gather.pool_window``) in the window
# loops of the default, ``fused`` and the piece gather: on an H200 at 40 programs the unsplit
# loops ran 25-35% faster, and the split calls 1-4% once the piece gather's runs were whole tiles
# and its head was stored before its window loop (before that, the piece gather measured slower
# at [4, 512] tiles and within 1% at [8, 512]); within 0.5 us either way on the full grid.
LOOKUP_AHEAD = {"unsplit": True, "piece": True}
# Volatile state-row loads (``block_gather._load_rows``) in the planned rungs' window loops on CUDA
# only: ptxas otherwise sank some of a row tile's value loads below the score math in the
# default's gather, which then waited on memory twice a tile (Triton 3.6 and 3.8, offline SASS).
# An NPU, and every ladder kernel, compiles plain loads (``VOLATILE_ROWS=False``, as audited):
# ``kernel_specializations(..., device_type="cuda")`` says what CUDA launches, its default what an
# NPU compiles.
VOLATILE_ROWS_ON_CUDA = {"unsplit": True, "piece": True}


def _next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def row_tile(block_d: int, block_size: int, budget: int = ROW_TILE_BYTES) -> int:
    """Rows per window tile of a block-centric gather: the block's rows when they fit the byte
    budget (rounded up to a power of two), else the budget's row count."""
    budget_rows = budget // (2 * 4 * block_d)
    return min(_next_pow2(block_size), budget_rows)


def _state_pointer(state_dtype: torch.dtype) -> str:
    if state_dtype not in _TRITON_DTYPES:
        raise TypeError(f"state_dtype must be float32 or bfloat16, got {state_dtype}")
    return _TRITON_DTYPES[state_dtype]


# What a step's planned rungs launch differently (``counted``): the boundary list as their
# ``boundary_token_indices`` (int32) and its count, read on the device.
_COUNT_POINTER = {"count_ptr": "*i32"}
_LIST_POINTER = {"boundary_ptr": "*i32"}


def _counted(spec: KernelSpec, counted: bool) -> KernelSpec:
    """``spec`` with its ``COUNTED`` flag and the pointer types of a step where ``counted``."""
    pointers = {**spec.pointer_dtypes, **_COUNT_POINTER}
    if counted and "boundary_ptr" in pointers:
        pointers.update(_LIST_POINTER)
    return replace(spec, constexprs={**spec.constexprs, "COUNTED": counted}, pointer_dtypes=pointers)


def _search_specs(compress_ratio: int, state_slots: bool) -> list[KernelSpec]:
    """The boundary search of a step (``ascend_kvc.boundaries``): the per-chunk count (launched
    only when the search has more than one program), then the list."""
    from ..boundaries import search_constexprs

    count, listing = search_constexprs(compress_ratio, state_slots)
    tokens = {"positions_ptr": "*i64", "kv_slot_ptr": "*i64", "state_slot_ptr": "*i64"}
    return [
        KernelSpec("ascend_kvc.boundaries", "_count_boundaries_kernel", count, {**tokens, "counts_ptr": "*i32"}),
        KernelSpec("ascend_kvc.boundaries", "_list_boundaries_kernel", listing,
                   {**tokens, "counts_ptr": "*i32", "list_ptr": "*i32", "count_ptr": "*i32"}),
    ]


def _cache_pointer(kv_format: str) -> str:
    return "*bf16" if kv_format == "bf16" else "*u8"


def _gather_spec(stage: str, block_size: int, C: int, state_dtype: torch.dtype, kv_format: str = "int8",
                 overlap: bool = False, state_slots: bool = False) -> KernelSpec:
    """The whole-window gather of ``stage``; ``state_slots``: a step's, which reads a state slot
    mapping (the planned rungs: a step by token tile tests the tokens itself)."""
    kind, block_d, unmasked_middle, normalised, _ = _LADDER[stage]
    state = _state_pointer(state_dtype)
    if kind == "random":
        return KernelSpec(
            "ascend_kvc.stages.random_gather", "_random_gather_softmax_kernel",
            dict(C=C, BLOCK_T=WINDOW_ROWS_PER_STEP, BLOCK_D=block_d),
            {"state_ptr": state, **_INDEX_POINTERS, **_GATHER_OUTPUTS},
        )
    if kind == "pregather":
        return KernelSpec(
            "ascend_kvc.stages.pregather", "_linear_scan_softmax_kernel",
            dict(C=C, BLOCK_T=WINDOW_ROWS_PER_STEP, BLOCK_D=block_d),
            {"rows_ptr": state, "pooled_ptr": "*fp32"},
        )
    # the planned rungs' unsplit loops read the tile their work split plans with
    tile = unsplit_row_tile(block_size) if stage in ASCEND_PLANNED_STAGES else row_tile(block_d, block_size)
    if kind == "fused":
        from ..slot_bytes import FORMAT_SLOT_CONSTEXPRS, KV_FORMAT_CODES

        return KernelSpec(
            "ascend_kvc.stages.fused", "_fused_compress_kernel",
            dict(C=C, ROW_TILE=tile, ROWS_PADDED=block_size % tile != 0, LOOKUP_AHEAD=LOOKUP_AHEAD["unsplit"],
                 VOLATILE_ROWS=False, **FORMAT_SLOT_CONSTEXPRS, KV_FORMAT=KV_FORMAT_CODES[kv_format], OVERLAP=overlap,
                 HAS_STATE_SLOTS=state_slots),
            {"state_ptr": state, **_INDEX_POINTERS, "weight_ptr": "*bf16", "cos_sin_ptr": "*fp32",
             "kv_cache_ptr": _cache_pointer(kv_format), "state_slot_ptr": "*i64"},
        )
    if _LADDER[stage][4] == "quantize":  # the default: its own kernel, the window loop of fused, bf16 out
        return KernelSpec(
            "ascend_kvc.stages.block_gather", "_gather_to_bf16_kernel",
            dict(C=C, ROW_TILE=tile, ROWS_PADDED=block_size % tile != 0, LOOKUP_AHEAD=LOOKUP_AHEAD["unsplit"],
                 VOLATILE_ROWS=False, OVERLAP=overlap, HAS_STATE_SLOTS=state_slots),
            {"state_ptr": state, **_INDEX_POINTERS, "pooled_ptr": "*i16", "slot_out_ptr": "*i64", "weight_ptr": "*bf16",
             "cos_sin_ptr": "*fp32", "state_slot_ptr": "*i64"},
        )
    return KernelSpec(
        "ascend_kvc.stages.block_gather", "_block_gather_softmax_kernel",
        dict(C=C, BLOCK_D=block_d, ROW_TILE=tile, UNMASKED_MIDDLE=unmasked_middle,
             ROWS_PADDED=block_size % tile != 0, FUSE_RMSNORM=normalised,
             FUSE_ROPE=_LADDER[stage][4] == "triton", LOOKUP_AHEAD=False, VOLATILE_ROWS=False),
        {"state_ptr": state, **_INDEX_POINTERS, **_GATHER_OUTPUTS, "weight_ptr": "*bf16", "cos_sin_ptr": "*fp32"},
    )


def unsplit_row_tile(block_size: int) -> int:
    """Rows per window tile of the unsplit gathers of the planned rungs (``fused`` and the
    default's), which keep unified buffer for the finalize."""
    return row_tile(512, block_size)


def piece_row_tile(block_size: int, window: int | None = None) -> int:
    """Rows per window tile of the piece gather; the runs of a split are whole numbers of them
    (``work_split.plan_split``'s ``row_unit``). ``window``: the rows one output pools, where the
    tile must divide them (4 or 8 with ``compress_ratio=4``; every tile divides 128)."""
    tile = row_tile(512, block_size, PIECE_ROW_TILE_BYTES)
    return tile if window is None else min(tile, window)


def _split_specs(stage: str, block_size: int, C: int, state_dtype: torch.dtype, kv_format: str = "int8",
                 overlap: bool = False, inline_tokens: int = 0, state_slots: bool = False) -> list[KernelSpec]:
    """The piece gather and the merge of a split window (``split_window``); ``inline_tokens``: the
    piece gather's own boundary search of a step of at most that many tokens (0: none);
    ``state_slots``: a step's state slot mapping, which the piece gather reads where it searches
    or runs by token tile."""
    from ..layout import window_rows
    from ..slot_bytes import FORMAT_SLOT_CONSTEXPRS, KV_FORMAT_CODES

    tile = piece_row_tile(block_size, window_rows(C, overlap))
    piece = KernelSpec(
        "ascend_kvc.stages.split_window", "_window_piece_kernel",
        dict(C=C, ROW_TILE=tile, ROWS_PADDED=block_size % tile != 0, LOOKUP_AHEAD=LOOKUP_AHEAD["piece"],
             VOLATILE_ROWS=False, RUN_ROWS=tile, OVERLAP=overlap, INLINE_T=inline_tokens, HAS_STATE_SLOTS=state_slots),
        {"state_ptr": _state_pointer(state_dtype), **_INDEX_POINTERS, "part_ptr": "*fp32", "head_ptr": "*i64",
         "state_slot_ptr": "*i64"},
    )
    common = {"part_ptr": "*fp32", "head_ptr": "*i64", "weight_ptr": "*bf16", "cos_sin_ptr": "*fp32"}
    from .split_window import MERGE_ROWS

    if _LADDER[stage][4] == "fused":
        merge = KernelSpec("ascend_kvc.stages.split_window", "_merge_to_slot_kernel",
                           dict(C=C, MERGE_ROWS=MERGE_ROWS, RUN_ROWS=tile, **FORMAT_SLOT_CONSTEXPRS,
                                KV_FORMAT=KV_FORMAT_CODES[kv_format], OVERLAP=overlap),
                           {**common, "kv_cache_ptr": _cache_pointer(kv_format)})
    else:
        merge = KernelSpec("ascend_kvc.stages.split_window", "_merge_to_bf16_kernel",
                           dict(C=C, MERGE_ROWS=MERGE_ROWS, RUN_ROWS=tile, OVERLAP=overlap),
                           {**common, "y_bf16_ptr": "*i16", "slot_out_ptr": "*i64"})
    return [piece, merge]


# The quantise and scatter kernels' view of a step by token tile: its tokens' index tensors.
_TILE_TOKEN_POINTERS = {"positions_ptr": "*i64", "kv_slot_ptr": "*i64", "state_slot_ptr": "*i64"}


def _quantize_spec(token_tile: int = 1, state_slots: bool = False) -> KernelSpec:
    """``token_tile``: a step's tiles of C tokens (its compress ratio; 1 where no step runs by tile),
    ``state_slots``: its state slot mapping, read where it does."""
    from ..layout import NOPE_DIM

    return KernelSpec(
        "ascend_kvc.stages.quantize", "_quantize_bf16_kernel",
        dict(NOPE_DIM=NOPE_DIM, TOKEN_TILE=token_tile, HAS_STATE_SLOTS=state_slots),
        {"y_bf16_ptr": "*i16", "slot_ptr": "*i64", "nope_ptr": "*i8", "scale_ptr": "*i32", **_TILE_TOKEN_POINTERS},
    )


def _scatter_spec(token_tile: int = 1, state_slots: bool = False) -> KernelSpec:
    """As ``_quantize_spec``."""
    from ..layout import NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, SCALE_REGION, SLOTS_PER_PAGE

    return KernelSpec(
        "ascend_kvc.stages.scatter", "_byte_scatter_kernel",
        dict(NOPE_DIM=NOPE_DIM, PAYLOAD_BYTES=PAYLOAD_BYTES, SCALE_BYTES=SCALE_BYTES, SCALE_REGION=SCALE_REGION,
             SLOTS_PER_PAGE=SLOTS_PER_PAGE, TOKEN_TILE=token_tile, HAS_STATE_SLOTS=state_slots),
        {"nope_ptr": "*u8", "y_bf16_ptr": "*u8", "scale_ptr": "*u8", "slot_ptr": "*i64", "kv_cache_ptr": "*u8",
         **_TILE_TOKEN_POINTERS},
    )


def _with_volatile_rows(spec: KernelSpec) -> KernelSpec:
    """``spec`` with the CUDA choice of volatile row loads, where its window loop has the flag."""
    if "VOLATILE_ROWS" not in spec.constexprs:
        return spec
    kind = "piece" if spec.kernel == "_window_piece_kernel" else "unsplit"
    return replace(spec, constexprs={**spec.constexprs, "VOLATILE_ROWS": VOLATILE_ROWS_ON_CUDA[kind]})


def kernel_specializations(
    stage: str, block_size: int, compress_ratio: int, state_dtype: torch.dtype, split: bool = False,
    device_type: str = "npu", step: bool = False, state_slots: bool = True, kv_format: str = "int8",
    overlap: bool = False, inline_search: bool = False,
) -> list[KernelSpec]:
    """The Triton kernels ``ascend:<stage>`` launches for this input, in launch order.

    ``split``: the call's windows are cut into runs of rows (``work_split.plan_split`` decides;
    only the ``ASCEND_PLANNED_STAGES`` split): a piece gather and a merge replace the gather.
    ``device_type``: the tensors' device type. The default, ``"npu"``, is what an NPU compiles and
    the lowering audit checks; on ``"cuda"`` the planned rungs' window loops read state rows with
    volatile loads (``VOLATILE_ROWS_ON_CUDA``).

    ``step``: the kernels of ``ascend_kvc.compress_step`` (planned rungs only): the boundary
    search of ``ascend_kvc.boundaries`` first (its count kernel launched only when the search has
    more than one program; ``state_slots``: the engine passes a state slot mapping), then the
    rung's kernels reading the device list and their count (``COUNTED``). With ``split`` both the
    split kernels and the unsplit gather: the search decides on the device which of them take the
    step's outputs; the merge and the unsplit gather are one kernel there (``MERGE_OR_WHOLE``),
    each of its loops run to its own count.

    Pointer types are those of the official dtypes (int32 block table and request ids, int64
    positions, boundaries and slots, bf16 norm weight, fp32 cos/sin, uint8 cache) with the state
    in ``state_dtype``; a step's boundary list and count are int32. The launchers take their
    constexprs from this list, so it is exactly what runs.

    ``kv_format``: the cache format written (``fused`` only: the other rungs write ``"int8"``);
    ``"bf16"`` caches are bfloat16 pointers. The slots a page are a run-time argument.

    ``overlap``: the overlapping ratio-4 compressor (``compress_ratio`` 4, windows of 8 rows of the
    2048-wide state; planned rungs only): their kernels' ``OVERLAP`` specialisation.

    ``inline_search`` (with ``step`` and ``split``): a step of at most
    ``boundaries.INLINE_SEARCH_TOKENS`` tokens whose every count of outputs splits: no search
    launch and no unsplit gather; the piece gather finds the boundary tokens itself and leaves
    the count for the kernels after it.
    """
    if stage not in _LADDER:
        raise ValueError(f"stage must be one of {ASCEND_STAGES}, got {stage!r}")
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be an int >= 1, got {block_size!r}")
    writer = _LADDER[stage][4]
    if kv_format != "int8" and writer != "fused":
        raise ValueError(f"stage {stage!r} writes kv_format='int8' only, got {kv_format!r}")
    if split and stage not in ASCEND_PLANNED_STAGES:
        raise ValueError(f"stage {stage!r} does not split windows; only {ASCEND_PLANNED_STAGES} do")
    if step and stage not in ASCEND_PLANNED_STAGES:
        raise ValueError(f"stage {stage!r} has no sync-free step; only {ASCEND_PLANNED_STAGES} do")
    if overlap and stage not in ASCEND_PLANNED_STAGES:
        raise ValueError(f"stage {stage!r} does not compute overlap=True; only {ASCEND_PLANNED_STAGES} do")
    if inline_search and not (step and split):
        raise ValueError("inline_search is a step's split path: it needs step=True and split=True")
    if split:
        from ..boundaries import INLINE_SEARCH_TOKENS

        specs = _split_specs(stage, block_size, compress_ratio, state_dtype, kv_format, overlap,
                             INLINE_SEARCH_TOKENS if inline_search else 0, step and state_slots)
        if step and not inline_search:  # the device picks the split or the unsplit gather by the step's count
            specs.append(_gather_spec(stage, block_size, compress_ratio, state_dtype, kv_format, overlap,
                                      step and state_slots))
    else:
        specs = [_gather_spec(stage, block_size, compress_ratio, state_dtype, kv_format, overlap, step and state_slots)]
    if device_type == "cuda" and stage in ASCEND_PLANNED_STAGES:
        specs = [_with_volatile_rows(spec) for spec in specs]
    tile = (compress_ratio, state_slots) if step else ()  # a step's rows by token tile
    if writer == "quantize":
        specs.append(_quantize_spec(*tile))
    if writer in ("triton", "quantize"):
        specs.append(_scatter_spec(*tile))
    specs = [_counted(spec, step) if spec.kernel in _COUNTED_KERNELS else spec for spec in specs]
    if step and split and not inline_search:  # the merge and the unsplit gather: one launch
        merge, whole = specs[1], specs[2]
        specs[1:3] = [_merge_or_whole_spec(merge, whole)]
    if step and not inline_search:
        specs = _search_specs(compress_ratio, state_slots) + specs
    return specs


# A step's merge and unsplit gather in one kernel (``split_window``): the merge's kernel -> theirs.
MERGE_OR_WHOLE = {"_merge_to_slot_kernel": "_merge_or_whole_to_slot_kernel",
                  "_merge_to_bf16_kernel": "_merge_or_whole_to_bf16_kernel"}


def _merge_or_whole_spec(merge: KernelSpec, whole: KernelSpec) -> KernelSpec:
    """The kernel that runs a step's ``merge`` loop and then its unsplit ``whole`` loop, each to
    its own count (both always counted): their constexprs and pointer types together."""
    constexprs = {k: v for k, v in {**whole.constexprs, **merge.constexprs}.items() if k != "COUNTED"}
    return KernelSpec(merge.module, MERGE_OR_WHOLE[merge.kernel], constexprs,
                      {**whole.pointer_dtypes, **merge.pointer_dtypes})


# The kernels that take a device count (``count_ptr``, ``COUNTED``).
_COUNTED_KERNELS = frozenset((
    "_fused_compress_kernel", "_gather_to_bf16_kernel", "_quantize_bf16_kernel", "_byte_scatter_kernel",
    "_window_piece_kernel", "_merge_to_slot_kernel", "_merge_to_bf16_kernel"))


@functools.lru_cache(maxsize=None)
def stage_of(route_name: str) -> str:
    return route_name.split(":", 1)[1]


def _launcher(spec: KernelSpec):
    """The host function that launches ``spec``'s kernel (in the kernel's own module)."""
    return importlib.import_module(spec.module).launch


def launch_plan(args, out, route_name: str):
    """A reusable launch plan for the ``ASCEND_PLANNED_STAGES``; ``None`` for the other rungs,
    which keep the plain path so that each rung's own host cost stays what it was."""
    stage = stage_of(route_name)
    if stage not in ASCEND_PLANNED_STAGES:
        return None
    from .plan import AscendPlan

    return AscendPlan(args, out, stage)


def step_plan(args, out, route_name: str, state_slots: bool):
    """A reusable plan for a step of ``args``' signature (``ascend_kvc.compress_step``) on a
    planned rung (``ASCEND_PLANNED_STAGES``); ``args``' ``boundary_token_indices`` stands for the
    step's tokens (its length is their count). ``None`` for the other rungs, which have no
    sync-free step."""
    stage = stage_of(route_name)
    if stage not in ASCEND_PLANNED_STAGES:
        return None
    from .plan import AscendPlan

    return AscendPlan(args, out, stage, step_state_slots=state_slots)


def run(args, route_name: str, plan, out) -> None:
    """Route entry point for ``ascend:<stage>``."""
    kind = args.device.type
    if kind in ("cuda", "npu"):
        backend = getattr(torch, kind)  # torch.npu: registered by torch-npu
        if backend.current_device() != args.device.index:
            # kernel[grid] launches on Triton's current device: make it the tensors' one.
            with backend.device(args.device.index):
                return _run(args, route_name, out)
    return _run(args, route_name, out)


def _run(args, route_name: str, out) -> None:
    from .. import reference
    from . import finalize

    stage = stage_of(route_name)
    if stage in ASCEND_PLANNED_STAGES:
        from .plan import AscendPlan

        AscendPlan(args, out, stage)(
            args.state_cache, args.token_to_req, args.positions, args.boundary_token_indices, args.block_table,
            args.rms_norm_weight, args.cos_sin_cache, args.kv_slot_mapping, args.kv_cache, out)
        return
    _, _, _, normalised, writer = _LADDER[stage]
    specs = kernel_specializations(stage, args.block_size, args.compress_ratio, args.state_cache.dtype,
                                   kv_format=args.kv_format)
    if args.cos_sin_cache.shape[0] == 0:
        return  # no position has a cos/sin row, so every output is invalid: nothing to write
    if writer == "fused":
        _launcher(specs[0])(args, out, specs[0])
        return
    pooled, slot, rope_pos = _launcher(specs[0])(args, specs[0])
    if writer == "triton":
        _launcher(specs[1])(out, slot, *finalize.finalize_rotated(pooled), specs[1])
    else:
        payload, scales = finalize.finalize_bytes(pooled, normalised, rope_pos, args)
        reference.scatter_slot_bytes(out, slot, payload, scales)
