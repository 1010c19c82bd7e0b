"""SGLang's DeepSeek-V4 compressed-KV cache, written the way docs/SERVING.md passes it.

SGLang (0.5.23) keeps the C = 4 and C = 128 compressors' output in the same 584-byte slot as
vLLM's ``fp8_ds_mla`` (576 payload bytes a slot, then 8 scale bytes a slot, in pages of
``P = 256 // C`` slots), but pads each page's stride up to a multiple of 576 bytes (37440 for
P = 64, 1728 for P = 2). Its metadata gives each token the slot ``raw_out_loc // C`` of the
full-KV slot it writes when its position closes a window, and slot 0 (reserved) otherwise.

Built here from SGLang's own rules (full-KV pages of 256 tokens from page 1 on, the compressed
slot, the padded pages), not from ``ascend_kvc``'s layout module: the written slots are judged by
the float64 oracle, and every byte of the pages' padding and of the reserved slot 0 must keep its
value. The RoPE table's conversion from SGLang's interleaved ``(cos, sin)`` pairs is checked
against the angles it came from.
"""

from __future__ import annotations

import pytest
import torch

from ascend_kvc import compress_step
from ascend_kvc.workloads import StepWorkload, make_workload
from test_step import expected_boundaries, judge

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ROUTES = ["reference", "gpgpu", "ascend:fused"]  # the routes that write fp8_e4m3 into any page width
PAGE_TOKENS = 256  # SGLang's DeepSeek-V4 page size on a GPU
PAYLOAD, SCALES = 576, 8


def sglang_page_stride(P: int) -> int:
    """Bytes from one page to the next: ``P`` slots' 584 bytes, rounded up to a multiple of 576."""
    return -(-P * (PAYLOAD + SCALES) // PAYLOAD) * PAYLOAD


def test_sglang_page_strides():
    assert sglang_page_stride(64) == 37440 and sglang_page_stride(2) == 1728


def sglang_step(C: int, overlap: bool, tokens: int, seed: int):
    """Two requests' first ``tokens`` positions as one step, with SGLang's slots and padded pages.

    Returns ``(step, buffer)``: ``step.kv_cache`` is the ``[pages, P * 584]`` row slice of the
    padded ``buffer`` that SERVING.md passes."""
    w = make_workload(2, 2 * tokens, C, block_size=8, shuffle=True, nonzero_cache=True, seed=seed,
                      kv_format="fp8_e4m3", overlap=overlap, device=DEVICE)
    P = PAGE_TOKENS // C
    g = torch.Generator().manual_seed(seed + 1)
    pos = w.positions.cpu()
    req = w.token_to_req.cpu().long()
    # Each request's full-KV pages: distinct, shuffled, none of them page 0 (its slot 0 is reserved).
    pages_per_req = -(-tokens // PAGE_TOKENS)
    num_pages = 2 * pages_per_req + 2
    page_of = (torch.randperm(num_pages - 1, generator=g)[:2 * pages_per_req] + 1).view(2, pages_per_req)
    raw_out_loc = page_of[req, pos // PAGE_TOKENS] * PAGE_TOKENS + pos % PAGE_TOKENS
    closes = (pos + 1) % C == 0
    out_loc = torch.where(closes, raw_out_loc // C, 0)  # SGLang's metadata: 0 for tokens that close no window
    assert closes.any() and (~closes).any()
    buffer = torch.randint(0, 256, (num_pages, sglang_page_stride(P)), dtype=torch.uint8, generator=g).to(DEVICE)
    pages = buffer[:, :P * (PAYLOAD + SCALES)]
    step = StepWorkload(base=w, token_to_req=w.token_to_req, positions=w.positions,
                        kv_slot_mapping=out_loc.to(DEVICE), kv_cache=pages, name=f"sglang-C{C}")
    return step, buffer


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("C,overlap,tokens", [(4, True, 45), (128, False, 300)], ids=["C4-overlap", "C128"])
def test_sglang_padded_pages_hold_the_oracle_bytes(route, C, overlap, tokens):
    step, buffer = sglang_step(C, overlap, tokens, seed=C)
    P = PAGE_TOKENS // C
    before = buffer.clone()
    compress_step(*step.args(), **step.kwargs(), route=route, validate=True)
    width = P * (PAYLOAD + SCALES)

    report = judge(step, buffer[:, :width], before[:, :width])  # the contract's rule, then the oracle
    assert report.num_outputs_written == len(expected_boundaries(step)) > 0
    assert torch.equal(buffer[:, width:], before[:, width:]), "a byte of a page's padding changed"
    assert torch.equal(buffer[0], before[0]), "the reserved page 0 (slot 0) changed"


def test_sglang_rope_table_converts_to_cos_then_sin():
    """SGLang's table is ``view_as_real(freqs_cis).flatten(-2)``: ``(cos, sin)`` pairs. SERVING.md's
    conversion gives the operator's ``[cos_0 .. cos_31, sin_0 .. sin_31]`` rows."""
    angles = torch.arange(300, dtype=torch.float64)[:, None] * 40000.0 ** (-torch.arange(32) / 32)
    freqs_cis = torch.polar(torch.ones_like(angles), angles).to(torch.complex64)
    interleaved = torch.view_as_real(freqs_cis).flatten(-2)
    cos_sin_cache = torch.cat([interleaved[:, 0::2], interleaved[:, 1::2]], dim=1)
    assert cos_sin_cache.shape == (300, 64)
    assert torch.allclose(cos_sin_cache[:, :32].double(), angles.cos(), atol=1e-6)
    assert torch.allclose(cos_sin_cache[:, 32:].double(), angles.sin(), atol=1e-6)
