"""Route ``gpgpu``: one launch of ``_window_compress_kernel`` per call. No host sync with
validate=False, no data-dependent allocation: CUDA-graph capturable.

GPUs only: ``ascend_kvc.routes`` refuses NPU tensors for this route (``RouteUnavailableError``,
with the reason). Its grid, ``n * splits * 512 / block_d`` programs, can pass triton-ascend's limit
of 65535, and the plan switches only CUDA devices; the Ascend ladder is the NPU route.

``CompressPlan`` does every host-side computation of a call once per argument signature (tiles,
window pieces, grid, scalar arguments, the compiled kernel); ``ascend_kvc.api`` caches plans so
that a repeat call only reads the current stream, finds its scratch and launches.

A step plan (``ascend_kvc.compress_step``, ``step_state_slots`` not ``None``) runs the kernel in
its counted form, one of four ways, chosen from what the host knows without a sync:

- a step whose tokens times an output's work items are at most ``STEP_PER_TOKEN_PROGRAMS_PER_UNIT``
  programs a compute unit (a decode step of few tokens, or of ratio 4): one program per token and
  work item, which tests its own token and does nothing more unless it gives an output, as vLLM's
  kernel runs; no search, one launch;
- a step of at most ``STEP_INLINE_TOKENS`` tokens (decode): every program searches the step's
  tokens itself, then a grid-stride loop over the counted outputs' work items (a window of at
  most ``STEP_INLINE_WHOLE_WINDOW_ROWS`` rows in one piece); one launch;
- a larger step of at most ``STEP_TILE_MAX_REQUESTS`` requests (prefill chunks): one program per
  C tokens and work item of an output; each finds its tile's boundary tokens itself and runs the
  first as the indexed call's program runs its one; one launch, the grid of the call with the
  indices given where each request's tokens are whole windows;
- any other step (a prefill chunk beside decode tokens): the boundary search in one launch of
  its own (``ticket_search``: one lister a chunk, chained by tickets), then the grid-stride loop
  over the work items of the outputs it counted; two launches, where the two search kernels of
  ``ascend_kvc.boundaries`` made three (a mixed step's host time on an H100: 34-35 us in the
  steps bench with three launches, 24-25 us timed on its own with two; bench/RESULTS.md).

Scratch is sized for the step's token count (the outputs' upper bound; with token tiles a slot a
tile for its first output, then a slot a token for a tile's further ones); tiles and window
pieces are tuned for the outputs a step typically has (``_step_splits``; token tiles take at
most ``STEP_TILE_MAX_SPLITS`` pieces).
"""

from __future__ import annotations

import torch
import triton

from ascend_kvc.boundaries import TILE_MAX_REQUESTS, plan_search
from ascend_kvc.device import compute_units, device_kind
from ascend_kvc.launch import KernelLauncher, stream_scratch, stream_state
from ascend_kvc.layout import HEAD_DIM
from ascend_kvc.slot_bytes import FORMAT_SLOT_CONSTEXPRS, KV_FORMAT_CODES
from ascend_kvc.stages.fused import cache_row_stride

from .compress import _window_compress_kernel
from .ticket_search import SYNC_COUNTERS, _ticket_list_kernel
from .tuning import tiles_for, window_columns, window_splits, window_steps


