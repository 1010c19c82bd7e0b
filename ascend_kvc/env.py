"""Environment report: what this package runs on, for bug reports and benchmark headers.

    python -m ascend_kvc.env                 # text
    python -m ascend_kvc.env --json          # the same, as JSON
    python -m ascend_kvc.env --no-devices    # skip device queries (no CUDA/NPU initialisation)

``collect()`` returns a dict and ``format_report()`` turns it into text; the benchmark reuses
both. Which Triton is installed comes from ``triton_install`` (metadata only, never ``import
triton``).

Every probe is lazy and guarded: a missing package, driver or device is reported as absent, an
unexpected failure as ``error: ...``; the report itself never raises. torch-npu is imported only
when it is installed and device queries were asked for.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from .triton_install import TRITON_ASCEND, active_triton, find_distributions, triton_conflict, triton_distributions

# Variables that change what runs: Ascend runtime and toolkit, Triton (interpreter, caches,
# backends), device visibility, this package.
_ENV_PREFIXES = ("ASCEND_", "TRITON_")
_ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "PYTORCH_NPU_ALLOC_CONF", "TORCH_DEVICE_BACKEND_AUTOLOAD")

_REPO = Path(__file__).resolve().parent.parent
# The Ascend lowering audit's side folder (triton-ascend, ascendnpu-ir), as tools/ uses it.
_SIDE_FOLDER_DEFAULT = _REPO / ".ascend-triton"
_SIDE_FOLDER_TOOLS = (
    ("triton-adapter-opt", "triton/backends/ascend/triton-adapter-opt"),  # Triton IR -> Linalg/HIVM
    ("bishengir-compile", "ascendnpuir/bin/bishengir-compile"),  # from ascendnpu-ir, when installed
)
# Where CANN's toolkit records its version, relative to a toolkit root.
_CANN_INFO_GLOBS = ("ascend_toolkit_install.info", "*/ascend_toolkit_install.info")
_CANN_DEFAULT_ROOTS = (
    "/usr/local/Ascend/ascend-toolkit/latest",
    "/usr/local/Ascend/cann",
    "~/Ascend/ascend-toolkit/latest",
    "~/Ascend/cann",
)


# ---------------------------------------------------------------------------------------------
# Packages, toolchains, CANN


def _version(name: str, path: list[str] | None = None) -> str | None:
    dists = find_distributions((name,), path)
    return dists[0].version if dists else None


def git_commit() -> str | None:
    """The checkout's commit (``+dirty`` with uncommitted changes to tracked files), ``None`` for an
    installed wheel; ``ASCEND_KVC_COMMIT`` names it where the tree travelled without ``.git``."""
    if os.environ.get("ASCEND_KVC_COMMIT"):
        return os.environ["ASCEND_KVC_COMMIT"]
    if not (_REPO / ".git").exists() or not (_REPO / "pyproject.toml").exists():
        return None  # an installed wheel, not a checkout
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=_REPO, capture_output=True,
                              text=True, timeout=5)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=_REPO,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return head.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def _side_folder() -> Path:
    return Path(os.environ.get("ASCEND_TRITON_PATH") or _SIDE_FOLDER_DEFAULT)


def _side_folder_report() -> dict | None:
    side = _side_folder()
    if not side.is_dir():
        return None
    report = {"path": str(side)}
    for name in (TRITON_ASCEND, "ascendnpu-ir"):
        v = _version(name, [str(side)])
        if v:
            report[name] = v
    for tool, relative in _SIDE_FOLDER_TOOLS:
        if (side / relative).is_file():
            report[tool] = str(side / relative)
    return report


def _parse_info(path: Path) -> dict:
    values = {}
    for line in path.read_text(errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def cann_version(roots: list[str] | None = None) -> dict | None:
    """The CANN toolkit's version from its install-info file, searched under ``$ASCEND_HOME_PATH``,
    ``$ASCEND_TOOLKIT_HOME`` and the default install roots; ``None`` when no toolkit is found."""
    if roots is None:
        roots = [os.environ.get(v) for v in ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")]
        roots = [r for r in roots if r] + list(_CANN_DEFAULT_ROOTS)
    for root in roots:
        base = Path(os.path.expanduser(root))
        if not base.is_dir():
            continue
        for pattern in _CANN_INFO_GLOBS:
            for info in sorted(base.glob(pattern)):
                values = _parse_info(info)
                if values.get("version"):
                    return {"version": values["version"], "file": str(info),
                            **({"arch": values["arch"]} if values.get("arch") else {})}
    return None


def _environment_variables() -> dict:
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(_ENV_PREFIXES) or k in _ENV_NAMES}


# ---------------------------------------------------------------------------------------------
# Devices (only when asked: these initialise drivers)


def _guard(fn):
    try:
        return fn()
    except Exception as e:  # a report must not crash on a broken driver or a half-installed stack
        return {"error": f"{type(e).__name__}: {e}"}


def _cuda_devices() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {"available": False}
    devices = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        devices.append({"index": i, "name": props.name, "sms": props.multi_processor_count,
                        "capability": f"{props.major}.{props.minor}",
                        "memory_gib": round(props.total_memory / 2**30, 1)})
    backend = "hip" if getattr(torch.version, "hip", None) else "cuda"
    return {"available": True, "count": len(devices), "runtime": f"{backend} {torch.version.hip or torch.version.cuda}",
            "devices": devices}


def _npu_devices() -> dict:
    if importlib.util.find_spec("torch_npu") is None:
        return {"available": False, "reason": "torch-npu not installed"}
    import torch
    import torch_npu  # noqa: F401  (registers torch.npu)

    if not torch.npu.is_available():
        return {"available": False, "reason": "torch-npu installed, no NPU visible"}
    devices = []
    for i in range(torch.npu.device_count()):
        entry = {"index": i, "name": torch.npu.get_device_name(i)}
        # Vector (AIV) cores: the device's, and what its current stream may use under torch-npu's limits.
        cores = _guard(lambda: _npu_cores(i))
        entry.update(cores)
        devices.append(entry)
    return {"available": True, "count": len(devices), "devices": devices}


def _npu_cores(index: int) -> dict:
    from .device import compute_units, npu_vector_cores

    return {"vector_cores": compute_units("npu", index), "usable_vector_cores": npu_vector_cores(index)}


# ---------------------------------------------------------------------------------------------


def collect(devices: bool = True) -> dict:
    """Everything the report shows, as a JSON-serialisable dict; ``devices=False`` skips driver queries."""
    info: dict = {}
    info["ascend_kvc"] = _guard(lambda: {"version": _package_version(), "commit": git_commit(),
                                        "path": str(Path(__file__).resolve().parent)})
    info["python"] = f"{platform.python_version()} ({platform.python_implementation()}, {platform.machine()})"
    info["platform"] = platform.platform()
    info["torch"] = _guard(_torch_versions)
    dists = _guard(triton_distributions)
    if isinstance(dists, dict):  # an error
        info["triton"] = dists
    else:
        info["triton"] = _guard(lambda: active_triton(dists))
        info["triton_distributions"] = [f"{d.name} {d.version} in {d.location}" for d in dists]
        info["triton_conflict"] = triton_conflict(dists)
    info["torch_npu"] = _guard(lambda: _version("torch-npu"))
    info["triton_ascend"] = _guard(lambda: _version(TRITON_ASCEND))
    info["ascendnpu_ir"] = _guard(lambda: _version("ascendnpu-ir"))
    info["bishengir_compile"] = shutil.which("bishengir-compile")
    info["side_folder"] = _guard(_side_folder_report)
    info["cann"] = _guard(cann_version)
    if devices:
        info["cuda"] = _guard(_cuda_devices)
        info["npu"] = _guard(_npu_devices)
    info["env"] = _environment_variables()
    return info


def _package_version() -> str:
    from . import __version__

    return __version__


def _torch_versions() -> dict:
    import torch

    return {"version": torch.__version__, "cuda": torch.version.cuda, "hip": getattr(torch.version, "hip", None)}


def _fmt(value) -> str:
    if value is None:
        return "not found"
    if isinstance(value, dict):
        if "error" in value:
            return value["error"]
        return ", ".join(f"{k} {_fmt(v)}" for k, v in value.items() if v is not None)
    if isinstance(value, list):
        return "; ".join(_fmt(v) for v in value) or "none"
    return str(value)


def _device_lines(kind: str, report: dict) -> list[str]:
    if "error" in report:
        return [f"{kind:<18} {report['error']}"]
    if not report.get("available"):
        return [f"{kind:<18} none" + (f" ({report['reason']})" if report.get("reason") else "")]
    lines = [f"{kind:<18} {report['count']} device(s)" + (f", {report['runtime']}" if report.get("runtime") else "")]
    for d in report["devices"]:
        rest = ", ".join(f"{k} {v}" for k, v in d.items() if k not in ("index", "name"))
        lines.append(f"  [{d['index']}] {d['name']}" + (f" ({rest})" if rest else ""))
    return lines


def format_report(info: dict) -> str:
    """The report as aligned ``key  value`` lines."""
    pkg = info.get("ascend_kvc", {})
    triton = info.get("triton", {})
    if "error" in triton:
        triton_line = triton["error"]
    elif not triton.get("installed"):
        triton_line = "not installed"
    else:
        triton_line = (f"{triton.get('version', '?')} ({triton.get('kind', triton.get('distribution'))}) "
                       f"at {triton.get('path')}")
    lines = [
        ("ascend_kvc", _fmt(pkg) if "error" in pkg else
         f"{pkg.get('version')}" + (f" (commit {pkg['commit']})" if pkg.get("commit") else "")
         + f" at {pkg.get('path')}"),
        ("python", info.get("python")),
        ("platform", info.get("platform")),
        ("torch", _fmt(info.get("torch"))),
        ("triton", triton_line),
        ("triton packages", _fmt(info.get("triton_distributions"))),
        ("triton conflict", info.get("triton_conflict") or "none"),
        ("torch-npu", _fmt(info.get("torch_npu"))),
        ("triton-ascend", _fmt(info.get("triton_ascend"))),
        ("ascendnpu-ir", _fmt(info.get("ascendnpu_ir"))),
        ("bishengir-compile", _fmt(info.get("bishengir_compile"))),
        ("side folder", _fmt(info.get("side_folder"))),
        ("CANN", _fmt(info.get("cann"))),
    ]
    out = [f"{k:<18} {v}" for k, v in lines]
    if "cuda" in info:
        out += _device_lines("CUDA", info["cuda"])
    if "npu" in info:
        out += _device_lines("NPU", info["npu"])
    env = info.get("env") or {}
    out.append(f"{'environment':<18} " + ("none set" if not env else ""))
    out += [f"  {k}={v}" for k, v in env.items()]
    return "\n".join(line.rstrip() for line in out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ascend_kvc.env", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--no-devices", action="store_true", help="skip CUDA/NPU queries")
    args = parser.parse_args(argv)
    info = collect(devices=not args.no_devices)
    print(json.dumps(info, indent=2) if args.json else format_report(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
