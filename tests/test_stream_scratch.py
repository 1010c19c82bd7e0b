"""Scratch of the planned routes: one buffer per stream, and a fresh one for a call captured into a
graph, on CUDA and on an NPU (torch-npu's NPU graphs, aclgraph).

A captured call must not use the per-stream buffer: a later eager call that needs more scratch
replaces that buffer and frees the old one, which the graph would still write on every replay.
No NPU exists here: the NPU side is checked with a stand-in for ``torch.npu`` that has what
``stream_state`` reads (the current stream's device and id, and the capture test), and a raw
handle that fails the test when read. On a GPU the last test captures a real CUDA graph: with the
capture ignored, its replay wrote into the tensor that took the freed buffer (H200, both routes).
"""

from types import SimpleNamespace

import pytest
import torch

from ascend_kvc import api, c128_256_512_compress, launch
from ascend_kvc.oracle import check_cache
from ascend_kvc.stages import plan as plan_module
from ascend_kvc.workloads import make_workload

from cases import general_case, run_and_check


class _FakeNpuStream:
    def __init__(self, stream_id):
        self.device_index = 0
        self.stream_id = stream_id

    @property
    def npu_stream(self):
        pytest.fail("stream_state read the raw NPU stream handle")


def _fake_npu(monkeypatch, with_capture=True):
    state = SimpleNamespace(stream=_FakeNpuStream(1), capturing=False)
    npu = SimpleNamespace(current_stream=lambda device=None: state.stream)
    if with_capture:
        npu.is_current_stream_capturing = lambda: state.capturing
    monkeypatch.setattr(torch, "npu", npu, raising=False)
    return state


def test_npu_stream_state_names_the_stream_and_sees_a_capture(monkeypatch):
    state = _fake_npu(monkeypatch)
    npu0 = SimpleNamespace(type="npu", index=0)
    raw, first, capturing = launch.stream_state(npu0)
    assert raw == 0 and capturing is False
    state.stream = _FakeNpuStream(2)
    _, second, _ = launch.stream_state(npu0)
    assert second != first, "two NPU streams got one scratch key"
    state.capturing = True
    assert launch.stream_state(npu0)[2] is True


def test_a_torch_npu_without_graph_capture_is_never_capturing(monkeypatch):
    _fake_npu(monkeypatch, with_capture=False)
    assert launch.stream_state(SimpleNamespace(type="npu", index=0))[2] is False


def test_scratch_is_per_stream_and_fresh_while_capturing():
    cpu = torch.device("cpu")
    launch._SCRATCH.pop((cpu, "stream-a"), None)
    launch._SCRATCH.pop((cpu, "stream-b"), None)
    a = launch.stream_scratch(cpu, "stream-a", 64, 0, capturing=False)[0]
    assert launch.stream_scratch(cpu, "stream-a", 64, 0, capturing=False)[0] is a
    assert launch.stream_scratch(cpu, "stream-b", 64, 0, capturing=False)[0] is not a
    captured = [launch.stream_scratch(cpu, "stream-a", 64, 0, capturing=True)[0] for _ in range(2)]
    assert all(c is not a for c in captured) and captured[0] is not captured[1]
    assert launch._SCRATCH[(cpu, "stream-a")][0] is a  # the stream's own buffer is left as it was


def test_captured_counters_are_slices_of_an_arena_zeroed_outside_the_capture():
    """A captured call's counters are zero without a fill inside the capture: a slice of the arena
    an earlier call outside any capture zeroed, never shared with another captured call nor with
    the stream's own counters. With no arena yet, or too little room left in it, the captured call
    gets a zeros() (which its graph replays); when a capture leaves too little room, the next call
    outside a capture makes a new arena."""
    dev = torch.device("cpu")
    launch._ARENAS.pop(dev, None)
    launch._SCRATCH.pop((dev, "stream-c"), None)
    first = launch.stream_scratch(dev, "stream-c", 8, 40, capturing=True)[1]
    assert first.numel() == 40 and not first.any() and dev not in launch._ARENAS
    own = launch.stream_scratch(dev, "stream-c", 8, 40, capturing=False)[1]
    arena = launch._ARENAS[dev][0]
    taken = [launch.stream_scratch(dev, "stream-c", 8, 40, capturing=True)[1] for _ in range(3)]
    spans = sorted((t.data_ptr(), t.data_ptr() + 4 * t.numel()) for t in taken)
    assert all(t.numel() == 40 and not t.any() for t in taken)
    assert all(arena.data_ptr() <= lo and hi <= arena.data_ptr() + 4 * arena.numel() for lo, hi in spans)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "two captured calls share counters"
    assert all(lo % 16 == 0 for lo, _ in spans)  # Triton's 16-byte pointer specialisation holds
    assert not (arena.data_ptr() <= own.data_ptr() < arena.data_ptr() + 4 * arena.numel())
    # a capture that leaves less than one call's counters: the stream's next call (whose own
    # scratch is big enough) makes a new arena
    launch.stream_scratch(dev, "stream-c", 8, arena.numel() - 3 * 64 - 20, capturing=True)
    launch.stream_scratch(dev, "stream-c", 8, 40, capturing=False)
    assert launch._ARENAS[dev][0] is not arena and any(a is arena for a in launch._SPENT_ARENAS)
    arena = launch._ARENAS[dev][0]
    big = arena.numel() + 1  # more than the arena holds
    fresh = launch.stream_scratch(dev, "stream-c", 8, big, capturing=True)[1]
    assert not (arena.data_ptr() <= fresh.data_ptr() < arena.data_ptr() + 4 * arena.numel()) and not fresh.any()
    launch.stream_scratch(dev, "stream-c", 8, big, capturing=False)
    assert launch._ARENAS[dev][0] is not arena and any(a is arena for a in launch._SPENT_ARENAS)
    launch._SCRATCH.pop((dev, "stream-c"), None)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU tensors run under the interpreter only without a GPU")
