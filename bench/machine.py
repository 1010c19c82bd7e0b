"""Device detection, the machine line, and the device's measured memory bandwidth."""

from __future__ import annotations

import importlib.util
import os
import platform
import subprocess
import time
from pathlib import Path

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
    """The checkout's commit; ``ASCEND_KVC_COMMIT`` names it where the tree travelled without .git."""
    if os.environ.get("ASCEND_KVC_COMMIT"):
        return os.environ["ASCEND_KVC_COMMIT"]
    try:
        root = Path(__file__).resolve().parent.parent
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return (out.stdout.strip() or "unknown") + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


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
        spec = importlib.util.find_spec("triton")
        info["triton"] += " (triton-ascend)" if spec and "ascend" in str(spec.origin) else ""
    else:
        info["name"] = platform.processor() or platform.machine()
        info["note"] = "CPU: Triton routes run under TRITON_INTERPRET=1; times say nothing about a GPU or NPU"
    return info


def machine_line(info: dict) -> str:
    keys = ["name", "device", "driver", "cuda", "cann", "torch", "triton", "ascend_kvc", "commit", "date"]
    return " | ".join(f"{k} {info[k]}" for k in keys if k in info)


def measure_bandwidth(device: str, time_fn) -> dict:
    """Read bandwidth (a 1 GiB sum) and copy bandwidth (bytes read + written), in GB/s."""
    if device == "cpu":
        n = 64 * 2**20 // 4
    else:
        n = 2**30 // 4
    x = torch.randn(n, device=device)
    y = torch.empty_like(x)
    nbytes = x.numel() * 4
    read_ms = time_fn(lambda: x.sum())["ms"]
    copy_ms = time_fn(lambda: y.copy_(x))["ms"]
    del x, y
    return {"read_gbs": nbytes / read_ms / 1e6, "copy_gbs": 2 * nbytes / copy_ms / 1e6}
