"""vLLM-Ascend's DeepSeek-V4 caches on a 910B (A2) or A3, passed the way docs/SERVING.md says.

vLLM-Ascend (its main branch of August 2026) keeps the compressor state in float32 pages of a
few rows, ``[num_blocks, rows, 1, width]``, padded to the size of the other cache groups' pages
(so dim 0 is strided), with the position bias already added to the stored scores; and the
compressed KV as bf16 rows ``[num_blocks, entries, 1, 512]``, addressed by ``(block, offset)``
pairs, a padded token's pair being ``(-1, entries - 1)``.

Built here from those rules: the state is a strided view into padded pages (its padding random),
each boundary token gets a random ``(block, offset)`` pair and every other token the padding pair,
and the slot passed is ``block * entries + offset``. The oracle judges every written row, and no
other byte of the cache may change.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from ascend_kvc import compress_step
from ascend_kvc.workloads import StepWorkload, make_workload
from test_step import expected_boundaries, judge

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ROUTES = ["reference", "gpgpu", "ascend:fused"]  # the routes that write bf16 rows
ENTRIES = 64  # compressed entries a page (vLLM-Ascend allows 32, 64 or 128)


def vllm_ascend_step(C: int, overlap: bool, rows: int, tokens: int, seed: int) -> StepWorkload:
    w = make_workload(2, 2 * tokens, C, block_size=rows, shuffle=True, nonzero_cache=True, seed=seed,
                      kv_format="bf16", overlap=overlap, device=DEVICE)
    nb, _, width = w.state_cache.shape
    page = rows * width
    padded = torch.randn(nb, 2 * page, device=DEVICE)  # each page padded to twice its rows
    state_4d = padded.as_strided((nb, rows, 1, width), (2 * page, width, width, 1))
    state_4d.copy_(w.state_cache.unsqueeze(2))
    state = state_4d.squeeze(2)  # what SERVING.md passes: a view, dim 0 strided
    assert state.stride(0) == 2 * page and torch.equal(state, w.state_cache)

    g = torch.Generator().manual_seed(seed + 1)
    closes = ((w.positions.cpu() + 1) % C == 0)
    n = int(closes.sum())
    num_blocks = -(-n // ENTRIES) + 2
    flat = torch.randperm(num_blocks * ENTRIES, generator=g)[:n]
    block = torch.full(closes.shape, -1, dtype=torch.int32)  # the padding pair (-1, ENTRIES - 1)
    offset = torch.full(closes.shape, ENTRIES - 1, dtype=torch.int32)
    block[closes], offset[closes] = (flat // ENTRIES).int(), (flat % ENTRIES).int()
    slots = block.long() * ENTRIES + offset.long()  # the conversion SERVING.md gives
    assert (slots[~closes] == -1).all()
    kv = torch.randn(num_blocks, ENTRIES, 1, 512, generator=g).to(torch.bfloat16).to(DEVICE)
    base = dataclasses.replace(w, state_cache=state)
    return StepWorkload(base=base, token_to_req=w.token_to_req, positions=w.positions,
                        kv_slot_mapping=slots.to(DEVICE), kv_cache=kv, name=f"vllm-ascend-C{C}")


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("C,overlap,rows,tokens", [(4, True, 4, 45), (128, False, 16, 300)],
                         ids=["C4-overlap", "C128"])
def test_vllm_ascend_state_and_rows(route, C, overlap, rows, tokens):
    step = vllm_ascend_step(C, overlap, rows, tokens, seed=C + rows)
    before = step.kv_cache.clone()
    compress_step(*step.args(), **step.kwargs(), route=route, validate=True)
    report = judge(step, step.kv_cache, before)  # the contract's rule, then the oracle
    assert report.num_outputs_written == len(expected_boundaries(step)) > 0