def test_default_route_takes_fresh_scratch_in_a_capture(monkeypatch):
    """The default route (whose plan has scratch) as an NPU would run it: a call made while its
    stream is captured gets a buffer of its own, and its bytes are still the oracle's."""
    w = general_case(128, 8, seed=307, num_reqs=2, outputs_per_req=2, device="cpu")
    handed = []

    def recording_scratch(*args, **kwargs):
        handed.append(launch.stream_scratch(*args, **kwargs)[0])
        return handed[-1], None

    capture = SimpleNamespace(on=False)
    monkeypatch.setattr(plan_module, "stream_state", lambda device: (0, "npu-stream-7", capture.on))
    monkeypatch.setattr(plan_module, "stream_scratch", recording_scratch)
    launch._SCRATCH.pop((torch.device("cpu"), "npu-stream-7"), None)
    api._PLANS.clear()
    run_and_check(w, "ascend", validate=False)  # eager: the stream's buffer
    capture.on = True
    run_and_check(w, "ascend", validate=False)  # captured
    capture.on = False
    run_and_check(w, "ascend", validate=False)  # eager again
    eager, captured, eager_again = handed
    assert eager_again is eager
    assert captured is not eager, "a captured call used the stream's scratch"
    assert launch._SCRATCH[(torch.device("cpu"), "npu-stream-7")][0] is eager


@pytest.mark.cuda
@pytest.mark.parametrize("route", ["ascend", "ascend:fused"])
def test_graph_keeps_its_scratch_when_an_eager_call_grows_the_streams(route):
    """One stream for eager calls and a capture, as an engine that runs on its own stream has: an
    eager call, the same call captured, then a larger eager call that replaces the stream's buffer.
    The buffer it frees goes to the next tensor of its size; replaying the graph must leave that
    tensor alone and still write the oracle's bytes."""
    small = make_workload(1, 8192, 512, shuffle=True, nonzero_cache=True, seed=17, device="cuda")
    large = make_workload(4, 32768, 512, shuffle=True, nonzero_cache=True, seed=18, device="cuda")
    out_small, out_large = small.kv_cache.clone(), large.kv_cache.clone()
    stream = torch.cuda.Stream()
    key = (torch.device("cuda", torch.cuda.current_device()), stream.cuda_stream)
    api._PLANS.clear()
    with torch.cuda.stream(stream):
        c128_256_512_compress(*small.args(), out=out_small, route=route, validate=False)  # compile, plan
        eager_buffer = launch._SCRATCH[key][0]
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            c128_256_512_compress(*small.args(), out=out_small, route=route, validate=False)
        c128_256_512_compress(*large.args(), out=out_large, route=route, validate=False)
        assert launch._SCRATCH[key][0] is not eager_buffer, "the larger call did not need more scratch"
        freed_ptr, size = eager_buffer.data_ptr(), eager_buffer.numel()
        del eager_buffer
        probe = torch.full((size,), 7.0, device="cuda")
        assert probe.data_ptr() == freed_ptr, "the allocator did not hand the freed buffer on"
        small.state_cache.copy_(torch.randn_like(small.state_cache))  # new values in the captured tensors
        start = torch.randint(0, 256, out_small.shape, dtype=torch.uint8, device="cuda")
        out_small.copy_(start)
        graph.replay()
    torch.cuda.synchronize()
    assert bool((probe == 7.0).all()), "the graph wrote into memory its stream's scratch had freed"
    report = check_cache(small.checked_args(), out_small, start)
    assert report.ok, str(report)
    report = check_cache(large.checked_args(), out_large, large.kv_cache)
    assert report.ok, str(report)
