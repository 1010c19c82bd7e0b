"""No numpy floating-point warning from any Triton route (under the interpreter, numpy computes
every kernel op): an output skipped by a -1 slot used to divide 0 by 0 and print "invalid value
encountered in divide" on every call. Here any such warning, or numpy error state, is an error."""

import os
import warnings

import numpy as np
import pytest
import torch

from ascend_kvc import ASCEND_STAGES, api
from ascend_kvc.stages.work_split import plan_split

from cases import general_case, run_and_check

TRITON_ROUTES = [f"ascend:{stage}" for stage in ASCEND_STAGES] + ["gpgpu"]
pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                reason="only Triton's interpreter computes the kernels with numpy")


def _quiet_case():
    """Two written outputs, one skipped (slot -1), one past the last slot (skipped by the kernel)."""
    w = general_case(128, 8, seed=41, num_reqs=1, outputs_per_req=4)
    b = w.boundary_token_indices
    assert int(w.kv_slot_mapping[b[1]]) == -1
    w.kv_slot_mapping[b[2]] = w.kv_cache.shape[0] * 64
    return w


def _run_quietly(w, route):
    with warnings.catch_warnings(), np.errstate(divide="raise", over="raise", invalid="raise"):
        warnings.simplefilter("error")  # also overrides pyproject's filter for the divide warning
        report = run_and_check(w, route, validate=False)
    assert report.num_outputs_written == 2


@pytest.mark.parametrize("route", TRITON_ROUTES)
def test_triton_route_is_quiet_with_skipped_outputs(route):
    _run_quietly(_quiet_case(), route)


@pytest.mark.parametrize("route", ["ascend", "ascend:fused"])
def test_split_windows_are_quiet_with_skipped_outputs(route, monkeypatch):
    """The same outputs with each window split over 8 cores: a skipped output's pieces hold no
    rows, and neither the piece gather nor the merge may divide 0 by 0 over them."""
    monkeypatch.setenv("ASCEND_KVC_VECTOR_CORES", "8")
    api.clear_launch_plans()
    try:
        assert plan_split(4, 128, 8).split
        _run_quietly(_quiet_case(), route)
    finally:
        api.clear_launch_plans()
