"""The work split of the default and ``fused`` rungs: runs of window rows, then a merge (two launches).

When one window per program would leave vector cores idle (``work_split.plan_split``), the
call's windows are laid end to end, ``num_outputs * C`` rows in output order (``2C`` rows a window
with the overlapping ratio-4 compressor, ``OVERLAP``), in units of
``RUN_ROWS`` rows (the piece gather's ``ROW_TILE``), and program ``p`` of ``programs`` reads the
run of units ``[p * U // programs, (p + 1) * U // programs)``, ``U = num_outputs * C / RUN_ROWS``.
A run is one piece per window it touches: ``_window_piece_kernel`` pools each piece with the
block-centric window loop of ``block_gather.pool_window`` (one block-table lookup per physical
block, ``[ROW_TILE, 512]`` row tiles) and leaves the piece's softmax state in scratch slot
``p * piece_slots + j`` (the run's ``j``-th piece). The program whose run holds a window's first
row also writes the output's *head*: its slot (-1 when the output is skipped) and position.
A second launch merges each output's pieces, those of the programs whose runs hold its first to
its last row, and ends the way the unsplit rung does: ``_merge_to_slot_kernel`` with
``fused.store_output`` (``fused``, every cache format), or ``_merge_to_bf16_kernel`` with the real
bf16 tensor the default's quantise kernel reads. The merge reads the head, not the index
tensors, so it waits on one read before the states instead of a chain of three.

No cross-core atomics and no ordering between programs of one launch: the merge runs only after
every piece of the launch before it has been written, which is the stream's own order.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ..boundaries import boundaries_in_registers, nth_boundary, step_output_token, step_outputs
from ..triton_helpers import resolve_token
from .block_gather import _gather_to_bf16_kernel, pool_resolved, store_rotated_bf16
from .fused import _fused_compress_kernel, store_output

STATE_FLOATS = 3 * 512  # a piece's state: running max, sum and weighted sum per dimension
MERGE_ROWS = 4  # piece states a merge step reads as one [MERGE_ROWS, 512] tile


@triton.jit
def active_programs(programs, units):
    """Programs of a split whose runs are not empty when a step's count is known only on the
    device: ``min(programs, units)``, at least 1. The piece gather and the merge both use it for
    the runs and for where the bad-block counts start (after that many programs' state slots,
    inside the scratch planned for the grid's programs)."""
    return tl.maximum(tl.minimum(programs, units), 1).to(tl.int32)


@triton.jit
def _window_piece_kernel(
    state_ptr,  # in, [num_blocks, block_size, 1024], float32/bfloat16
    boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr,  # in, index tensors
    block_table_ptr,  # in, [num_reqs, blocks_per_req], int32/int64
    part_ptr,  # out, [programs * piece_slots, 3, 512] float32 states, then as many bad-block counts
    head_ptr,  # out, [num_outputs, 2] int64: each output's slot (-1: skip) and position
    num_outputs, programs, piece_slots, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos,
    block_size, state_s0, state_s1, state_s2, bt_s0, bt_s1,
    count_ptr,  # in, [1], int32: outputs in the boundary list (read with COUNTED: a step's device list);
    # with INLINE_T out, [3] int32: the count as the search kernel leaves it, for the kernels after this one
    state_slot_ptr,  # in, [num_tokens], int64/int32: a step's state slots (read with HAS_STATE_SLOTS)
    tile_from,  # a step by token tile (>= 0, with COUNTED): output i is the first boundary token of tile i; else -1
    C: tl.constexpr, ROW_TILE: tl.constexpr, ROWS_PADDED: tl.constexpr, LOOKUP_AHEAD: tl.constexpr,
    VOLATILE_ROWS: tl.constexpr, RUN_ROWS: tl.constexpr, COUNTED: tl.constexpr, OVERLAP: tl.constexpr,
    INLINE_T: tl.constexpr, HAS_STATE_SLOTS: tl.constexpr,
):
    WINDOW: tl.constexpr = C + C * OVERLAP  # rows one output pools: 2C with the overlapping compressor
    pid = tl.program_id(0)
    dims = tl.arange(0, 512)
    if INLINE_T > 0:  # a small step: every program finds the boundary tokens itself, no search launch
        offs, ranks, count = boundaries_in_registers(positions_ptr, slot_mapping_ptr, state_slot_ptr, num_tokens,
                                                     INLINE_T, C, HAS_STATE_SLOTS)
        num_outputs = tl.minimum(count, num_outputs)
        if pid == 0:  # what the list kernel would leave (boundaries.COUNT_*): all, none unsplit, all split
            tl.store(count_ptr, num_outputs)
            tl.store(count_ptr + 1, num_outputs * 0)
            tl.store(count_ptr + 2, num_outputs)
    else:
        num_outputs = step_outputs(count_ptr, num_outputs, tile_from, COUNTED)
    units = tl.cast(num_outputs, tl.int64) * (WINDOW // RUN_ROWS)  # the windows laid end to end, in RUN_ROWS units
    if COUNTED:  # fewer units than programs: runs on the first ``units`` programs, the others read nothing
        programs = active_programs(programs, units)
    first = (pid * units // programs * RUN_ROWS).to(tl.int32)  # this program's run: rows [first, end)
    end = ((pid + 1) * units // programs * RUN_ROWS).to(tl.int32)
    if COUNTED:
        first = tl.where(pid < programs, first, 0)
        end = tl.where(pid < programs, end, 0)
    first_output = first // WINDOW
    last_output = tl.where(end > first, (end - 1) // WINDOW, first_output - 1)  # an empty run: no piece
    bad_counts = part_ptr + tl.cast(programs * piece_slots, tl.int64) * 1536
    for i in range(first_output, last_output + 1):  # one piece per window the run touches
        if INLINE_T > 0:
            ok, req, pos, slot = resolve_token(
                nth_boundary(offs, ranks, i), token_to_req_ptr, positions_ptr, slot_mapping_ptr,
                num_tokens, num_reqs, blocks_per_req, num_slots, max_pos, block_size, C)
        else:
            ok, req, pos, slot = resolve_token(
                step_output_token(i, boundary_ptr, positions_ptr, slot_mapping_ptr, state_slot_ptr, num_tokens,
                                  tile_from, C, HAS_STATE_SLOTS, COUNTED),
                token_to_req_ptr, positions_ptr, slot_mapping_ptr,
                num_tokens, num_reqs, blocks_per_req, num_slots, max_pos, block_size, C)
        lo = tl.maximum(first - i * WINDOW, 0)
        # The piece that holds the window's first row tells the merge where the output goes, before
        # its rows are pooled: stored after them (the slot and position then kept through the
        # window loop), this kernel measured up to 6% slower on an H200 (bench/RESULTS.md).
        if lo == 0:
            tl.store(head_ptr + 2 * i, tl.where(ok, slot, -1))
            tl.store(head_ptr + 2 * i + 1, pos)
        m, l, acc, n_bad = pool_resolved(
            ok, req, pos, lo, tl.minimum(end - i * WINDOW, WINDOW) - 1, state_ptr, block_table_ptr, num_blocks,
            block_size, state_s0, state_s1, state_s2, bt_s0, bt_s1, C, ROW_TILE, ROWS_PADDED, LOOKUP_AHEAD,
            VOLATILE_ROWS, OVERLAP)
        piece = pid * piece_slots + (i - first_output)
        state = part_ptr + tl.cast(piece, tl.int64) * 1536 + dims
        tl.store(state, m)
        tl.store(state + 512, l)
        tl.store(state + 1024, acc)
        tl.store(bad_counts + piece, n_bad.to(tl.float32))


@triton.jit
def merge_pieces(part_ptr, i, num_outputs, programs, piece_slots, dims, WINDOW: tl.constexpr,
                 MERGE_ROWS: tl.constexpr, RUN_ROWS: tl.constexpr):
    """Output ``i``'s pooled ``c [512]`` from its pieces' states, and its bad-block count.

    The pieces are those of the programs ``first_program`` to ``last_program``, whose runs hold the
    window's first and last rows: slot ``j`` of the first (its run may start in an earlier
    window), then slot 0 of each later one (their runs start inside this window), ``piece_slots``
    states apart. The first state starts the running max, denominator and numerator; the later
    ones fold in ``MERGE_ROWS`` at a time, as strided ``[MERGE_ROWS, 512]`` tiles, with the
    online-softmax rescaling. Every piece of a valid output holds at least one row, so its max is
    finite; with the overlapping compressor (``WINDOW`` = 2C rows) a piece of a first window may
    hold only rows at negative positions (masked: max ``-inf``, sum 0), but at most ``C`` = 4 of
    them, all at the window's start, so a finite max is met by the first ``MERGE_ROWS + 1`` = 5
    states and no rescaling takes ``exp(-inf - -inf)``.
    """
    W: tl.constexpr = WINDOW // RUN_ROWS  # units a window
    units = tl.cast(num_outputs, tl.int64) * W
    unit = tl.cast(i, tl.int64) * W  # the window's first unit, windows laid end to end
    first_program = (((unit + 1) * programs - 1) // units).to(tl.int32)
    last_program = (((unit + W) * programs - 1) // units).to(tl.int32)
    first_piece = first_program * piece_slots + i - (first_program * units // programs).to(tl.int32) // W
    bad_counts = part_ptr + tl.cast(programs * piece_slots, tl.int64) * 1536
    state = part_ptr + tl.cast(first_piece, tl.int64) * 1536 + dims
    mx = tl.load(state)
    den = tl.load(state + 512)
    num = tl.load(state + 1024)
    bad = tl.load(bad_counts + first_piece)
    lanes = tl.arange(0, MERGE_ROWS)
    for p0 in range(first_program + 1, last_program + 1, MERGE_ROWS):
        live = p0 + lanes <= last_program  # [MERGE_ROWS] programs p0, p0 + 1, ...
        piece = lanes * piece_slots  # their slot 0, relative to program p0's
        base = tl.cast(p0 * piece_slots, tl.int64)
        states = part_ptr + base * 1536 + piece[:, None] * 1536 + dims[None, :]  # [MERGE_ROWS, 512]
        m_k = tl.load(states, mask=live[:, None], other=float("-inf"))
        m_new = tl.maximum(mx, tl.max(m_k, axis=0))
        alpha = tl.exp(mx - m_new)
        beta = tl.exp(m_k - m_new[None, :])  # 0 for lanes past the last piece
        den = den * alpha + tl.sum(tl.load(states + 512, mask=live[:, None], other=0.0) * beta, axis=0)
        num = num * alpha + tl.sum(tl.load(states + 1024, mask=live[:, None], other=0.0) * beta, axis=0)
        mx = m_new
        bad += tl.sum(tl.load(bad_counts + base + piece, mask=live, other=0.0), axis=0)
    return num / den, bad


@triton.jit
def merge_output(part_ptr, head_ptr, i, num_outputs, programs, piece_slots, WINDOW: tl.constexpr,
                 MERGE_ROWS: tl.constexpr, RUN_ROWS: tl.constexpr):
    """Output ``i``'s slot and position, as the piece gather resolved them, and its pieces merged:
    ``(ok, pos, slot, c [512], bad)``. A skipped output's pieces hold no rows: nothing is merged
    (``c`` zero, ``bad`` 1).

    The merge reads no index tensor: one read of ``head`` replaces the chain of index reads that
    resolving the output again would wait on. The states are read only once the output is known
    to be valid: reading them ahead of that test measured slower on an H200 with the full grid
    (measured on an H200; git history of bench/RESULTS.md)."""
    slot = tl.load(head_ptr + 2 * i)
    pos = tl.load(head_ptr + 2 * i + 1)
    ok = slot >= 0
    c = tl.zeros([512], tl.float32)
    bad = 1.0
    if ok:
        c, bad = merge_pieces(part_ptr, i, num_outputs, programs, piece_slots, tl.arange(0, 512), WINDOW, MERGE_ROWS,
                              RUN_ROWS)
    return ok, pos, slot, c, bad


@triton.jit
def _merge_to_slot_kernel(
    part_ptr,  # in, the piece states of ``_window_piece_kernel``
    head_ptr,  # in, [num_outputs, 2] int64: slot (-1: skip) and position, from ``_window_piece_kernel``
    weight_ptr,  # in, [512], bfloat16/float32, unit stride
    cos_sin_ptr,  # in, [max_pos, 64], float32
    kv_cache_ptr,  # out, uint8 [num_pages, slots_per_page * 584] (pages kv_s0 apart) or bfloat16 rows of 512
    num_outputs, programs, piece_slots, cs_s0, cs_s1, kv_s0, slots_per_page, eps,
    count_ptr,  # in, [1], int32: outputs in the boundary list (read with COUNTED: a step's device list)
    tile_from,  # >= 0 (with COUNTED): a step by token tile, ``num_outputs`` tiles (their heads -1 where empty)
    C: tl.constexpr, MERGE_ROWS: tl.constexpr, RUN_ROWS: tl.constexpr, NOPE_DIM: tl.constexpr,
    PAYLOAD_BYTES: tl.constexpr, SCALE_BYTES: tl.constexpr, KV_FORMAT: tl.constexpr, COUNTED: tl.constexpr,
    OVERLAP: tl.constexpr,
):
    WINDOW: tl.constexpr = C + C * OVERLAP
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    num_outputs = step_outputs(count_ptr, num_outputs, tile_from, COUNTED)
    if COUNTED:
        programs = active_programs(programs, tl.cast(num_outputs, tl.int64) * (WINDOW // RUN_ROWS))
    for i in range(pid, num_outputs, num_programs):
        ok, pos, slot, c, bad = merge_output(part_ptr, head_ptr, i, num_outputs, programs, piece_slots, WINDOW,
                                             MERGE_ROWS, RUN_ROWS)
        if ok & (bad == 0):
            store_output(c, pos, weight_ptr, eps, cos_sin_ptr, cs_s0, cs_s1, kv_cache_ptr, slot, kv_s0, slots_per_page,
                         C, NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, KV_FORMAT)


@triton.jit
def _merge_to_bf16_kernel(
    part_ptr,  # in, the piece states of ``_window_piece_kernel``
    head_ptr,  # in, [num_outputs, 2] int64: slot (-1: skip) and position, from ``_window_piece_kernel``
    weight_ptr,  # in, [512], bfloat16/float32, unit stride
    cos_sin_ptr,  # in, [max_pos, 64], float32
    y_bf16_ptr,  # out, [num_outputs, 512], int16: the bits of bf16(y), RoPE dims rotated
    slot_out_ptr,  # out, [num_outputs], int64: destination slot, -1 = skip
    num_outputs, programs, piece_slots, cs_s0, cs_s1, eps,
    count_ptr,  # in, [1], int32: outputs in the boundary list (read with COUNTED: a step's device list)
    tile_from,  # >= 0 (with COUNTED): a step by token tile, ``num_outputs`` tiles (their heads -1 where empty)
    C: tl.constexpr, MERGE_ROWS: tl.constexpr, RUN_ROWS: tl.constexpr, COUNTED: tl.constexpr, OVERLAP: tl.constexpr,
):
    WINDOW: tl.constexpr = C + C * OVERLAP
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    num_outputs = step_outputs(count_ptr, num_outputs, tile_from, COUNTED)
    if COUNTED:
        programs = active_programs(programs, tl.cast(num_outputs, tl.int64) * (WINDOW // RUN_ROWS))
    for i in range(pid, num_outputs, num_programs):
        ok, pos, slot, c, bad = merge_output(part_ptr, head_ptr, i, num_outputs, programs, piece_slots, WINDOW,
                                             MERGE_ROWS, RUN_ROWS)
        if ok:  # a skipped output's row is never read
            store_rotated_bf16(c, weight_ptr, eps, cos_sin_ptr + (pos // C) * C * cs_s0, cs_s1, ok,
                               y_bf16_ptr + tl.cast(i, tl.int64) * 512)
        tl.store(slot_out_ptr + i, tl.where(ok & (bad == 0), slot, -1))


@triton.jit
def _merge_or_whole_to_slot_kernel(
    state_ptr, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr, block_table_ptr, weight_ptr,
    cos_sin_ptr, kv_cache_ptr,
    num_outputs, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
    state_s0, state_s1, state_s2, bt_s0, bt_s1, cs_s0, cs_s1, kv_s0, slots_per_page, eps,
    count_ptr,  # in, [2] int32: the step's outputs for the whole-window loop, then for the merge (one is 0)
    state_slot_ptr,  # in, [num_tokens]: the step's state slots (read with HAS_STATE_SLOTS)
    tile_from,  # -1: outputs from the boundary list; 1: a step by token tile (the whole-window loop takes
    # each tile's outputs after its first, which the merge takes)
    part_ptr, head_ptr, programs, piece_slots,  # the piece gather's states and heads, as the merge takes them
    C: tl.constexpr, ROW_TILE: tl.constexpr, ROWS_PADDED: tl.constexpr, LOOKUP_AHEAD: tl.constexpr,
    VOLATILE_ROWS: tl.constexpr, MERGE_ROWS: tl.constexpr, RUN_ROWS: tl.constexpr, NOPE_DIM: tl.constexpr,
    PAYLOAD_BYTES: tl.constexpr, SCALE_BYTES: tl.constexpr, KV_FORMAT: tl.constexpr, OVERLAP: tl.constexpr,
    HAS_STATE_SLOTS: tl.constexpr,
):
    """A step's last launch on ``fused``: the merge of the split outputs (``_merge_to_slot_kernel``),
    then the whole windows of the unsplit ones (``fused._fused_compress_kernel``). The boundary
    search gives all of a step's outputs to one path or the other, so one of the two loops runs
    zero times; the whole-window loop does not wait on the piece gather, which has ended in the
    launch before. One launch where the step had two, the path not taken among them.

    A step by token tile (``tile_from`` 1) has no search: the merge takes each tile's first output
    (the piece gather's), the whole-window loop the tile's further ones, where several requests
    end a window in one tile."""
    _merge_to_slot_kernel(part_ptr, head_ptr, weight_ptr, cos_sin_ptr, kv_cache_ptr, num_outputs, programs,
                          piece_slots, cs_s0, cs_s1, kv_s0, slots_per_page, eps, count_ptr + 1, tile_from, C,
                          MERGE_ROWS, RUN_ROWS, NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, KV_FORMAT, True, OVERLAP)
    _fused_compress_kernel(state_ptr, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr, block_table_ptr,
                           weight_ptr, cos_sin_ptr, kv_cache_ptr, num_outputs, num_tokens, num_reqs, blocks_per_req,
                           num_blocks, num_slots, max_pos, block_size, state_s0, state_s1, state_s2, bt_s0, bt_s1,
                           cs_s0, cs_s1, kv_s0, slots_per_page, eps, count_ptr, state_slot_ptr, tile_from, C, ROW_TILE,
                           ROWS_PADDED, LOOKUP_AHEAD, VOLATILE_ROWS, NOPE_DIM, PAYLOAD_BYTES, SCALE_BYTES, KV_FORMAT,
                           True, OVERLAP, HAS_STATE_SLOTS)


@triton.jit
def _merge_or_whole_to_bf16_kernel(
    state_ptr, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr, block_table_ptr,
    y_bf16_ptr, slot_out_ptr,
    num_outputs, num_tokens, num_reqs, blocks_per_req, num_blocks, num_slots, max_pos, block_size,
    state_s0, state_s1, state_s2, bt_s0, bt_s1, weight_ptr, eps, cos_sin_ptr, cs_s0, cs_s1,
    count_ptr,  # in, [2] int32: the step's outputs for the whole-window loop, then for the merge (one is 0)
    state_slot_ptr,  # in, [num_tokens]: the step's state slots (read with HAS_STATE_SLOTS)
    tile_from,  # -1: outputs from the boundary list; 1: a step by token tile (as ``_merge_or_whole_to_slot_kernel``)
    part_ptr, head_ptr, programs, piece_slots,  # the piece gather's states and heads, as the merge takes them
    C: tl.constexpr, ROW_TILE: tl.constexpr, ROWS_PADDED: tl.constexpr, LOOKUP_AHEAD: tl.constexpr,
    VOLATILE_ROWS: tl.constexpr, MERGE_ROWS: tl.constexpr, RUN_ROWS: tl.constexpr, OVERLAP: tl.constexpr,
    HAS_STATE_SLOTS: tl.constexpr,
):
    """The default's (``triton-quant``) step: the merge of the split outputs
    (``_merge_to_bf16_kernel``), then the whole windows of the unsplit ones
    (``block_gather._gather_to_bf16_kernel``), into the same bf16 rows and slots; as
    ``_merge_or_whole_to_slot_kernel``, one of the two loops runs zero times, and by token tile
    the merge takes each tile's first output (row = tile) and the whole-window loop its further
    ones (``block_gather._gather_to_bf16_kernel``'s rows after the tiles')."""
    _merge_to_bf16_kernel(part_ptr, head_ptr, weight_ptr, cos_sin_ptr, y_bf16_ptr, slot_out_ptr, num_outputs,
                          programs, piece_slots, cs_s0, cs_s1, eps, count_ptr + 1, tile_from, C, MERGE_ROWS, RUN_ROWS,
                          True, OVERLAP)
    _gather_to_bf16_kernel(state_ptr, boundary_ptr, token_to_req_ptr, positions_ptr, slot_mapping_ptr, block_table_ptr,
                           y_bf16_ptr, slot_out_ptr, num_outputs, num_tokens, num_reqs, blocks_per_req, num_blocks,
                           num_slots, max_pos, block_size, state_s0, state_s1, state_s2, bt_s0, bt_s1, weight_ptr, eps,
                           cos_sin_ptr, cs_s0, cs_s1, count_ptr, state_slot_ptr, tile_from, C, ROW_TILE, ROWS_PADDED,
                           LOOKUP_AHEAD, VOLATILE_ROWS, True, OVERLAP, HAS_STATE_SLOTS)