# Steps of at most this many tokens (decode) are searched inside the kernel, by every program, in
# registers (``boundaries.boundaries_in_registers``): one launch a step, as with the indices given.
STEP_INLINE_TOKENS = 1024
# A larger step of at most this many requests (block-table rows: a prefill chunk or a few) runs
# without a search launch: its grid is one program per C tokens (a window's worth) per work item of
# an output, and each program finds its tile's boundary tokens itself. A request's consecutive
# positions give a tile at most one boundary token, so a tile's programs do at most this many
# outputs one after another. With more requests the boundaries of a step may crowd into a few
# tiles (a decode batch whose requests reach a window's end together), so those steps keep the
# search and its list, which the grid shares evenly. The Ascend routes' bound, the same rule.
STEP_TILE_MAX_REQUESTS = TILE_MAX_REQUESTS
# A step's grid: at most this many programs per compute unit loop over the counted work items.
STEP_PROGRAMS_PER_UNIT = 16
# The same for a step searched inside the kernel, where every program runs the search before it
# knows whether it has work: fewer programs search less (an H100's 256-token decode step with 8
# outputs: 18.7 us a replay at 4 per SM against 20.3 at 16; bench/RESULTS.md).
STEP_INLINE_PROGRAMS_PER_UNIT = 4
# A step searched inside the kernel whose window has at most this many rows (C=128, ratio 4) takes
# it in one piece: its few outputs' pieces would wait for the search in every program and then for
# the merge. On an H100, 64- and 256-token C=128 decode steps with 1 or 8 outputs took 15.0-15.9 us
# a replay in one piece against 15.6-17.6 in the 4 planned (the indexed calls 12.6-14.0); with one
# output one piece took 1.2-1.3x the planned pieces' time at C=256, and 1.9-2.3x at C=512
# (bench/RESULTS.md).
STEP_INLINE_WHOLE_WINDOW_ROWS = 128
# A step whose grid of one program per token and work item has at most this many programs a
# compute unit (no more than the search inside the kernel would launch) runs that grid: each
# program tests its own token, with no search before its work (bench/RESULTS.md).
STEP_PER_TOKEN_PROGRAMS_PER_UNIT = STEP_INLINE_PROGRAMS_PER_UNIT
# A step's tiles and window pieces are tuned for the outputs a step of its token count typically
# has (one per C tokens: a decode step a few, an official case exactly its own), not for its
# token count; its piece states, one set per token (the outputs' bound), may take at most this
# many bytes, which caps the pieces (the official cases keep the pieces their indexed calls take).
STEP_SCRATCH_BYTES = 2**30
_PIECE_STATE_BYTES = (3 * HEAD_DIM + 1) * 4
# A token-tile kernel carries a second copy of the work item (a tile's further outputs, in a loop),
# which costs registers: on an H100, 148-189 a thread where the indexed call's kernel takes 128,
# so a grid the indexed call runs in one wave took two (bench/RESULTS.md). Its plans cap the
# registers where the cap lets the whole grid be resident at once, but never below this
# (TOKEN_TILE_CAP_VALUES_PER_THREAD: where it is capped at this all the same).
TOKEN_TILE_MIN_REGISTERS = 128
# A token-tile grid too large for one wave at TOKEN_TILE_MIN_REGISTERS is capped there all the
# same (the indexed call's programs a unit, not the fewer its extra registers allow) where a
# thread's share of a step's rows (block_d * rows_per_step / threads) is at most this: those tiles
# fit 128 registers with at most 108 bytes spilled for sm_90. On an H200 the capped steps took
# 1.01-1.03x their indexed calls against 1.09-1.10x (R4-T32768-C128, R8-T65536-C256,
# R8-T131072-C512); tiles of 64 values a thread spilled 836-1096 bytes and took 1.20-1.31x
# (bench/RESULTS.md).
TOKEN_TILE_CAP_VALUES_PER_THREAD = 32
# A token-tile step's window pieces: at most this many. Each piece is a program that searches its
# tile again, and more programs a wave need a lower register cap: the official C=512 8192-token
# step on an H100 took 26.7 us a replay with 4 pieces (512 programs, no cap) against 30.4 with 8
# (1024 programs, capped at 128 registers, 18 bytes spilled); its indexed call 25.3 with either.
STEP_TILE_MAX_SPLITS = 4
_SM_REGISTERS = 65536  # a streaming multiprocessor's register file, every NVIDIA GPU from Volta on


def _caps_registers(device: torch.device) -> bool:
    """Whether Triton takes a register cap (``maxnreg``) for ``device``: NVIDIA's backend only."""
    return device.type == "cuda" and torch.version.hip is None


