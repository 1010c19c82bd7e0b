"""Finding a step's boundary tokens on the device: a work list (indices and a count) that the
gathers of every sync-free route read, with no host sync and no shape that depends on the count.

A token ``t`` gives an output iff ``(positions[t] + 1) % C == 0``, ``kv_slot_mapping[t] >= 0`` and,
when the engine passes one, ``state_slot_mapping[t] >= 0`` (vLLM's compressor skips the same
tokens). ``_list_boundaries_kernel`` writes the indices of those tokens, in token order, to the
first ``count`` entries of an int32 list of ``num_tokens`` entries (an upper bound on the outputs;
the tail is never written and never read) and ``count`` to one int32. The gathers then take the
list as their ``boundary_token_indices`` and read ``count`` at run time (``counted_outputs``):
their loops end at the count, so an empty step costs its launches and nothing more.

The list keeps token order with no atomics: the tokens are cut into ``programs`` equal chunks;
with more than one, ``_count_boundaries_kernel`` first counts each chunk's boundary tokens, and
the list kernel's program ``p`` starts its chunk's entries after the counts of chunks ``0..p-1``.
Within a chunk, ``BLOCK_T`` tokens at a time, a token's entry is the prefix sum of the flags
before it. Small steps (decode) take one program and one launch; large prefill steps take up to
``MAX_PROGRAMS`` programs (one tile each where the cores allow) and two launches, each reading its chunk once.

On the planned Ascend rungs a small step that always splits skips the search launch: the piece
gather's programs each find the tokens in registers (``boundaries_in_registers``,
``nth_boundary``) and its program 0 writes the count, as the list kernel would have.

On the planned Ascend rungs a larger step of at most ``TILE_MAX_REQUESTS`` requests has no search
either: its outputs are its tiles of C tokens (``ceil(num_tokens / C)`` of them, which the host
knows), output ``i`` the first boundary token of tile ``i`` (``first_boundary_in_tile``; none:
skipped), and the kernels run the indexed call's plan for that many outputs (``step_outputs``,
``step_output_token``). A tile's further boundary tokens (requests ending a window in one tile)
are taken one after another by the last gather launch's whole-window loop
(``next_boundary_in_tile``), and on the default by its quantise and scatter kernels.

The list kernel also decides the work split of the planned Ascend rungs from the count
(``split_counts``): it writes the count three times, all of it, the part the unsplit kernels
take, the part the split kernels take (one of the last two is zero). Each kernel loops to its own
count, so both paths can be launched and only one does work.

The boundary test is integer arithmetic: ``C`` is a power of two dividing ``2**32``, so
``(p + 1) % C == 0`` is ``((int32(p) + 1) & (C - 1)) == 0`` for int32 and int64 positions alike
(vector int64 arithmetic falls back to scalar code on Ascend). Slots are compared in their own
dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

import triton
import triton.language as tl

# Tokens a program tests at once: an int64 position and two int64 slots each, 24 KiB a tile.
BLOCK_T = 1024
# The most programs of a search (their counts are read as one [MAX_PROGRAMS] vector): a
# 131072-token step in one tile a program.
MAX_PROGRAMS = 128
# Steps of at most this many tokens are searched by one program in one launch (decode steps,
# small prefill chunks); larger ones in two launches, in chunks of at least MIN_CHUNK_TOKENS.
SINGLE_PROGRAM_TOKENS = 4096
MIN_CHUNK_TOKENS = BLOCK_T
# On the planned Ascend rungs, a step of at most this many tokens (a decode step) whose every count
# of outputs takes the split path is searched inside the piece gather (``boundaries_in_registers``
# in every program: a [512] int32 prefix sum), one launch fewer than the list kernel's.
INLINE_SEARCH_TOKENS = 512
# On the planned Ascend rungs, a larger step of at most this many requests (block-table rows: a
# prefill chunk or a few) has no search launch: its outputs are its tiles of C tokens, each the tile's first boundary
# token (``first_boundary_in_tile``), and the tiles' further boundary tokens (where requests end a
# window in one tile; a request's consecutive positions give a tile at most one) are taken one
# after another in the last launch's whole-window loop. With more requests the boundaries may
# crowd into a few tiles (a decode batch), so those steps keep the search and its list.
TILE_MAX_REQUESTS = 16


@triton.jit
def counted_outputs(count_ptr, num_outputs, COUNTED: tl.constexpr):
    """The outputs a gather loops over: ``num_outputs``, or with ``COUNTED`` the count the
    boundary search left at ``count_ptr`` (never more than ``num_outputs``, the list's length)."""
    if COUNTED:
        return tl.minimum(tl.load(count_ptr), num_outputs)
    else:
        return num_outputs


@triton.jit
def step_outputs(count_ptr, num_outputs, tile_from, COUNTED: tl.constexpr):
    """``counted_outputs`` for the kernels that also run a step by token tile (``tile_from >= 0``,
    ``first_boundary_in_tile``): there they loop over all ``num_outputs`` tiles, a number the host
    knows, and read no count."""
    if COUNTED:
        return tl.where(tile_from >= 0, num_outputs, tl.minimum(tl.load(count_ptr), num_outputs))
    else:
        return num_outputs


@triton.jit
def split_counts(count, split_max, split_cores, split_always):
    """The outputs the split kernels take (all ``count`` of them, or 0; the unsplit kernels take
    the rest): up to ``split_max`` outputs, when ``split_always`` (a piece gather with wider
    tiles, where programs own their cores) or when whole windows would keep less than 95% of
    ``split_cores`` busy (``work_split.BUSY_TARGET``: ``count / (cores * ceil(count / cores))``),
    the rule ``work_split.plan_split`` applies on the host, here applied to the count on the device."""
    rounds = (count + split_cores - 1) // split_cores
    idle = count * 20 < 19 * split_cores * rounds
    take = (count <= split_max) & ((split_always != 0) | idle)
    return tl.where(take, count, 0)


def every_count_splits(max_count: int, split_max: int, split_cores: int, split_always: bool) -> bool:
    """Whether ``split_counts`` gives every count from 1 to ``max_count`` to the split kernels
    (then a step needs no unsplit gather): the host's copy of the device's rule."""
    if max_count > split_max:
        return False
    if split_always:
        return True
    return all(c * 20 < 19 * split_cores * -(-c // split_cores) for c in range(1, max_count + 1))


@triton.jit
def _boundary_flags(positions_ptr, kv_slot_ptr, state_slot_ptr, offs, end, C: tl.constexpr,
                    HAS_STATE_SLOTS: tl.constexpr):
    """``[BLOCK_T]`` int32: 1 where token ``offs`` (``< end``) gives an output, else 0."""
    live = offs < end
    pos = tl.load(positions_ptr + offs, mask=live, other=0).to(tl.int32)  # C divides 2**32: exact test
    flag = live & (((pos + 1) & (C - 1)) == 0)
    flag = flag & (tl.load(kv_slot_ptr + offs, mask=live, other=-1) >= 0)
    if HAS_STATE_SLOTS:
        flag = flag & (tl.load(state_slot_ptr + offs, mask=live, other=-1) >= 0)
    return flag.to(tl.int32)


@triton.jit
def token_gives_output(positions_ptr, kv_slot_ptr, state_slot_ptr, token, num_tokens, C: tl.constexpr,
                       HAS_STATE_SLOTS: tl.constexpr):
    """Whether the one token ``token`` (a scalar; none at or past ``num_tokens``) gives an output:
    a program that owns a single token tests it with no search."""
    return _boundary_flags(positions_ptr, kv_slot_ptr, state_slot_ptr, token, num_tokens, C, HAS_STATE_SLOTS) != 0


@triton.jit
def boundaries_in_registers(positions_ptr, kv_slot_ptr, state_slot_ptr, num_tokens, INLINE_T: tl.constexpr,
                            C: tl.constexpr, HAS_STATE_SLOTS: tl.constexpr):
    """A small step's search kept in the program (``num_tokens <= INLINE_T``): ``(offs, ranks,
    count)``, the ``[INLINE_T]`` token indices, each boundary token's place among them counted from
    1 (0 for the other tokens), and the count. ``nth_boundary`` reads an output's token from them,
    with no list in memory; one ``[INLINE_T]`` vector stays live, not a flag and a prefix sum."""
    offs = tl.arange(0, INLINE_T)
    flag = _boundary_flags(positions_ptr, kv_slot_ptr, state_slot_ptr, offs, num_tokens, C, HAS_STATE_SLOTS)
    return offs, tl.where(flag != 0, tl.cumsum(flag, axis=0), 0), tl.sum(flag, axis=0)


@triton.jit
def next_boundary_in_tile(positions_ptr, kv_slot_ptr, state_slot_ptr, first, num_tokens, after,
                          TILE: tl.constexpr, C: tl.constexpr, HAS_STATE_SLOTS: tl.constexpr):
    """``(lane, count)`` for the ``TILE`` tokens from token ``first`` on (those below
    ``num_tokens``): the least lane above ``after`` whose token gives an output (``TILE`` if none),
    and how many lanes above ``after`` do. A program that owns a tile of a step's tokens takes
    its outputs one at a time, ``after`` the last one's lane, reading the tile's index entries
    again (from cache) instead of keeping a ``[TILE]`` vector live across each output's gather.

    The lanes read are the ``TILE`` after ``after`` (those past the tile masked), so their
    addresses depend on ``after``: the compiler cannot keep one call's ``[TILE]`` pointers and
    masks live into the next (which cost the token-tile kernel 8-30 registers a thread for sm_90,
    where registers decide whether its grid runs in one wave; bench/RESULTS.md)."""
    lanes = after + 1 + tl.arange(0, TILE)
    flag = _boundary_flags(positions_ptr, kv_slot_ptr, state_slot_ptr, first + lanes,
                           tl.minimum(num_tokens, first + TILE), C, HAS_STATE_SLOTS)
    return tl.min(tl.where(flag != 0, lanes, TILE), axis=0), tl.sum(flag, axis=0)


@triton.jit
def first_boundary_in_tile(positions_ptr, kv_slot_ptr, state_slot_ptr, tile, num_tokens, C: tl.constexpr,
                           HAS_STATE_SLOTS: tl.constexpr):
    """The first token of tile ``tile`` (tokens ``tile * C`` to ``tile * C + C - 1``, those below
    ``num_tokens``) that gives an output, as int64; -1 where none does."""
    first = tile * C
    lane, _count = next_boundary_in_tile(positions_ptr, kv_slot_ptr, state_slot_ptr, first, num_tokens, -1, C, C,
                                         HAS_STATE_SLOTS)
    return tl.where(lane < C, first + lane, -1).to(tl.int64)


@triton.jit
def step_output_token(i, boundary_ptr, positions_ptr, kv_slot_ptr, state_slot_ptr, num_tokens, tile_from,
                      C: tl.constexpr, HAS_STATE_SLOTS: tl.constexpr, COUNTED: tl.constexpr):
    """Output ``i``'s token (int64; -1 where a tile has none): entry ``i`` of the boundary list, or in
    a step run by token tile (``COUNTED`` and ``tile_from >= 0``) the first boundary token of tile
    ``i``."""
    if COUNTED:
        if tile_from >= 0:
            token = first_boundary_in_tile(positions_ptr, kv_slot_ptr, state_slot_ptr, i, num_tokens, C,
                                           HAS_STATE_SLOTS)
        else:
            token = tl.load(boundary_ptr + i).to(tl.int64)
    else:
        token = tl.load(boundary_ptr + i).to(tl.int64)
    return token


@triton.jit
def nth_boundary(offs, ranks, i):
    """Output ``i``'s token (int64), from ``boundaries_in_registers``: the boundary token whose
    place is ``i + 1`` (0 when ``i`` is not below the count)."""
    return tl.sum(tl.where(ranks == i + 1, offs, 0), axis=0).to(tl.int64)


@triton.jit
def count_chunk_boundaries(positions_ptr, kv_slot_ptr, state_slot_ptr, start, end, C: tl.constexpr,
                           BLOCK_T: tl.constexpr, HAS_STATE_SLOTS: tl.constexpr):
    """How many of tokens ``start..end - 1`` give an output."""
    lanes = tl.arange(0, BLOCK_T)
    total = start * 0
    for t0 in range(start, end, BLOCK_T):
        total += tl.sum(_boundary_flags(positions_ptr, kv_slot_ptr, state_slot_ptr, t0 + lanes, end, C,
                                        HAS_STATE_SLOTS), axis=0)
    return total


@triton.jit
def list_chunk_entries(positions_ptr, kv_slot_ptr, state_slot_ptr, list_ptr, base, start, end, C: tl.constexpr,
                       BLOCK_T: tl.constexpr, HAS_STATE_SLOTS: tl.constexpr):
    """The boundary tokens of tokens ``start..end - 1``, in token order, into the list from entry
    ``base`` on; returns the entry after the last (``base`` plus their count)."""
    lanes = tl.arange(0, BLOCK_T)
    for t0 in range(start, end, BLOCK_T):
        offs = t0 + lanes
        flag = _boundary_flags(positions_ptr, kv_slot_ptr, state_slot_ptr, offs, end, C, HAS_STATE_SLOTS)
        rank = tl.cumsum(flag, axis=0)  # [BLOCK_T]: flags up to and including each token
        tl.store(list_ptr + base + rank - 1, offs, mask=flag != 0)
        base += tl.sum(flag, axis=0)
    return base


@triton.jit
def _count_boundaries_kernel(
    positions_ptr,  # in, [num_tokens], int64/int32
    kv_slot_ptr,  # in, [num_tokens], int64/int32: < 0 gives no output
    state_slot_ptr,  # in, [num_tokens], int64/int32: < 0 gives no output (read with HAS_STATE_SLOTS)
    counts_ptr,  # out, [programs], int32: boundary tokens in each program's chunk
    num_tokens, chunk,
    C: tl.constexpr, BLOCK_T: tl.constexpr, HAS_STATE_SLOTS: tl.constexpr,
):
    pid = tl.program_id(0)
    start = pid * chunk
    tl.store(counts_ptr + pid, count_chunk_boundaries(positions_ptr, kv_slot_ptr, state_slot_ptr, start,
                                                      tl.minimum(start + chunk, num_tokens), C, BLOCK_T,
                                                      HAS_STATE_SLOTS))


@triton.jit
def _list_boundaries_kernel(
    positions_ptr,  # in, [num_tokens], int64/int32
    kv_slot_ptr,  # in, [num_tokens], int64/int32: < 0 gives no output
    state_slot_ptr,  # in, [num_tokens], int64/int32: < 0 gives no output (read with HAS_STATE_SLOTS)
    counts_ptr,  # in, [programs], int32, from _count_boundaries_kernel (read by programs > 0 only)
    list_ptr,  # out, [num_tokens], int32: the boundary tokens in token order, first count entries
    count_ptr,  # out, [3], int32: how many; of those, for the unsplit kernels; for the split ones
    num_tokens, chunk,
    split_max, split_cores, split_always,  # the work split's rule (``split_counts``)
    C: tl.constexpr, BLOCK_T: tl.constexpr, HAS_STATE_SLOTS: tl.constexpr, MAX_PROGRAMS: tl.constexpr,
):
    pid = tl.program_id(0)
    q = tl.arange(0, MAX_PROGRAMS)
    base = tl.sum(tl.load(counts_ptr + q, mask=q < pid, other=0), axis=0)  # entries of the chunks before
    start = pid * chunk
    base = list_chunk_entries(positions_ptr, kv_slot_ptr, state_slot_ptr, list_ptr, base, start,
                              tl.minimum(start + chunk, num_tokens), C, BLOCK_T, HAS_STATE_SLOTS)
    if pid == tl.num_programs(0) - 1:  # the last chunk's end: every chunk counted
        split = split_counts(base, split_max, split_cores, split_always)
        tl.store(count_ptr, base)
        tl.store(count_ptr + 1, base - split)
        tl.store(count_ptr + 2, split)


@dataclass(frozen=True)
class BoundarySearch:
    """How one step signature searches its tokens: ``programs`` chunks of ``chunk`` tokens."""

    num_tokens: int
    programs: int
    chunk: int

    @property
    def launches(self) -> int:
        return 1 if self.programs == 1 else 2


def plan_search(num_tokens: int, max_programs: int = MAX_PROGRAMS) -> BoundarySearch:
    """One program up to ``SINGLE_PROGRAM_TOKENS`` tokens; else chunks of whole ``BLOCK_T`` tiles
    on as many programs as ``max_programs`` (at most ``MAX_PROGRAMS``) allows, each at least
    ``MIN_CHUNK_TOKENS``: a chunk's tiles are read one after another, so fewer tiles a program is
    less time a launch."""
    if num_tokens < 0 or max_programs < 1:
        raise ValueError(f"need num_tokens >= 0 and max_programs >= 1, got {num_tokens}, {max_programs}")
    cap = min(max_programs, MAX_PROGRAMS)
    if num_tokens <= SINGLE_PROGRAM_TOKENS or cap == 1:
        return BoundarySearch(num_tokens, 1, max(num_tokens, 1))
    programs = min(cap, -(-num_tokens // max(MIN_CHUNK_TOKENS, BLOCK_T)))
    tiles = -(-num_tokens // BLOCK_T)
    chunk = -(-tiles // programs) * BLOCK_T
    return BoundarySearch(num_tokens, -(-num_tokens // chunk), chunk)


def search_constexprs(compress_ratio: int, has_state_slots: bool) -> tuple[dict, dict]:
    """``(count kernel's, list kernel's)`` constexprs."""
    count = dict(C=compress_ratio, BLOCK_T=BLOCK_T, HAS_STATE_SLOTS=has_state_slots)
    return count, dict(count, MAX_PROGRAMS=MAX_PROGRAMS)


# Where each kernel reads its count in the ``[3]`` int32 count buffer.
COUNT_TOTAL, COUNT_UNSPLIT, COUNT_SPLIT = 0, 1, 2
# Outputs per core up to which a step may take the split path, which bounds the split's state
# slots (``stages.plan.step_piece_slots``: about this many per program, 6 KiB each); more outputs
# give every core this many whole windows. 32 keeps every official case run as a step on the
# path its indexed call takes (1024 outputs on 40 cores split there, where the piece gather reads
# wider tiles).
SPLIT_ROUNDS = 32
