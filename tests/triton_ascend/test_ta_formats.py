"""``ascend:fused`` writing the fp8_e4m3 and bf16 caches under triton-ascend 3.2.0's own interpreter.

The e4m3 rounding by integer bit operations, the run-time page width and the bf16 rows stored
through an int16 view of the cache pointer are new Triton code for an NPU; here they run with
the Triton an NPU host compiles. One small case per format (unsplit and split over 8 vector
cores), judged by the float64 oracle, and the hand-derived fp8 golden slot byte for byte.
"""

from __future__ import annotations

import pytest
import torch

from ascend_kvc import c128_256_512_compress
from ascend_kvc.api import clear_launch_plans
from ascend_kvc.oracle import check_cache
from ascend_kvc.workloads import make_workload

from test_golden_formats import FP8_GOLDEN_SLOT_BYTES, expected_pages, fp8_inputs


@pytest.mark.parametrize("cores", [1, 8], ids=["unsplit", "split"])
@pytest.mark.parametrize("kv_format,slots_per_page", [("fp8_e4m3", 2), ("bf16", 4)])
def test_fused_format_matches_the_truth(kv_format, slots_per_page, cores, monkeypatch):
    monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", str(cores))
    clear_launch_plans()
    w = make_workload(1, 256, 128, block_size=8, shuffle=True, nonzero_cache=True, seed=31 + cores,
                      kv_format=kv_format, slots_per_page=slots_per_page)
    before = w.kv_cache.clone()
    got = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route="ascend:fused", **w.format_kwargs())
    report = check_cache(w.checked_args(), got, before)
    assert report.ok, f"{kv_format}, cores={cores}: {report}"
    assert report.num_outputs_written == w.num_outputs == 2


def test_fused_fp8_golden_bytes():
    kw = fp8_inputs(3, 255, slots_per_page=2)
    got = c128_256_512_compress(**kw, out=kw["kv_cache"].clone(), route="ascend:fused", kv_format="fp8_e4m3")
    assert torch.equal(got, expected_pages(kw["kv_cache"], FP8_GOLDEN_SLOT_BYTES))
