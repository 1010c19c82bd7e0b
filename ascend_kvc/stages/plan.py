"""Launch plans of the Ascend rungs users run: ``triton-quant`` (the default) and ``fused``.

A plan does a call's host work once per argument signature: the work split
(``work_split.plan_split`` for the vector cores of ``device.ascend_programs``; where programs own
their cores, ``device.programs_own_cores``, the piece gather's wider tiles split every call unless
``ASCEND_KVC_SPLIT=occupancy``), the kernels and their constexprs
(``stages.kernel_specializations``), each launch's argument list, the scratch layout and one
``launch.KernelLauncher`` per kernel. ``ascend_kvc.api`` caches plans, so a repeat call with
``validate=False`` finds its stream and scratch and launches the compiled kernels.

Launches a call (no host sync, no framework op, no data-dependent allocation):

| rung | unsplit | split |
|---|---|---|
| ``triton-quant`` | gather (bf16 out), quantise, scatter | piece gather, merge (bf16 out), quantise, scatter |
| ``fused`` | fused | piece gather, merge (slot bytes) |

A *step* plan (``ascend_kvc.compress_step``, ``step_state_slots`` not ``None``) runs the same
kernels after the boundary search of ``ascend_kvc.boundaries`` (one launch, two for a search of
more than one program), with the search's int32 list as ``boundary_token_indices`` and its count
read on the device (``COUNTED``), the merge and the unsplit gather as one kernel that runs
whichever of them the search gave the step's outputs (``stages.MERGE_OR_WHOLE``); a step of at
most ``boundaries.INLINE_SEARCH_TOKENS`` tokens whose every count splits has no search launch,
its piece gather searching the tokens itself (``inline_search``); a larger step of at most
``boundaries.TILE_MAX_REQUESTS`` requests has none either (``token_tiles``): its tiles of C tokens
are its outputs, planned as the indexed call plans that many, each tile's first boundary token
taken by the piece gather (or the unsplit gather) and its further ones by the last gather
launch's whole-window loop (on the default, rows after the tiles', which its quantise and scatter
find by the same scan). Otherwise everything sized by the outputs is sized by the step's token
count, their upper bound: the grids, the scratch, the work split (``step_piece_slots``). The
tensors a step plan takes are the operator's, with the state slot mapping in the place of
``boundary_token_indices`` (the kv slot mapping there when the engine has none).
"""

from __future__ import annotations

import importlib
import operator
from dataclasses import dataclass

import torch

from ..device import ascend_programs, programs_own_cores, split_rule, vector_cores_override
from ..launch import KernelLauncher, stream_scratch, stream_state
from .. import boundaries
from ..boundaries import COUNT_SPLIT, COUNT_TOTAL, COUNT_UNSPLIT, SPLIT_ROUNDS, every_count_splits
from ..layout import BF16_ROW, HEAD_DIM, NOPE_DIM, NOPE_GROUPS, window_rows
from .fused import cache_row_stride
from .split_window import STATE_FLOATS
from .work_split import MIN_PIECE_ROWS, WorkSplit, plan_split

# Fewest window rows a program of a split reads on a GPU, where four programs share an SM: pieces
# of one 8-row block (16-33 a window) measured 9-15% slower on an H200 than pieces of 32 rows or
# more (4-16) on the 8192-token cases. ASCEND_KVC_VECTOR_CORES (a 910B's view) keeps MIN_PIECE_ROWS.
GPU_MIN_PIECE_ROWS = 32

_ALIGN = 64  # bytes between scratch buffers: every buffer keeps Triton's 16-byte pointer specialisation


@dataclass(frozen=True)
class _In:
    """A launch argument that is the call's ``index``-th tensor, in the operator's argument order."""

    index: int


@dataclass(frozen=True)
class _Scratch:
    """A launch argument that is a scratch buffer, seen as ``dtype``, from ``offset`` bytes in."""

    name: str
    dtype: torch.dtype
    offset: int = 0


