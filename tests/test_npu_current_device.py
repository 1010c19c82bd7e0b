"""On an NPU, as on CUDA, the Ascend route launches with the tensors' device current.

Triton launches on its backend's current device; tensors on ``npu:1`` while ``npu:0`` is current
must not send the kernels to ``npu:0``. No NPU exists here: a stand-in for ``torch.npu`` has a
current device and a ``device`` context that changes it, and the checks watch which device is
current when the route's work starts.
"""

from types import SimpleNamespace

import pytest
import torch

from ascend_kvc import api, launch, stages
from ascend_kvc.stages import plan as plan_module

from cases import general_case, run_and_check
from npu_standin import FakeNpu


@pytest.fixture
def npu(monkeypatch):
    fake = FakeNpu()  # two stand-in NPUs, npu:0 current
    monkeypatch.setattr(torch, "npu", fake, raising=False)
    return fake


@pytest.mark.parametrize("index", [0, 1])
def test_ladder_runs_with_the_tensors_npu_current(npu, index, monkeypatch):
    seen = []
    monkeypatch.setattr(stages, "_run", lambda args, route_name, out: seen.append(npu.current))
    stages.run(SimpleNamespace(device=SimpleNamespace(type="npu", index=index)), "ascend:fused", None, None)
    assert seen == [index]
    assert npu.current == 0  # the caller's device is current again


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU tensors run under the interpreter only without a GPU")
def test_plan_launches_with_its_npu_current(npu, monkeypatch):
    """A cached plan of the default route, made as for tensors on ``npu:1``: its launches (here
    the interpreter's) start with device 1 current, and the bytes are the oracle's."""
    w = general_case(128, 8, seed=401, num_reqs=2, outputs_per_req=2, device="cpu")
    api._PLANS.clear()
    run_and_check(w, "ascend", validate=False)
    (plan,) = api._PLANS.values()
    plan.npu_index = 1
    seen = []

    def watching_stream_state(device):
        seen.append(npu.current)
        return launch.stream_state(device)

    monkeypatch.setattr(plan_module, "stream_state", watching_stream_state)
    run_and_check(w, "ascend", validate=False)
    assert seen == [1]
    assert npu.current == 0
    api._PLANS.clear()
