"""Device time per call (bench.launches.count_device_kernels): the profiler paths without a device.

The CUDA path runs here against a stand-in for ``torch.profiler.profile``; the real profiler on a
GPU is exercised by the ``cuda`` test at the end (and by test_bench_report's small run there).
The NPU path's trace parsing runs on CSV files written as CANN's profiling guide lays them out;
``torch_npu.profiler`` itself has never run here (no NPU was available).
"""

import warnings

import pytest
import torch
from torch.autograd import DeviceType

from bench import launches
from bench.launches import count_device_kernels, device_event_us, npu_trace_totals


class _Range:
    def __init__(self, us):
        self.us = us

    def elapsed_us(self):
        return self.us


class EventNewTorch:
    """A device event as torch >= 2.4 (2.11, 2.14) gives it: device_time_total, cuda_time_total deprecated."""

    def __init__(self, name, us, device_type=DeviceType.CUDA, is_user_annotation=False):
        self.name, self.us, self.device_type, self.is_user_annotation = name, us, device_type, is_user_annotation
        self.time_range = _Range(us)

    @property
    def device_time_total(self):
        return self.us

    @property
    def cuda_time_total(self):
        raise AssertionError("the deprecated name was read")


class EventOldTorch:
    """Before torch 2.4: only cuda_time_total."""

    def __init__(self, us):
        self.us = us

    @property
    def cuda_time_total(self):
        return self.us


class EventRangeOnly:
    def __init__(self, us):
        self.time_range = _Range(us)


def test_device_event_us_reads_each_torch_generation():
    assert device_event_us(EventNewTorch("k", 7.5)) == 7.5
    assert device_event_us(EventOldTorch(4.0)) == 4.0
    assert device_event_us(EventRangeOnly(3.0)) == 3.0
    zero = EventNewTorch("k", 0.0)
    zero.time_range = _Range(2.0)  # a property that answers 0 (no use_device): the event's own range
    assert device_event_us(zero) == 2.0


def test_device_event_us_on_this_torchs_own_event_class_warns_nothing():
    from torch.autograd.profiler_util import FunctionEvent

    try:
        event = FunctionEvent(id=0, name="kernel", thread=0, start_us=100, end_us=112.5, use_device="cuda",
                              device_type=DeviceType.CUDA)
    except TypeError as exc:  # another torch's constructor: the stand-ins above still hold
        pytest.skip(f"FunctionEvent takes other arguments in torch {torch.__version__}: {exc}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # cuda_time_total's FutureWarning would fail here
        assert device_event_us(event) == pytest.approx(12.5)


class FakeProfile:
    """Stands in for torch.profiler.profile: each session returns the next list of events."""

    sessions: list = []
    log: list = []

    def __init__(self, activities=None, **kwargs):
        self.activities = activities

    def __enter__(self):
        FakeProfile.log.append("profile")
        return self

    def __exit__(self, *exc):
        return False

    def events(self):
        return FakeProfile.sessions.pop(0)


def _session(kernel_us):
    return [EventNewTorch("triton_kernel", kernel_us), EventNewTorch("Memset (Device)", 2.0),
            EventNewTorch("aten::empty", 50.0, device_type=DeviceType.CPU),
            EventNewTorch("my_range", 100.0, is_user_annotation=True)]


def test_cuda_path_sums_device_activities_per_call(monkeypatch):
    FakeProfile.sessions = [_session(10.0), _session(40.0), _session(20.0)]
    FakeProfile.log = []
    monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)

    got = count_device_kernels(lambda: FakeProfile.log.append("call"), "cuda",
                               flush=lambda: FakeProfile.log.append("flush"))
    # one profiler session per call, each after its own flush, the call inside it
    assert FakeProfile.log == ["flush", "profile", "call"] * 3
    # a kernel and a memset per call; the CPU op and the user annotation's GPU span are no activities
    assert got["kernels"] == 2 and got["copies"] == 1
    assert got["device_ms"] == pytest.approx(0.022)  # per call 12, 42, 22 µs: the median
    assert "torch.profiler" in got["device_how"] and "median of 3 calls" in got["device_how"]


