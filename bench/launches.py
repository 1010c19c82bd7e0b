"""What one call costs besides memory traffic: device kernels, framework ops and host time.

Three measurements of one call, each taken after the call has passed the byte oracle and run at
least once (so nothing is compiled while it is measured):

* ``count_device_kernels``: device activities of one call from the vendor profiler
  (``torch.profiler`` with CUPTI on CUDA; ``torch_npu.profiler`` on an Ascend NPU, read from its
  ``op_statistic.csv``), and their own durations summed: the call's device time, without the
  gaps between kernels that launch costs leave (what the wall time adds). ``None`` with a
  reason where no profiler is available (CPU: the report says n/a).
* ``count_framework_ops``: PyTorch (aten) operators dispatched by one call, counted with a
  ``TorchDispatchMode``; on CPU also the Triton kernel launches run by the interpreter, whose own
  tensor copies are left out of the aten count.
* ``host_us_per_call``: the median host time of one call over many calls queued without waiting
  for the device (``validate=False``, ``out`` given): what a serving engine's Python pays.
"""

from __future__ import annotations

import collections
import contextlib
import csv
import dataclasses
import glob
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings


# Bytes zeroed before each profiled call so that it starts with a cold L2, as the wall times
# (do_bench) do: Triton's do_bench zeroes 256 MB on CUDA; a 910B's L2 is 192 MB.
FLUSH_BYTES = 256 * 2**20


def count_device_kernels(call, device: str, calls: int | None = None, flush=None, warmup: bool = False) -> dict:
    """What the device ran for one call, from the vendor profiler.

    ``{"kernels": device activities per call, "copies": memcpy/memset per call (included in
    kernels), "how": str, "device_ms": the activities' own durations summed per call (median
    over the calls), "device_how": str}``; every number ``None`` where no profiler is available
    (CPU) or it failed (the reason in ``how`` / ``device_how``).

    Each call is profiled on its own, after ``flush()`` (default: zero ``FLUSH_BYTES`` on the
    device) and a sync outside the profiler, so that its kernels start from a cold L2 as in the
    wall-time measurement and nothing else lands in the trace. ``calls``: 3 on CUDA; 1 on an NPU,
    whose profiler writes and parses a trace on disk for every session. ``warmup``: one untimed
    call and a sync first, so that what the first call on these tensors makes (a launch plan, its
    scratch) is not counted: for a caller that has not run ``call`` before.
    """
    if device == "cuda":
        profile_one = _cuda_profile_one
    elif device == "npu":
        profile_one = _npu_profile_one
    else:
        return {"kernels": None, "copies": None, "how": "no device profiler on CPU", "device_ms": None,
                "device_how": "n/a: no device profiler on CPU"}
    calls = calls or (3 if device == "cuda" else 1)
    if warmup:
        import torch

        call()
        getattr(torch, device).synchronize()
    try:
        if flush is None:
            flush = _l2_flush(device)
        per_call = []
        for _ in range(calls):
            flush()
            per_call.append(profile_one(call))
    except Exception as exc:  # a profiler that fails must not sink the benchmark
        why = f"profiler failed: {type(exc).__name__}: {exc}"[:200]
        return {"kernels": None, "copies": None, "how": why, "device_ms": None, "device_how": why}
    how = per_call[0].how
    copies = [p.copies for p in per_call]
    durations = [p.device_us for p in per_call]
    timed = None not in durations
    return {
        "kernels": sum(p.kernels for p in per_call) / calls,
        "copies": sum(copies) / calls if None not in copies else None,
        "how": f"{how}: kernels + memcpy/memset",
        "device_ms": statistics.median(durations) / 1e3 if timed else None,
        "device_how": (f"{how}: durations of the call's kernels + memcpy/memset summed, median of {calls} "
                       f"call{'s' if calls > 1 else ''}, each after a {FLUSH_BYTES // 2**20} MiB L2 flush"
                       if timed else f"{how}: no durations in the trace"),
    }


@dataclasses.dataclass(frozen=True)
class _Profiled:
    """One profiled call: device activities, of which memcpy/memset (None: unknown), and their
    summed durations in µs (None: the trace has none)."""

    kernels: int
    copies: int | None
    device_us: float | None
    how: str


def _is_copy(name: str) -> bool:
    return name.lower().startswith(("memcpy", "memset"))


def _l2_flush(device: str):
    import torch

    buffer = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device=device)

    def flush():
        buffer.zero_()
        getattr(torch, device).synchronize()

    return flush


def device_event_us(event) -> float:
    """The duration in µs of one device activity of ``torch.profiler``'s ``events()``.

    torch 2.11 and 2.14 (since 2.4) name it ``device_time_total``; ``cuda_time_total`` is its
    deprecated alias (a FutureWarning) and the only name before 2.4. For a device event both
    return the event's own time range, read directly where neither gives a number.
    """
    cls = type(event)
    for name in ("device_time_total", "cuda_time_total"):
        if isinstance(getattr(cls, name, None), property):
            us = getattr(event, name)
            if us:
                return float(us)
            break  # the newer name exists: never touch the deprecated one
    time_range = getattr(event, "time_range", None)
    return float(time_range.elapsed_us()) if time_range is not None else 0.0


def _cuda_profile_one(call) -> _Profiled:
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with warnings.catch_warnings():
        # torch 2.11 warns once that a session keeps only its own events: one session per call is the point
        warnings.filterwarnings("ignore", message=".*[Pp]rofiler clears events")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
    # device activities only: kernels, memcpy, memset (not the GPU spans of record_function ranges)
    events = [e for e in prof.events()
              if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False)]
    return _Profiled(len(events), sum(_is_copy(e.name) for e in events), sum(map(device_event_us, events)),
                     "torch.profiler (CUPTI)")


