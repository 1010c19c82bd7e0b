"""How many programs an Ascend grid gets on an NPU: the vector cores of the tensors' device (not
the current one), within torch-npu's device and stream core limits, unless
``ASCEND_KVC_VECTOR_CORES`` says otherwise. No NPU exists here: ``torch.npu`` is a stand-in."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import torch
import triton

from ascend_kvc import device as device_module
from ascend_kvc.device import (VECTOR_CORES_ENV, ascend_programs, npu_vector_cores, persistent_programs,
                               vector_cores_override)

from npu_standin import FakeNpu, FakeStream


def npu_device(index):
    return SimpleNamespace(type="npu", index=index)


@pytest.fixture
def npu(monkeypatch):
    monkeypatch.delenv(VECTOR_CORES_ENV, raising=False)
    fake = FakeNpu(vector_cores=(40, 48))
    monkeypatch.setattr(torch, "npu", fake, raising=False)
    _forget()
    yield fake
    _forget()


def _forget():
    device_module.compute_units.cache_clear()
    device_module._within_limits.cache_clear()
    device_module._LIMIT_QUERIES_FAILED.clear()


def test_cores_of_the_tensors_device_not_the_current_one(npu):
    assert npu.current == 0
    assert ascend_programs(npu_device(1)) == 48
    assert ascend_programs(npu_device(0)) == 40
    npu.current = 1
    assert ascend_programs(npu_device(None)) == 48  # no index: the current device


def test_without_vector_core_num_the_driver_is_asked_with_that_device_current(npu, monkeypatch):
    """triton-ascend's property describes the current context, whatever index it is given."""
    npu.with_vector_core_num = False
    asked = []

    def driver_properties(index):
        asked.append((index, npu.current))
        return {"num_aicore": npu.cores[npu.current] // 2, "num_vectorcore": npu.cores[npu.current]}

    driver = SimpleNamespace(active=SimpleNamespace(utils=SimpleNamespace(get_device_properties=driver_properties)))
    monkeypatch.setattr(triton.runtime, "driver", driver)
    assert ascend_programs(npu_device(1)) == 48
    assert asked == [(1, 1)] and npu.current == 0


def test_a_stream_limit_caps_the_cores_and_is_read_on_every_call(npu):
    dev = npu_device(0)
    stream = npu.current_stream(0)
    npu.set_stream_limit(stream, vector_num=16)
    assert ascend_programs(dev) == 16
    assert persistent_programs(dev, 1000) == 16
    npu.set_stream_limit(stream, vector_num=24)  # an engine changes it between calls
    assert ascend_programs(dev) == 24
    npu.set_stream(FakeStream(0, 7))  # another stream, no limit
    assert ascend_programs(dev) == 40
    npu.set_stream_limit(npu.current_stream(0), vector_num=64)  # above the device's: the device's
    assert ascend_programs(dev) == 40
    assert ascend_programs(npu_device(1)) == 48  # device 1's stream has no limit


def test_a_device_limit_caps_the_cores(npu):
    npu.device_limits[1] = 20
    assert ascend_programs(npu_device(1)) == 20
    npu.set_stream_limit(npu.current_stream(1), vector_num=12)
    assert ascend_programs(npu_device(1)) == 12
    assert ascend_programs(npu_device(0)) == 40


def test_the_environment_variable_still_overrides(npu, monkeypatch):
    npu.set_stream_limit(npu.current_stream(0), vector_num=16)
    monkeypatch.setenv(VECTOR_CORES_ENV, "7")
    assert ascend_programs(npu_device(0)) == 7


def test_a_torch_npu_without_limits_or_whose_query_fails(npu, monkeypatch):
    npu.get_device_limit = None  # a torch-npu without it
    calls = []

    def failing(stream):
        calls.append(stream)
        raise RuntimeError("aclrtGetStreamResLimit is not in this CANN")

    npu.get_stream_limit = failing
    assert ascend_programs(npu_device(0)) == 40
    assert ascend_programs(npu_device(0)) == 40
    assert len(calls) == 1, "a failing limit query was asked again"


def test_device_properties_are_read_once_per_device(npu):
    for _ in range(5):
        ascend_programs(npu_device(0))
        ascend_programs(npu_device(1))
    assert npu.queries["get_device_properties"] == 2
    assert npu.queries["get_stream_limit"] == 10  # the limits, on every call


def test_repeat_calls_cost_about_a_microsecond_over_torch_npus_own_queries(npu):
    """The host cost the NPU core count adds to what a call already paid before it existed (the
    ``ASCEND_KVC_VECTOR_CORES`` read) and to torch-npu's limit queries (here the stand-in's),
    printed (about 0.7 us on an idle 2-core x86 host). The bound is loose, for a shared machine:
    ``test_device_properties_are_read_once_per_device`` is what catches an uncached query."""
    dev = npu_device(0)
    stream = npu.current_stream(0)
    calls = 20000

    def per_call(fn):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        return (time.perf_counter() - start) / calls

    ascend_programs(dev)
    # Each round times both back to back, so that a busy host (a GPU suite's 12 workers) slows
    # both alike; the least difference of five rounds is the cost.
    ours, added = float("inf"), float("inf")
    for _ in range(5):
        mine = per_call(lambda: ascend_programs(dev))
        theirs = per_call(lambda: (vector_cores_override(), npu.current_stream(0), npu.get_device_limit(0),
                                   npu.get_stream_limit(stream)))
        ours, added = min(ours, mine), min(added, mine - theirs)
    print(f"ascend_programs on an NPU: {ours * 1e6:.2f} us a call, {added * 1e6:.2f} us over the environment "
          "read and the limit queries")
    assert added < 5e-6, f"{added * 1e6:.2f} us a call over the environment read and torch-npu's queries"


def test_npu_vector_cores_is_the_same_answer(npu):
    npu.set_stream_limit(npu.current_stream(1), vector_num=30)
    assert npu_vector_cores(1) == 30 == ascend_programs(npu_device(1))
