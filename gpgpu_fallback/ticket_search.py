"""A step's boundary search in one launch, however many chunks it takes: the list of boundary
tokens, in token order, and its count, for ``gpgpu``'s steps too large for every program of the
compress kernel to search them itself and of too many requests for token tiles (a prefill chunk
with decode tokens beside it).

``ascend_kvc.boundaries`` lists a step of more than one chunk in two launches: a count kernel,
then the list kernel, whose program ``p`` starts its entries after the counts of chunks
``0..p-1``. Here one launch does both: its programs take tickets in the order they start (an
atomic counter), not their program ids; lister ``k`` counts the boundary tokens of chunk ``k``
(``boundaries.plan_search``'s chunks), publishes its count, adds up the counts its predecessors
published (waiting for each), and writes its chunk's entries after theirs; the last chunk's
lister writes the count. A lister waits only for lower tickets, whose programs have started and
so run to their end whatever else the GPU holds; under Triton's interpreter, which runs programs
one after another in id order, every wait is over when it begins. The last lister to finish sets
the counters back to zero for the next launch.

The waits spin on the device, so this is the GPU route's alone: the Ascend rungs keep the two
launches of ``ascend_kvc.boundaries``.

Counters, int32 in the launch's zeroed counters (``launch.stream_scratch``): ``[ticket,
finished, chunk count + 1 for each chunk]`` (``SYNC_COUNTERS`` and one a chunk), zero before and
after every launch.
"""

from __future__ import annotations

import triton
import triton.language as tl

from ascend_kvc.boundaries import BLOCK_T, MAX_PROGRAMS, count_chunk_boundaries, list_chunk_entries

SYNC_COUNTERS = 2  # ticket, finished; then one a chunk
# The module's constants as a kernel reads them (a @triton.jit function reads constexpr globals only).
_SYNC_COUNTERS = tl.constexpr(SYNC_COUNTERS)
_BLOCK_T = tl.constexpr(BLOCK_T)
_MAX_PROGRAMS = tl.constexpr(MAX_PROGRAMS)


@triton.jit
def _ticket_list_kernel(
    positions_ptr,  # in, [num_tokens], int64/int32
    kv_slot_ptr,  # in, [num_tokens], int64/int32: < 0 gives no output
    state_slot_ptr,  # in, [num_tokens], int64/int32: < 0 gives no output (read with HAS_STATE_SLOTS)
    list_ptr,  # out, [num_tokens], int32: the boundary tokens in token order, first count entries
    count_ptr,  # out, [1], int32: how many
    sync_ptr,  # scratch, [SYNC_COUNTERS + programs], int32: zero before and after the launch
    num_tokens, chunk,
    C: tl.constexpr, HAS_STATE_SLOTS: tl.constexpr,
):
    """One lister a chunk of ``chunk`` tokens, chunk ``k`` to the program of ticket ``k``."""
    chunks = tl.num_programs(0)
    k = tl.atomic_add(sync_ptr, 1, sem="relaxed", scope="gpu")  # the order programs started in
    start = k * chunk
    end = tl.minimum(start + chunk, num_tokens)
    mine = count_chunk_boundaries(positions_ptr, kv_slot_ptr, state_slot_ptr, start, end, C, _BLOCK_T, HAS_STATE_SLOTS)
    counts_ptr = sync_ptr + _SYNC_COUNTERS
    tl.atomic_xchg(counts_ptr + k, mine + 1, sem="relaxed", scope="gpu")  # 0 is "not yet"
    # The earlier chunks' counts, each as soon as its lister has published it.
    q = tl.arange(0, _MAX_PROGRAMS)
    earlier = tl.load(counts_ptr + q, mask=q < k, other=1, volatile=True)
    waiting = tl.sum((earlier == 0).to(tl.int32), axis=0)
    while waiting > 0:
        earlier = tl.load(counts_ptr + q, mask=q < k, other=1, volatile=True)
        waiting = tl.sum((earlier == 0).to(tl.int32), axis=0)
    base = list_chunk_entries(positions_ptr, kv_slot_ptr, state_slot_ptr, list_ptr, tl.sum(earlier - 1, axis=0),
                              start, end, C, _BLOCK_T, HAS_STATE_SLOTS)
    if k == chunks - 1:
        tl.store(count_ptr, base)
    # Every lister has read its predecessors' counts once all have counted themselves finished.
    tl.debug_barrier()
    if tl.atomic_add(sync_ptr + 1, 1, sem="acq_rel", scope="gpu") == chunks - 1:
        tl.store(counts_ptr + q, 0, mask=q < chunks)
        tl.store(sync_ptr, 0)
        tl.store(sync_ptr + 1, 0)
