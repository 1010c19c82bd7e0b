"""No numpy floating-point warning from any Triton route (under the interpreter, numpy computes
every kernel op): an output skipped by a -1 slot used to divide 0 by 0 and print "invalid value
encountered in divide" on every call. Here any such warning, or numpy error state, is an error."""

import os
import warnings

import numpy as np
import pytest
import torch

from ascend_kvc import ASCEND_STAGES

from cases import general_case, run_and_check

TRITON_ROUTES = [f"ascend:{stage}" for stage in ASCEND_STAGES] + ["gpgpu"]
pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                reason="only Triton's interpreter computes the kernels with numpy")


@pytest.mark.parametrize("route", TRITON_ROUTES)
def test_triton_route_is_quiet_with_skipped_outputs(route):
    # Two written outputs, one skipped (slot -1), one past the last slot (skipped by the kernel).
    w = general_case(128, 8, seed=41, num_reqs=1, outputs_per_req=4)
    b = w.boundary_token_indices
    assert int(w.kv_slot_mapping[b[1]]) == -1
    w.kv_slot_mapping[b[2]] = w.kv_cache.shape[0] * 64
    with warnings.catch_warnings(), np.errstate(divide="raise", over="raise", invalid="raise"):
        warnings.simplefilter("error")  # also overrides pyproject's filter for the divide warning
        report = run_and_check(w, route, validate=False)
    assert report.num_outputs_written == 2
