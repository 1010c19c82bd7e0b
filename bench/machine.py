"""Device detection, the machine line, and the device's measured memory bandwidth."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import subprocess
import time

import torch


def detect_device() -> str:
    """npu -> cuda -> cpu. torch-npu is imported only if installed and only here, on request."""
    if importlib.util.find_spec("torch_npu") is not None:
        import torch_npu  # noqa: F401  (registers torch.npu)

        if torch.npu.is_available():
            return "npu"
    if torch.cuda.is_available():
        return "cuda"
    return "cpu"


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "npu":
        torch.npu.synchronize()


def git_commit() -> str:
    """The checkout's commit (``ascend_kvc.env.git_commit``), ``unknown`` outside one."""
    from ascend_kvc.env import git_commit as checkout_commit

    return checkout_commit() or "unknown"


def machine_info(device: str) -> dict:
    import triton

    import ascend_kvc

    info = {
        "device": device,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "ascend_kvc": ascend_kvc.__version__,
        "commit": git_commit(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info["name"] = props.name
        info["sms"] = props.multi_processor_count
        try:
            drv = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10).stdout.strip()
            info["driver"] = drv.splitlines()[0] if drv else "unknown"
        except (OSError, subprocess.SubprocessError):
            info["driver"] = "unknown"
        info["cuda"] = torch.version.cuda
    elif device == "npu":
        info["name"] = torch.npu.get_device_name(0)
        info["cann"] = os.environ.get("ASCEND_TOOLKIT_HOME", os.environ.get("ASCEND_HOME_PATH", "unknown"))
        import torch_npu

        info["torch_npu"] = torch_npu.__version__
        try:  # triton-ascend installs the package ``triton``: name the distribution that did
            info["triton"] = f"{importlib.metadata.version('triton-ascend')} (triton-ascend)"
        except importlib.metadata.PackageNotFoundError:
            pass
    else:
        info["name"] = platform.processor() or platform.machine()
        info["note"] = "CPU: Triton routes run under TRITON_INTERPRET=1; times say nothing about a GPU or NPU"
    return info


def machine_line(info: dict) -> str:
    keys = ["name", "device", "driver", "cuda", "cann", "torch", "torch_npu", "triton", "ascend_kvc", "commit", "date"]
    return " | ".join(f"{k} {info[k]}" for k in keys if k in info)


def measure_bandwidth(device: str, time_fn) -> dict:
    """Read bandwidth (a float32 ``sum``, 1 GiB on a GPU/NPU) and copy bandwidth (bytes read +
    written), in GB/s, on ``device`` ("cpu", "cuda" or "npu": the tensors are made there)."""
    nbytes = 64 * 2**20 if device == "cpu" else 2**30
    x = torch.randn(nbytes // 4, device=device)
    y = torch.empty_like(x)
    reps = {"reps": 5} if device == "cpu" else {}  # the CPU clock times single calls: take a median
    read_ms = time_fn(lambda: x.sum(), **reps)["ms"]
    copy_ms = time_fn(lambda: y.copy_(x), **reps)["ms"]
    del x, y
    timer = "median of 5 calls" if device == "cpu" else getattr(time_fn, "how", "median")
    return {"read_gbs": nbytes / read_ms / 1e6, "copy_gbs": 2 * nbytes / copy_ms / 1e6,
            "bandwidth_how": f"a {nbytes // 2**20} MiB float32 sum on {device}, {timer}"}