_OUT = object()  # the launch argument that is the cache written
# The call's tensors, in the operator's argument order.
STATE, TOKEN_TO_REQ, POSITIONS, BOUNDARY, BLOCK_TABLE, WEIGHT, COS_SIN, SLOT_MAPPING = (_In(k) for k in range(8))
STATE_SLOTS = BOUNDARY  # a step plan's tensor in that place: the state slot mapping
_LIST, _COUNT, _COUNTS = _Scratch("list", torch.int32), _Scratch("count", torch.int32), _Scratch("counts", torch.int32)
# The count each kernel of a step loops to (``boundaries``: total, the unsplit part, the split part).
_STEP_COUNTS = {
    "_window_piece_kernel": COUNT_SPLIT, "_merge_to_slot_kernel": COUNT_SPLIT, "_merge_to_bf16_kernel": COUNT_SPLIT,
    "_gather_to_bf16_kernel": COUNT_UNSPLIT, "_fused_compress_kernel": COUNT_UNSPLIT,
    "_quantize_bf16_kernel": COUNT_TOTAL, "_byte_scatter_kernel": COUNT_TOTAL,
}
# The merge-or-whole kernels take their unsplit gather's count (and arguments), and find the split
# count in the next int32.
assert COUNT_SPLIT == COUNT_UNSPLIT + 1


