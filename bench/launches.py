"""What one call costs besides memory traffic: device kernels, framework ops and host time.

Three measurements of one call, each taken after the call has passed the byte oracle and run at
least once (so nothing is compiled while it is measured):

* ``count_device_kernels``: device activities of one call from the vendor profiler
  (``torch.profiler`` with CUPTI on CUDA; ``torch_npu.profiler`` on an Ascend NPU, read from its
  ``op_statistic.csv``). ``None`` with a reason where no profiler is available (CPU).
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
import glob
import os
import shutil
import statistics
import sys
import tempfile
import time


def count_device_kernels(call, device: str, calls: int = 3) -> dict:
    """``{"kernels": per call, "copies": memcpy/memset per call (included in kernels), "how": str}``."""
    if device == "cuda":
        counter = _cuda_device_activities
    elif device == "npu":
        counter = _npu_device_activities
    else:
        return {"kernels": None, "copies": None, "how": "no device profiler on CPU"}
    try:
        kernels, copies, how = counter(call, calls)
    except Exception as exc:  # a profiler that fails must not sink the benchmark
        return {"kernels": None, "copies": None, "how": f"profiler failed: {type(exc).__name__}: {exc}"[:200]}
    return {"kernels": kernels / calls, "copies": copies / calls if copies is not None else None, "how": how}


def _is_copy(name: str) -> bool:
    return name.lower().startswith(("memcpy", "memset"))


def _cuda_device_activities(call, calls: int):
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == DeviceType.CUDA]
    return len(names), sum(_is_copy(n) for n in names), "torch.profiler (CUPTI): kernels + memcpy/memset"


def _npu_device_activities(call, calls: int):
    # torch_npu's profiler writes its results to disk and parses them when the context exits;
    # op_statistic.csv has one row per op type with a "Count" column (kernel_details.csv, one row
    # per kernel, is the fallback). Not run where this code was written: no NPU was available.
    import torch
    import torch_npu

    npu_prof = torch_npu.profiler
    out_dir = tempfile.mkdtemp(prefix="ascend_kvc_prof_")
    try:
        torch.npu.synchronize()
        with npu_prof.profile(activities=[npu_prof.ProfilerActivity.NPU],
                              on_trace_ready=npu_prof.tensorboard_trace_handler(out_dir)):
            for _ in range(calls):
                call()
            torch.npu.synchronize()
        stats = glob.glob(os.path.join(out_dir, "**", "op_statistic.csv"), recursive=True)
        if stats:
            with open(stats[0], newline="") as f:
                rows = list(csv.DictReader(f))
            total = sum(int(float(r["Count"])) for r in rows)
            copies = sum(int(float(r["Count"])) for r in rows if _is_copy(r.get("OP Type", "")))
            return total, copies, "torch_npu.profiler op_statistic.csv: device ops"
        details = glob.glob(os.path.join(out_dir, "**", "kernel_details.csv"), recursive=True)
        if details:
            with open(details[0], newline="") as f:
                rows = list(csv.DictReader(f))
            return len(rows), None, "torch_npu.profiler kernel_details.csv: device kernels"
        raise RuntimeError(f"no op_statistic.csv or kernel_details.csv under {out_dir}")
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


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


def host_us_per_call(call, synchronize, calls: int = 200) -> float:
    """Median host microseconds of one call, over ``calls`` calls queued without a device sync.

    Calls that need a host sync inside (a data-dependent allocation) pay for it here, as they do
    in a serving engine. The device is synchronised once before and once after the loop.
    """
    synchronize()
    samples = []
    for _ in range(calls):
        t0 = time.perf_counter()
        call()
        samples.append(time.perf_counter() - t0)
    synchronize()
    return statistics.median(samples) * 1e6