def test_warmup_runs_one_untimed_call_before_the_profiled_ones(monkeypatch):
    """A caller that has not run the call before (the bench's kernel-count passes) asks for one
    untimed call first, so that a plan or scratch made by it is not in the count."""
    FakeProfile.sessions = [_session(10.0), _session(40.0), _session(20.0)]
    FakeProfile.log = []
    monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: FakeProfile.log.append("sync"))

    got = count_device_kernels(lambda: FakeProfile.log.append("call"), "cuda",
                               flush=lambda: FakeProfile.log.append("flush"), warmup=True)
    assert FakeProfile.log[:2] == ["call", "sync"]
    assert [e for e in FakeProfile.log[2:] if e != "sync"] == ["flush", "profile", "call"] * 3
    assert got["kernels"] == 2


def test_a_failing_profiler_gives_no_number(monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("CUPTI unavailable")

    monkeypatch.setattr(torch.profiler, "profile", broken)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    got = count_device_kernels(lambda: None, "cuda", flush=lambda: None)
    assert got["kernels"] is None and got["device_ms"] is None
    assert got["device_how"].startswith("profiler failed: RuntimeError: CUPTI unavailable")


def test_cpu_has_no_device_time():
    got = count_device_kernels(lambda: None, "cpu")
    assert got["kernels"] is None and got["device_ms"] is None and got["device_how"].startswith("n/a")


def test_npu_trace_totals_from_op_statistic_then_kernel_details(tmp_path):
    deep = tmp_path / "host_123_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    deep.mkdir(parents=True)
    (deep / "op_statistic.csv").write_text(
        "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)\n"
        "0,_fused_compress_kernel,AI_VECTOR_CORE,1,80.5,80.5,80.5,80.5,90\n"
        "0,MemSet,AI_VECTOR_CORE,2,9.5,4,4.75,5.5,10\n")
    got = npu_trace_totals(str(tmp_path))
    assert (got.kernels, got.copies, got.device_us) == (3, 2, pytest.approx(90.0))

    (deep / "op_statistic.csv").unlink()
    (deep / "kernel_details.csv").write_text(
        "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us)\n"
        "1,_block_gather_softmax_kernel,KERNEL_AIVEC,AI_VECTOR_CORE,10,40.0,0\n"
        "1,_byte_scatter_kernel,KERNEL_AIVEC,AI_VECTOR_CORE,60,5.25,10\n")
    got = npu_trace_totals(str(tmp_path))
    assert (got.kernels, got.copies, got.device_us) == (2, None, pytest.approx(45.25))

    (deep / "kernel_details.csv").unlink()
    with pytest.raises(RuntimeError, match="no op_statistic.csv"):
        npu_trace_totals(str(tmp_path))


def test_npu_trace_without_durations_counts_but_does_not_time(tmp_path):
    (tmp_path / "op_statistic.csv").write_text("OP Type,Count\nAdd,3\n")
    got = npu_trace_totals(str(tmp_path))
    assert got.kernels == 3 and got.device_us is None


@pytest.mark.cuda
def test_real_cuda_profiler_times_a_kernel():
    x = torch.zeros(64 * 2**20 // 4, device="cuda")

    def call():
        x.add_(1.0)

    call()
    got = count_device_kernels(call, "cuda")
    print(torch.__version__, got)
    assert got["kernels"] == 1 and got["copies"] == 0
    # 128 MiB read and written from a flushed L2: tens of µs at ~4 TB/s, never faster than 10 TB/s
    assert 2 * x.numel() * 4 / 10e12 * 1e3 < got["device_ms"] < 5.0
    assert f"{launches.FLUSH_BYTES // 2**20} MiB L2 flush" in got["device_how"]


def test_host_samples_synchronise_once_queued_and_before_every_call_idle():
    """The host-time sampler behind ``bench.versus`` and the report: queued calls are not waited
    on; idle ones each start on a drained device; warm-up calls are not timed."""
    from bench.launches import host_samples, host_us_per_call

    events = []
    call = lambda: events.append("call")  # noqa: E731
    sync = lambda: events.append("sync")  # noqa: E731
    samples = host_samples(call, sync, calls=3, warmup=2)
    assert len(samples) == 3 and all(s >= 0 for s in samples)
    assert events == ["call", "call", "sync", "call", "call", "call", "sync"]
    events.clear()
    host_samples(call, sync, calls=3, idle=True)
    assert events == ["sync"] + ["sync", "call"] * 3 + ["sync"]
    events.clear()
    assert host_us_per_call(call, sync, calls=5) >= 0
    assert events.count("call") == 5 and events.count("sync") == 2