def _resident_registers(programs: int, warps: int, units: int) -> int:
    """The most registers a thread may take for ``programs`` programs of ``warps`` warps to be
    resident at once on ``units`` SMs, a multiple of 8 as the hardware allocates them (unbounded)."""
    per_unit = -(-programs // units)
    return _SM_REGISTERS // (per_unit * warps * 32) // 8 * 8


def one_wave_registers(programs: int, warps: int, units: int) -> int | None:
    """``_resident_registers``, or ``None`` where that is below ``TOKEN_TILE_MIN_REGISTERS`` or
    above a thread's 255."""
    cap = _resident_registers(programs, warps, units)
    return cap if TOKEN_TILE_MIN_REGISTERS <= cap <= 255 else None


def token_tile_registers(programs: int, tiles, units: int) -> int | None:
    """The register cap of a token-tile step's kernel of ``programs`` programs: the one-wave cap
    where there is one, else ``TOKEN_TILE_MIN_REGISTERS`` where the grid needs more than a wave
    even there and ``tiles`` hold at most ``TOKEN_TILE_CAP_VALUES_PER_THREAD`` values a thread a
    step, else none."""
    if _resident_registers(programs, tiles.warps, units) >= TOKEN_TILE_MIN_REGISTERS:
        return one_wave_registers(programs, tiles.warps, units)  # None above 255: one wave uncapped
    small_rows = tiles.block_d * tiles.rows_per_step <= TOKEN_TILE_CAP_VALUES_PER_THREAD * tiles.warps * 32
    return TOKEN_TILE_MIN_REGISTERS if small_rows else None


def typical_outputs(num_tokens: int, compress_ratio: int) -> int:
    """The outputs a step of ``num_tokens`` tokens is tuned for: one per C tokens, at least one."""
    return max(1, min(num_tokens, num_tokens // compress_ratio))


def _step_splits(tiles, num_tokens: int, compress_ratio: int, max_cols: int, blocks: int, units: int) -> int:
    """Window pieces of a step of ``num_tokens`` tokens: ``window_splits`` for its
    ``typical_outputs``, halved until the piece states of ``num_tokens`` outputs fit
    ``STEP_SCRATCH_BYTES``."""
    splits = window_splits(tiles, typical_outputs(num_tokens, compress_ratio), max_cols, blocks, units)
    while splits > 1 and num_tokens * splits * _PIECE_STATE_BYTES > STEP_SCRATCH_BYTES:
        splits //= 2
    return splits
_ALIGN_FLOATS = 16  # between scratch regions: every region keeps Triton's 16-byte pointer specialisation


def _aligned(floats: int) -> int:
    return -(-floats // _ALIGN_FLOATS) * _ALIGN_FLOATS


class CompressPlan:
    """The launch of one argument signature (shapes, dtypes, strides, device, scalars)."""

    def __init__(self, args, out: torch.Tensor | None, step_state_slots: bool | None = None):
        dev = args.device
        n, C, bs = args.num_outputs, args.compress_ratio, args.block_size
        self.device = dev
        self.cuda_index = dev.index if dev.type == "cuda" else None
        self.nothing_to_do = n == 0 or args.nothing_to_read
        if self.nothing_to_do:
            return
        step = step_state_slots is not None
        units = compute_units(dev.type, dev.index if dev.index is not None else 0)
        tiles = tiles_for(device_kind(dev), C, typical_outputs(n, C) if step else n)
        window = args.window  # C rows, or 2C with overlap
        steps = window_steps(tiles, bs, window)
        max_cols = window_columns(window, bs)  # logical blocks a window can touch
        splits = (_step_splits(tiles, n, C, max_cols, steps.blocks, units) if step
                  else window_splits(tiles, n, max_cols, steps.blocks, units))
        self.num_outputs = n  # outputs with scratch (a step: its token count, their bound)
        self.step = step
        inline_t = 0  # a step small enough to be searched inside the kernel: its token tile
        token_tile = 0  # a step of few requests: tokens a program owns (and searches) in the tiled grid
        listers = 0  # any other step: the programs that list its boundary tokens (``ticket_search``)
        self._search = (0, 0)  # the search kernel's (num_tokens, chunk)
        d_tiles = HEAD_DIM // tiles.block_d  # programs an output's window piece takes
        if self.step:
            num_tokens = args.token_to_req.shape[0]
            if num_tokens * splits * d_tiles <= STEP_PER_TOKEN_PROGRAMS_PER_UNIT * units:
                token_tile = 1  # scratch: a slot a token
            elif num_tokens <= STEP_INLINE_TOKENS:
                inline_t = max(16, triton.next_power_of_2(num_tokens))
                if window <= STEP_INLINE_WHOLE_WINDOW_ROWS:
                    splits = 1
            elif args.block_table.shape[0] <= STEP_TILE_MAX_REQUESTS:
                token_tile = C
                splits = min(splits, STEP_TILE_MAX_SPLITS)
                # scratch slots: one a tile (its first output), one a token (a tile's further ones)
                self.num_outputs = triton.cdiv(n, C) + n
            else:
                search = plan_search(num_tokens, units)
                listers = search.programs
                self._search = (num_tokens, search.chunk)
        cols_per_split = triton.cdiv(triton.cdiv(max_cols, splits), steps.blocks) * steps.blocks
        self.splits = splits
        items_per_output = splits * d_tiles
        self.scratch_floats = self.num_outputs * splits * (3 * HEAD_DIM + 1)
        # int32 counters: an arrival counter an output, then the search's (``ticket_search``), aligned
        self._sync_at = _aligned(self.num_outputs)
        self.counters = self._sync_at + SYNC_COUNTERS + listers if listers else self.num_outputs
        if self.step:
            # int32 regions after the piece states: the boundary list and its count
            self._list_at = _aligned(self.scratch_floats)
            self._count_at = self._list_at + _aligned(num_tokens)
            self.scratch_floats = self._count_at + _ALIGN_FLOATS
        st, bt, cs = args.state_cache, args.block_table, args.cos_sin_cache
        self.scalars = (
            self.num_outputs, args.token_to_req.shape[0], bt.shape[0], bt.shape[1], st.shape[0], args.num_slots,
            cs.shape[0], bs, cols_per_split,
            st.stride(0), st.stride(1), st.stride(2), bt.stride(0), bt.stride(1), cs.stride(0), cs.stride(1),
            # out=None: a new contiguous tensor (pages of P * 584 bytes, or bf16 rows of 512)
            args.kv_cache.shape[-1] if out is None else cache_row_stride(out, args.kv_format),
            args.rms_norm_eps,
        )
        constexprs = dict(C=C, BLOCK_D=tiles.block_d, ROWS=steps.rows, NB=steps.blocks, CHUNKED=steps.chunked,
                          SPLITS=splits, SPLITS_P2=max(2, triton.next_power_of_2(splits)),
                          EVICT="evict_first" if tiles.evict_first else "", COUNTED=self.step,
                          INLINE_T=inline_t, TOKEN_TILE=token_tile,
                          HAS_STATE_SLOTS=bool(step_state_slots), SLOTS_PER_PAGE=args.slots_per_page,
                          KV_FORMAT=KV_FORMAT_CODES[args.kv_format], OVERLAP=args.overlap, **FORMAT_SLOT_CONSTEXPRS)
        items = n * items_per_output
        per_unit = STEP_INLINE_PROGRAMS_PER_UNIT if inline_t else STEP_PROGRAMS_PER_UNIT
        options = dict(num_warps=tiles.warps, num_stages=tiles.stages)
        if token_tile:
            grid = (triton.cdiv(n, token_tile) * items_per_output,)
            # the cap is for the loop over a tile's further outputs, which a tile of one token has not
            cap = token_tile_registers(grid[0], tiles, units) if _caps_registers(dev) and token_tile > 1 else None
            if cap is not None:
                options["maxnreg"] = cap
        else:
            grid = (min(items, per_unit * units) if self.step else items,)
        self.launcher = KernelLauncher(_window_compress_kernel, grid, constexprs, options)
        self.search_launcher = None  # any other step: the search's one launch (``ticket_search``)
        if listers:
            self.search_launcher = KernelLauncher(_ticket_list_kernel, (listers,),
                                                  dict(C=C, HAS_STATE_SLOTS=bool(step_state_slots)), {})

    def __call__(self, state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
                 cos_sin_cache, kv_slot_mapping, kv_cache, out, pointers: list | None = None):
        """Run on tensors of this plan's signature (1-D ones contiguous); returns the written cache.

        ``pointers``: the tensors' data addresses in argument order, as ``ascend_kvc.launch.
        call_signature`` gives them on a repeat call. Once the kernel is compiled the launch then
        takes those integers instead of the tensors.
        """
        if out is None:
            out = torch.zeros_like(kv_cache, memory_format=torch.contiguous_format)
        if self.nothing_to_do:
            return out
        index = self.cuda_index
        if index is not None and torch._C._cuda_getDevice() != index:
            with torch.cuda.device(index):
                return self(state_cache, token_to_req, positions, boundary_token_indices, block_table,
                            rms_norm_weight, cos_sin_cache, kv_slot_mapping, kv_cache, out, pointers)
        stream, key, capturing = stream_state(self.device)
        part, arrivals = stream_scratch(self.device, key, self.scratch_floats, self.counters, capturing)
        if self.step:
            return self._step(stream, part, arrivals, state_cache, token_to_req, positions, boundary_token_indices,
                              block_table, rms_norm_weight, cos_sin_cache, kv_slot_mapping, out, pointers)
        if pointers is not None and self.launcher.takes_addresses():
            p = pointers  # in this method's argument order; the kernel's order below
            self.launcher.launch_compiled(stream, p[0], p[3], p[1], p[2], p[7], p[4], p[5], p[6], out.data_ptr(),
                                          part.data_ptr(), arrivals.data_ptr(), *self.scalars, p[3], p[3])  # not read
        else:
            self.launcher(stream, state_cache, boundary_token_indices, token_to_req, positions, kv_slot_mapping,
                          block_table, rms_norm_weight, cos_sin_cache, out, part, arrivals, *self.scalars,
                          boundary_token_indices, boundary_token_indices)  # not read (COUNTED is False)
        return out

    def _step(self, stream, part, arrivals, state_cache, token_to_req, positions, state_slots, block_table,
              rms_norm_weight, cos_sin_cache, kv_slot_mapping, out, pointers):
        """The search's launch where the step has one (``ticket_search``), then the counted kernel;
        ``state_slots`` holds the state slot mapping (the kv slot mapping when the engine has none)."""
        search = self.search_launcher
        if pointers is not None and self.launcher.takes_addresses() and (search is None or search.takes_addresses()):
            p, base = pointers, part.data_ptr()
            listing, count = base + 4 * self._list_at, base + 4 * self._count_at
            if search is not None:
                search.launch_compiled(stream, p[2], p[7], p[3], listing, count, arrivals.data_ptr() + 4 * self._sync_at,
                                       *self._search)
            self.launcher.launch_compiled(stream, p[0], listing, p[1], p[2], p[7], p[4], p[5], p[6], out.data_ptr(),
                                          base, arrivals.data_ptr(), *self.scalars, count, p[3])
            return out
        ints = part.view(torch.int32)
        listing, count = ints[self._list_at:self._count_at], ints[self._count_at:]
        if search is not None:
            search(stream, positions, kv_slot_mapping, state_slots, listing, count, arrivals[self._sync_at:],
                   *self._search)
        self.launcher(stream, state_cache, listing, token_to_req, positions, kv_slot_mapping, block_table,
                      rms_norm_weight, cos_sin_cache, out, part, arrivals, *self.scalars, count, state_slots)
        return out


def launch_plan(args, out: torch.Tensor | None, route_name: str = "gpgpu") -> CompressPlan:
    """A reusable plan for ``args``' signature; ``out`` as given to the operator."""
    return CompressPlan(args, out)


def step_plan(args, out: torch.Tensor, route_name: str, state_slots: bool) -> CompressPlan:
    """A reusable plan for a step of ``args``' signature (``ascend_kvc.compress_step``); ``args``'
    ``boundary_token_indices`` stands for the step's tokens (its length is their count)."""
    return CompressPlan(args, out, step_state_slots=state_slots)


def run(args, route_name: str, plan, out: torch.Tensor) -> None:
    CompressPlan(args, out)(
        args.state_cache, args.token_to_req, args.positions, args.boundary_token_indices, args.block_table,
        args.rms_norm_weight, args.cos_sin_cache, args.kv_slot_mapping, args.kv_cache, out)