def npu_profiler(out_dir: str):
    """A ``torch_npu.profiler.profile`` of NPU activities for one step, its trace written into ``out_dir``.

    The schedule is explicit (one active step, recorded and saved once): without one, torch-npu's
    default always records and warns at every profiled call. Level1, not the default Level0: at
    Level0 the trace has no ``op_statistic.csv``, whose per-op-type counts give the memcpy/memset
    ("copies") column. The caller runs the step, then calls ``step()`` on the returned profiler.
    """
    import torch_npu

    npu_prof = torch_npu.profiler
    return npu_prof.profile(
        activities=[npu_prof.ProfilerActivity.NPU],
        schedule=npu_prof.schedule(wait=0, warmup=0, active=1, repeat=1),
        on_trace_ready=npu_prof.tensorboard_trace_handler(out_dir),
        experimental_config=npu_prof._ExperimentalConfig(profiler_level=npu_prof.ProfilerLevel.Level1),
    )


def _npu_profile_one(call) -> _Profiled:
    # torch_npu's profiler writes its results to disk and parses them when the context exits.
    # Not run where this code was written: no NPU was available.
    import torch

    out_dir = tempfile.mkdtemp(prefix="ascend_kvc_prof_")
    try:
        torch.npu.synchronize()
        with npu_profiler(out_dir) as prof:
            call()
            torch.npu.synchronize()
            prof.step()
        return npu_trace_totals(out_dir)
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def _number(row: dict, column: str) -> float | None:
    value = (row.get(column) or "").strip()
    try:
        return float(value)
    except ValueError:
        return None


def npu_trace_totals(out_dir: str) -> _Profiled:
    """Device ops and their time from a torch_npu profiler folder: ``op_statistic.csv`` (one row
    per op type: "OP Type", "Count", "Total Time(us)"), else ``kernel_details.csv`` (one row
    per kernel: "Name", "Duration(us)"), as CANN's profiling guide names the columns."""
    stats = glob.glob(os.path.join(out_dir, "**", "op_statistic.csv"), recursive=True)
    if stats:
        with open(stats[0], newline="") as f:
            rows = list(csv.DictReader(f))
        counts = [int(_number(r, "Count") or 0) for r in rows]
        times = [_number(r, "Total Time(us)") for r in rows]
        return _Profiled(sum(counts), sum(c for c, r in zip(counts, rows) if _is_copy(r.get("OP Type", ""))),
                         sum(times) if rows and None not in times else None,
                         "torch_npu.profiler op_statistic.csv")
    details = glob.glob(os.path.join(out_dir, "**", "kernel_details.csv"), recursive=True)
    if details:
        with open(details[0], newline="") as f:
            rows = list(csv.DictReader(f))
        times = [_number(r, "Duration(us)") for r in rows]
        return _Profiled(len(rows), None, sum(times) if rows and None not in times else None,
                         "torch_npu.profiler kernel_details.csv")
    raise RuntimeError(f"no op_statistic.csv or kernel_details.csv under {out_dir}")


def _interpreter_running() -> bool:
    """True when the current aten op comes from Triton's CPU interpreter (its argument copies)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.endswith(os.path.join("runtime", "interpreter.py")):
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def _count_interpreted_launches(counter: collections.Counter):
    """Count Triton kernel launches run by the CPU interpreter (its ``GridExecutor`` calls)."""
    try:
        from triton.runtime import interpreter
        executor = interpreter.GridExecutor
    except (ImportError, AttributeError):
        counter["triton_launches"] = -1  # unknown on this Triton
        yield
        return
    original = executor.__call__

    def counted(self, *args, **kwargs):
        counter["triton_launches"] += 1
        return original(self, *args, **kwargs)

    executor.__call__ = counted
    try:
        yield
    finally:
        executor.__call__ = original


def count_framework_ops(call, device: str) -> dict:
    """``{"aten_ops": per call, "triton_launches": per call or None}`` for one call."""
    from torch.utils._python_dispatch import TorchDispatchMode

    counter: collections.Counter = collections.Counter()
    interpreted = device == "cpu"

    class _AtenCounter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if not (interpreted and _interpreter_running()):
                counter["aten_ops"] += 1
            return func(*args, **(kwargs or {}))

    launches = _count_interpreted_launches(counter) if interpreted else contextlib.nullcontext()
    with launches, _AtenCounter():
        call()
    triton_launches = counter["triton_launches"] if interpreted and counter["triton_launches"] >= 0 else None
    return {"aten_ops": counter["aten_ops"], "triton_launches": triton_launches}


def host_samples(call, synchronize, calls: int = 200, warmup: int = 0, idle: bool = False) -> list[float]:
    """Host microseconds of each of ``calls`` calls, after ``warmup`` untimed ones.

    Queued (``idle=False``): the calls follow one another without waiting for the device, as an
    eager serving loop issues them; the device is synchronised once before and once after the
    loop. When the device takes longer than the host, its launch queue fills and the driver then
    holds the host: late calls measure the device, not the host. ``idle=True`` synchronises before
    each timed call, so every sample is the host's own work.
    """
    for _ in range(warmup):
        call()
    synchronize()
    samples = []
    for _ in range(calls):
        if idle:
            synchronize()
        t0 = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t0) * 1e6)
    synchronize()
    return samples


def host_us_per_call(call, synchronize, calls: int = 200) -> float:
    """Median host microseconds of one call, over ``calls`` calls queued without a device sync.

    Calls that need a host sync inside (a data-dependent allocation) pay for it here, as they do
    in a serving engine.
    """
    return statistics.median(host_samples(call, synchronize, calls))
