"""The reference route against the float64 oracle, over the axes the contract and real engines vary."""

import pytest
import torch

from ascend_kvc import c128_256_512_compress
from ascend_kvc.oracle import check_cache
from ascend_kvc.workloads import SMALL_CASES, make_workload

from cases import general_case, run_and_check


@pytest.mark.parametrize("C", [128, 256, 512])
@pytest.mark.parametrize("block_size", [1, 3, 8, 16, 64])
def test_reference_general(C, block_size):
    report = run_and_check(general_case(C, block_size, seed=C + block_size), "reference")
    assert report.num_outputs_written >= 4


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("inplace", [True, False])
def test_reference_index_dtypes_and_out(index_dtype, inplace):
    run_and_check(general_case(128, 8, seed=7, index_dtype=index_dtype), "reference", inplace=inplace)


@pytest.mark.parametrize("case", SMALL_CASES)
def test_reference_official_shape(case):
    w = make_workload(*case, shuffle=True, nonzero_cache=True, seed=3)
    report = run_and_check(w, "reference")
    assert report.num_outputs_written == w.total_tokens // w.compress_ratio


def test_reference_strided_state_view():
    w = general_case(256, 8, seed=11)
    wide = torch.randn(w.state_cache.shape[0], w.block_size, 2048)
    wide[:, :, 512:1536] = w.state_cache
    w.state_cache = wide[:, :, 512:1536]  # rows 8 KiB apart, not contiguous
    assert not w.state_cache.is_contiguous()
    run_and_check(w, "reference")


def test_reference_peaky_scores_and_tiny_values():
    w = general_case(512, 8, seed=5, score_scale=40.0, value_scale=1e-6)
    report = run_and_check(w, "reference")
    assert report.num_outputs_written > 0


def test_reference_zero_outputs_returns_zeros_or_out_unchanged():
    w = general_case(128, 8, seed=2)
    w.boundary_token_indices = w.boundary_token_indices[:0]
    fresh = c128_256_512_compress(*w.args())
    assert torch.count_nonzero(fresh) == 0
    out = w.kv_cache.clone()
    assert torch.equal(c128_256_512_compress(*w.args(), out=out), w.kv_cache)


def test_reference_skips_negative_slots_only():
    w = general_case(128, 8, seed=9)
    w.kv_slot_mapping[w.boundary_token_indices] = -1
    out = w.kv_cache.clone()
    c128_256_512_compress(*w.args(), out=out)
    assert torch.equal(out, w.kv_cache)


def test_oracle_catches_a_one_bit_error():
    w = general_case(128, 8, seed=4)
    before = w.kv_cache.clone()
    got = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route="reference")
    args = w.checked_args()
    assert check_cache(args, got, before).ok
    slot = int(w.kv_slot_mapping[w.boundary_token_indices[0]])
    page, o = divmod(slot, 64)
    for col in (o * 576 + 3, o * 576 + 500, 36864 + o * 8 + 2, 36864 + o * 8 + 7):
        bad = got.clone()
        bad[page, col] ^= 0x10
        report = check_cache(args, bad, before)
        assert not report.ok and "output 0" in report.first_mismatch, report
    written = set(w.kv_slot_mapping[w.boundary_token_indices].tolist())
    free = next(s for s in range(got.shape[0] * 64) if s not in written)
    untouched = got.clone()
    untouched[free // 64, 36864 + (free % 64) * 8 + 7] ^= 1  # a pad byte of a slot nobody writes
    report = check_cache(args, untouched, before)
    assert not report.ok and "not a written slot" in report.first_mismatch, report


def test_oracle_demands_exact_bytes_where_unambiguous():
    from ascend_kvc.oracle import compute_truth

    w = general_case(256, 8, seed=8)
    args = w.checked_args()
    truth = compute_truth(args)
    before = w.kv_cache.clone()
    got = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route="reference")
    page, o = divmod(int(truth.slots[0]), 64)
    exact_q = (truth.z_lo[0] == truth.z_hi[0]).nonzero().squeeze(1)
    exact_rope = (truth.rope_lo[0] == truth.rope_hi[0]).nonzero().squeeze(1)
    assert len(exact_q) > 400 and len(exact_rope) > 50
    for col in (o * 576 + int(exact_q[0]), o * 576 + 448 + 2 * int(exact_rope[0])):
        bad = got.clone()
        bad[page, col] ^= 1  # one int8 step / one bf16 ulp
        report = check_cache(args, bad, before, truth)
        assert not report.ok, report