def _step_split(max_outputs: int, C: int, cores: int, min_rows: int, block_size: int,
                wider_tiles_split: bool) -> tuple[WorkSplit, int, bool]:
    """``(split, split_max, split_always)`` of a step of at most ``max_outputs`` outputs (its token
    count) of ``C`` window rows each (``2C`` with the overlapping compressor): the split kernels'
    plan for ``split_max`` outputs (``min(max_outputs, SPLIT_ROUNDS * cores)``; 0 on one core,
    where nothing splits), and whether every count up to it splits
    (``plan_split``'s wider-tile rule) or only those that would leave cores idle (its occupancy
    rule). The device applies the rule to the count (``boundaries.split_counts``)."""
    from . import piece_row_tile, unsplit_row_tile

    split_max = min(max_outputs, SPLIT_ROUNDS * cores) if cores > 1 else 0
    if not split_max:
        return WorkSplit(max_outputs, C, cores, max(1, min(cores, max_outputs)), False), 0, False
    unit = piece_row_tile(block_size, C)
    always = wider_tiles_split and unit > unsplit_row_tile(block_size)
    programs = min(cores, max(1, split_max * C // max(min_rows, unit)))
    return WorkSplit(split_max, C, cores, programs, True, unit), split_max, always


def step_piece_slots(split: WorkSplit, max_outputs: int) -> int:
    """State slots per program that any count of outputs up to ``max_outputs`` needs, with the
    split's programs and row unit (the runs of ``split_window`` on ``active_programs``): a run of
    ``u`` units touches at most ``(u - 1) // W + 2`` windows of ``W`` units, and with ``n`` outputs
    ``u <= ceil(n W / min(P, n W))``, which is 1 when ``n W <= P`` and grows with ``n``."""
    W = split.compress_ratio // split.row_unit
    units = -(-max_outputs * W // split.programs)
    return max(1, min(max_outputs, (units - 1) // W + 2))


def _picker(indices: list[int]):
    """``pool -> tuple(pool[k] for k in indices)`` in one C call (``itemgetter`` of one index
    would return the item, not a 1-tuple)."""
    if len(indices) == 1:
        k = indices[0]
        return lambda pool: (pool[k],)
    return operator.itemgetter(*indices)


class AscendPlan:
    """The launches of ``ascend:<stage>`` for one argument signature."""

    def __init__(self, args, out: torch.Tensor | None, stage: str, step_state_slots: bool | None = None):
        from . import kernel_specializations, piece_row_tile, unsplit_row_tile
        from ..boundaries import plan_search

        dev = args.device
        n, bs = args.num_outputs, args.block_size
        C = window_rows(args.compress_ratio, args.overlap)  # the rows a window: what the work split shares out
        self.stage = stage
        self.device = dev
        self.cuda_index = dev.index if dev.type == "cuda" else None
        self.npu_index = dev.index if dev.type == "npu" else None
        self.nothing_to_do = n == 0 or args.nothing_to_read or args.cos_sin_cache.shape[0] == 0
        self.inline_search = False  # set below: a step whose piece gather searches its own tokens
        # (launcher, its arguments, the picker of its arguments from the integer-address pool)
        self.launches: list[tuple[KernelLauncher, tuple, object]] = []
        self.scratch_bytes = 0
        self._offsets: dict[str, int] = {}  # scratch buffer -> byte offset
        self._sizes: dict[str, int] = {}  # scratch buffer -> bytes, a multiple of _ALIGN
        self.kernels: list[str] = []  # the kernels a call launches, in order
        if self.nothing_to_do:
            return
        min_rows = GPU_MIN_PIECE_ROWS if dev.type == "cuda" and vector_cores_override() is None else MIN_PIECE_ROWS
        wider_tiles_split = split_rule() == "auto" and programs_own_cores(dev)  # the rule checked on every device
        step = step_state_slots is not None
        cores = ascend_programs(dev)
        search = plan_search(args.token_to_req.shape[0], cores) if step else None
        if step:
            self.split, self.split_max, split_always = _step_split(n, C, cores, min_rows, bs, wider_tiles_split)
        else:
            self.split = plan_split(n, C, cores, min_rows, piece_row_tile(bs, C),
                                    unsplit_row_tile(bs) if wider_tiles_split else None)
        all_split = step and self.split.split and every_count_splits(n, self.split_max, cores, split_always)
        # a small step that always splits: the piece gather searches its tokens itself (no search launch)
        # (read from ``boundaries`` at plan time, where ``kernel_specializations`` reads the kernel's bound)
        self.inline_search = all_split and args.token_to_req.shape[0] <= boundaries.INLINE_SEARCH_TOKENS
        # a larger step of few requests: by token tile, no search (``boundaries.TILE_MAX_REQUESTS``)
        self.token_tiles = (step and not self.inline_search
                            and args.block_table.shape[0] <= boundaries.TILE_MAX_REQUESTS)
        if self.token_tiles:  # the tiles are the outputs, as many as the host knows: the indexed call's split
            n = -(-args.token_to_req.shape[0] // args.compress_ratio)
            self.split = plan_split(n, C, cores, min_rows, piece_row_tile(bs, C),
                                    unsplit_row_tile(bs) if wider_tiles_split else None)
        specs = kernel_specializations(stage, bs, args.compress_ratio, args.state_cache.dtype, split=self.split.split,
                                       device_type=dev.type, step=step, state_slots=bool(step_state_slots),
                                       kv_format=args.kv_format, overlap=args.overlap,
                                       inline_search=self.inline_search)
        if self.token_tiles:
            specs = [s for s in specs if s.module != "ascend_kvc.boundaries"]
        elif search is not None and search.programs == 1:  # one chunk: the list kernel counts it itself
            specs = [s for s in specs if s.kernel != "_count_boundaries_kernel"]
        st, bt, cs = args.state_cache, args.block_table, args.cos_sin_cache
        # out=None: a new contiguous tensor
        if out is not None:
            kv_s0 = cache_row_stride(out, args.kv_format)
        else:
            kv_s0 = BF16_ROW if args.kv_format == "bf16" else args.kv_cache.shape[1]
        num_tokens, num_slots = args.token_to_req.shape[0], args.num_slots
        page_slots = args.slots_per_page
        table = (n, num_tokens, bt.shape[0], bt.shape[1], st.shape[0], num_slots, cs.shape[0], bs,
                 st.stride(0), st.stride(1), st.stride(2), bt.stride(0), bt.stride(1))
        programs = self.split.programs
        slots = (step_piece_slots(self.split, self.split_max) if step and self.split.split and not self.token_tiles
                 else self.split.piece_slots)
        # a step by token tile: the piece gather and the unsplit gather take each tile's first output,
        # the merge-or-whole kernel's whole-window loop the tiles' further ones (-1: the outputs of a list)
        by_tile, further = (0, 1) if self.token_tiles else (-1, -1)
        # the quantise and scatter kernels' view of the step's tokens, for its tiles' further rows
        tile_tokens = (POSITIONS, SLOT_MAPPING, STATE_SLOTS, num_tokens, by_tile)
        boundary = _LIST if step else BOUNDARY
        index_args = (boundary, TOKEN_TO_REQ, POSITIONS, SLOT_MAPPING)

        def count(kernel: str):  # the count a kernel loops to; unread without COUNTED
            return _Scratch("count", torch.int32, 4 * _STEP_COUNTS[kernel]) if step else BOUNDARY

        merge_shape = (n, programs, slots, cs.stride(0), cs.stride(1))
        eps = args.rms_norm_eps
        part, head = _Scratch("part", torch.float32), _Scratch("head", torch.int64)
        y, slot = _Scratch("y", torch.int16), _Scratch("slot", torch.int64)
        # the default's rows between launches: one an output; by token tile one a tile, then one a token
        # (a tile's further outputs: ``block_gather._gather_to_bf16_kernel``)
        rows = n + num_tokens if self.token_tiles else n
        sizes = {"part": programs * slots * (STATE_FLOATS + 1) * 4, "head": n * 2 * 8, "y": rows * HEAD_DIM * 2,
                 "slot": rows * 8, "nope": rows * NOPE_DIM, "scale": rows * NOPE_GROUPS * 4,
                 # by token tile the kernels take the list's pointer and never read it: one entry
                 "list": 4 if self.token_tiles else num_tokens * 4, "count": 12,
                 "counts": 4 * (search.programs if step else 1)}
        chunk = search.chunk if step else 0
        rule = (self.split_max, cores, int(split_always)) if step else ()
        counts = _COUNTS if step and search.programs > 1 else _LIST  # one program reads no counts
        lists = {
            "_count_boundaries_kernel": (POSITIONS, SLOT_MAPPING, STATE_SLOTS, _COUNTS, num_tokens, chunk),
            "_list_boundaries_kernel": (POSITIONS, SLOT_MAPPING, STATE_SLOTS, counts, _LIST, _COUNT, num_tokens, chunk,
                                        *rule),
            "_gather_to_bf16_kernel": (
                STATE, *index_args, BLOCK_TABLE, y, slot, *table,
                WEIGHT, eps, COS_SIN, cs.stride(0), cs.stride(1), count("_gather_to_bf16_kernel"), STATE_SLOTS,
                by_tile),
            "_fused_compress_kernel": (
                STATE, *index_args, BLOCK_TABLE, WEIGHT, COS_SIN, _OUT, *table, cs.stride(0), cs.stride(1),
                kv_s0, page_slots, eps, count("_fused_compress_kernel"), STATE_SLOTS, by_tile),
            "_window_piece_kernel": (STATE, *index_args, BLOCK_TABLE, part, head, n, programs, slots, *table[1:],
                                     _COUNT if self.inline_search else count("_window_piece_kernel"), STATE_SLOTS,
                                     by_tile),
            "_merge_to_slot_kernel": (part, head, WEIGHT, COS_SIN, _OUT, *merge_shape, kv_s0, page_slots, eps,
                                      count("_merge_to_slot_kernel"), -1),
            "_merge_to_bf16_kernel": (part, head, WEIGHT, COS_SIN, y, slot, *merge_shape, eps,
                                      count("_merge_to_bf16_kernel"), -1),
            "_quantize_bf16_kernel": (y, slot, _Scratch("nope", torch.int8), _Scratch("scale", torch.int32), n,
                                      count("_quantize_bf16_kernel"), *tile_tokens),
            "_byte_scatter_kernel": (
                _Scratch("nope", torch.uint8), _Scratch("y", torch.uint8), _Scratch("scale", torch.uint8), slot,
                _OUT, n, kv_s0, count("_byte_scatter_kernel"), *tile_tokens),
        }
        # the merge-or-whole kernels: their unsplit gather's arguments, then those the merge adds
        lists["_merge_or_whole_to_slot_kernel"] = (*lists["_fused_compress_kernel"][:-1], further, part, head, programs,
                                                   slots)
        lists["_merge_or_whole_to_bf16_kernel"] = (*lists["_gather_to_bf16_kernel"][:-1], further, part, head, programs,
                                                   slots)
        self._scratch_names: list[str] = []
        self._scratch_refs: list[tuple[str, int]] = []  # (buffer, byte offset in it) the launches take
        launches: list[tuple[KernelLauncher, tuple]] = []
        for spec in specs:
            arguments = lists[spec.kernel]
            kernel = getattr(importlib.import_module(spec.module), spec.kernel)
            # the piece gather: one run of rows per program; the search: one chunk of tokens per program;
            # the others: persistent, one output at a time
            grid = (programs if spec.kernel == "_window_piece_kernel"
                    else search.programs if spec.module == "ascend_kvc.boundaries"
                    else max(1, min(n, self.split.cores)),)
            launches.append((KernelLauncher(kernel, grid, dict(spec.constexprs), {}), arguments))
            for a in arguments:
                if isinstance(a, _Scratch) and a.name not in self._offsets:
                    self._offsets[a.name] = self.scratch_bytes
                    self._sizes[a.name] = -(-sizes[a.name] // _ALIGN) * _ALIGN
                    self.scratch_bytes += self._sizes[a.name]
                    self._scratch_names.append(a.name)
                if isinstance(a, _Scratch) and (a.name, a.offset) not in self._scratch_refs:
                    self._scratch_refs.append((a.name, a.offset))
            self.kernels.append(spec.kernel)
        # The integer-address path builds one pool a call: [the 9 input addresses, out's, the scratch
        # buffers', then every launch's other arguments]; each launch takes its arguments from the
        # pool with one ``itemgetter``.
        sources = {**{k: k for k in range(9)}, "out": 9,
                   **{ref: 10 + j for j, ref in enumerate(self._scratch_refs)}}
        self._pool_constants: list = []
        for launcher, arguments in launches:
            picks = []
            for a in arguments:
                if isinstance(a, _In):
                    picks.append(sources[a.index])
                elif a is _OUT:
                    picks.append(sources["out"])
                elif isinstance(a, _Scratch):
                    picks.append(sources[(a.name, a.offset)])
                else:
                    picks.append(len(sources) + len(self._pool_constants))
                    self._pool_constants.append(a)
            self.launches.append((launcher, arguments, _picker(picks)))
        self._scratch_offsets = tuple(self._offsets[name] + offset for name, offset in self._scratch_refs)
        self._compiled = False

    def __call__(self, state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
                 cos_sin_cache, kv_slot_mapping, kv_cache, out, pointers: list | None = None):
        """Run on tensors of this plan's signature; returns the written cache. ``pointers``: the
        tensors' data addresses in argument order (``launch.call_signature``), used once every
        kernel is compiled."""
        if out is None:
            out = torch.zeros_like(kv_cache, memory_format=torch.contiguous_format)
        if self.nothing_to_do:
            return out
        index = self.cuda_index
        if index is not None and torch._C._cuda_getDevice() != index:
            with torch.cuda.device(index):
                return self(state_cache, token_to_req, positions, boundary_token_indices, block_table,
                            rms_norm_weight, cos_sin_cache, kv_slot_mapping, kv_cache, out, pointers)
        npu_index = self.npu_index
        if npu_index is not None and torch.npu.current_device() != npu_index:  # as for CUDA, above
            with torch.npu.device(npu_index):
                return self(state_cache, token_to_req, positions, boundary_token_indices, block_table,
                            rms_norm_weight, cos_sin_cache, kv_slot_mapping, kv_cache, out, pointers)
        if self.scratch_bytes:  # per stream, and fresh in a graph capture (CUDA, or an NPU's)
            stream, key, capturing = stream_state(self.device)
            scratch = stream_scratch(self.device, key, -(-self.scratch_bytes // 4), 0, capturing)[0]
        else:
            stream = 0 if index is None else torch._C._cuda_getCurrentRawStream(index)
            scratch = None
        if pointers is not None and self._takes_addresses():
            base = scratch.data_ptr() if scratch is not None else 0
            pool = [*pointers[:9], out.data_ptr(), *[base + off for off in self._scratch_offsets],
                    *self._pool_constants]
            for launcher, _, pick in self.launches:
                launcher.launch_compiled(stream, *pick(pool))
            return out
        tensors = (state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
                   cos_sin_cache, kv_slot_mapping, kv_cache)
        for launcher, arguments, _ in self.launches:
            launcher(stream, *(
                tensors[a.index] if isinstance(a, _In) else out if a is _OUT
                else self._view(scratch, a) if isinstance(a, _Scratch) else a for a in arguments))
        return out

    def _takes_addresses(self) -> bool:
        """Every kernel compiled and no launch hook set (the hooks are global: ask the first)."""
        if not self._compiled:
            self._compiled = all(launcher.direct for launcher, _, _ in self.launches)
        return self._compiled and self.launches[0][0].takes_addresses()

    def _view(self, scratch: torch.Tensor, buffer: _Scratch) -> torch.Tensor:
        start = (self._offsets[buffer.name] + buffer.offset) // 4
        size = (self._sizes[buffer.name] - buffer.offset) // 4
        return scratch[start:start + size].view(buffer.dtype)
