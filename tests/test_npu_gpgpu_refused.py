"""Route ``gpgpu`` refuses NPU tensors with the reason, before anything is written.

It is the GPU design (its grid, ``n * splits * 512 / block_d`` programs, can pass triton-ascend's
65535-program limit, and it launches on whichever NPU is current); the Ascend ladder is the NPU
route. No NPU exists here: the operator is given CPU tensors whose checked arguments report an
NPU device, so the refusal is seen where a real call would meet it.
"""

from types import SimpleNamespace

import pytest
import torch

from ascend_kvc import api, c128_256_512_compress, routes
from ascend_kvc.routes import ROUTES, RouteUnavailableError
from ascend_kvc.validation import CompressArgs

from cases import general_case

NPU0 = SimpleNamespace(type="npu", index=0)


def test_gpgpu_on_npu_tensors_is_refused_with_the_reason():
    with pytest.raises(RouteUnavailableError, match=r"route 'gpgpu' does not run on npu tensors: .*65535.*'ascend'"):
        routes.check_can_run(ROUTES["gpgpu"], NPU0)


@pytest.mark.parametrize("route", ["reference", "ascend", "ascend:fused", "ascend:block-d512"])
def test_the_other_routes_are_not_refused_on_npu_tensors(route):
    routes.check_can_run(routes.resolve(route, NPU0), NPU0)


def test_auto_on_npu_tensors_never_picks_gpgpu():
    assert routes.resolve("auto", NPU0).name == "ascend:triton-quant"


@pytest.mark.parametrize("device_type,expected", [("npu", "ascend:triton-quant"), ("cuda", "gpgpu"),
                                                  ("cpu", "reference"), ("xpu", "reference")])
def test_auto_picks_the_route_of_each_device(device_type, expected):
    """'auto' is the Ascend default on an NPU, the GPU design on CUDA, the reference elsewhere."""
    assert routes.resolve("auto", SimpleNamespace(type=device_type, index=0)).name == expected


def test_operator_refuses_before_writing(monkeypatch):
    w = general_case(128, 8, seed=5, num_reqs=1, outputs_per_req=2, device="cpu")
    monkeypatch.setattr(CompressArgs, "device", property(lambda self: NPU0))  # the checked arguments' device
    out = w.kv_cache.clone()
    before = out.clone()
    api._PLANS.clear()
    with pytest.raises(RouteUnavailableError, match="gpgpu"):
        c128_256_512_compress(*w.args(), out=out, route="gpgpu")
    assert torch.equal(out, before)
    assert not api._PLANS
