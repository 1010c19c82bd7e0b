"""``compress_ratio=4``, plain and with the overlapping compressor, on ``ascend:triton-quant`` and
``ascend:fused`` under triton-ascend 3.2.0's own interpreter.

The ``OVERLAP`` specialisation (two written-out passes over a 2C-row window, kv_a/score_a then
kv_b/score_b, rows at negative positions unread) is Triton code an NPU host compiles; here it runs
with that Triton. One small case per route and window, the overlap one split over 8 vector cores
(pieces of 8-row windows, then the merge), judged by the float64 oracle; the outputs at p = 3
have their older half masked.
"""

from __future__ import annotations

import pytest

from ascend_kvc import c128_256_512_compress
from ascend_kvc.api import clear_launch_plans
from ascend_kvc.oracle import check_cache
from ascend_kvc.workloads import make_workload


@pytest.mark.parametrize("route", ["ascend:triton-quant", "ascend:fused"])
@pytest.mark.parametrize("overlap,cores", [(False, 1), (True, 8)], ids=["ratio4-unsplit", "overlap-split"])
def test_ratio_4_matches_the_truth(route, overlap, cores, monkeypatch):
    monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", str(cores))
    clear_launch_plans()
    w = make_workload(2, 16, 4, block_size=8, shuffle=True, nonzero_cache=True, seed=41 + cores, overlap=overlap)
    before = w.kv_cache.clone()
    got = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route=route, **w.format_kwargs())
    report = check_cache(w.checked_args(), got, before)
    assert report.ok, f"{route}, overlap={overlap}, cores={cores}: {report}"
    assert report.num_outputs_written == w.num_outputs == 4
