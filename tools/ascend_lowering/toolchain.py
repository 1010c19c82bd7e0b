"""Both steps of triton-ascend's tool chain for one kernel specialisation (runs in a worker process).

1. triton-ascend's front end: Triton IR, then ``triton-adapter-opt`` (Triton IR -> Linalg). It
   leaves the Linalg module (``*.ttadapter``) in the Triton cache and then fails to produce a binary
   (no CANN here); a missing ``.ttadapter`` is a front-end failure.
2. ``bishengir-compile`` (PyPI's ``ascendnpu-ir``) on that module with the flags triton-ascend passes
   for an A2/A3 chip: HFusion -> HIVM, unified-buffer planning (PlanMemory), sync insertion,
   multi-buffering. Only CANN's external ``hivmc`` code generator is missing, so a kernel that
   compiles prints ``External hivmc run fails, returning module before running external compiler``;
   anything else (``ub overflow, requires ... bits``) is a failure with the compiler's message.

``--enable-memory-display`` makes the compiler write its plan (``memory_info_*.json``: per buffer
the byte offsets and the extent in bits); the planned unified-buffer bits are the highest
``offset * 8 + extent`` of the ``ub`` scope.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import time
from pathlib import Path

TARGET_ARCH = "Ascend910B3"
UB_BITS_910B = 192 * 1024 * 8  # what the compiler reports as available on an Ascend910B3 vector core
REACHED_CODEGEN = "External hivmc run fails, returning module before running external compiler"
CODEGEN = "reached code generation"
UB_OVERFLOW = "ub overflow"
ERROR = "error"
NOT_RUN = "not run"

_FLOAT_ARGS = {"eps": "fp32"}
# Unit strides the JIT specialises as constants at run time for contiguous tensors.
_UNIT_STRIDES = {"state_s2": 1, "bt_s1": 1}
_OVERFLOW = re.compile(r"ub overflow, requires (\d+) bits while (\d+) bits available!?")


def compiler_flags() -> list[str]:
    """What ``linalg_to_bin_enable_npu_compile_A2_A3`` passes by default, from triton-ascend's options."""
    from triton.backends.ascend.compiler import NPUOptions

    opt = NPUOptions()
    flags = [f"--target={TARGET_ARCH}"]
    if opt.multibuffer is not None:
        flags.append(f"--enable-auto-multi-buffer={str(opt.multibuffer).lower()}")
    if opt.enable_auto_bind_sub_block is not None:
        flags.append(f"--enable-auto-bind-sub-block={str(opt.enable_auto_bind_sub_block).lower()}")
    flags += ["--enable-hfusion-compile=true", "--enable-hivm-compile=true", "--enable-triton-kernel-compile=true"]
    return flags


def signature(fn, constexprs: dict, pointer_types: dict) -> tuple[dict, dict]:
    sig, const = {}, {}
    for name in inspect.signature(fn).parameters:
        if name in constexprs or name in _UNIT_STRIDES:
            sig[name] = "constexpr"
            const[name] = constexprs.get(name, _UNIT_STRIDES.get(name))
        elif name in pointer_types:
            sig[name] = pointer_types[name]
        elif name.endswith("_ptr"):
            sig[name] = "*i64"
        else:
            sig[name] = _FLOAT_ARGS.get(name, "i32")
    return sig, const


def load_kernel(spec: dict):
    return getattr(importlib.import_module(spec["module"]), spec["kernel"])


def front_end(spec: dict, work: Path) -> tuple[str | None, str]:
    """``(linalg text or None, error)``: lower with triton-ascend into ``work/triton-cache``."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fn = load_kernel(spec)
    params = inspect.signature(fn.fn).parameters
    constexprs = {k: v for k, v in spec["constexprs"].items() if k in params}
    sig, const = signature(fn.fn, constexprs, spec["pointer_types"])
    cache = work / "triton-cache"
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    error = ""
    try:
        triton.compile(ASTSource(fn=fn, signature=sig, constants=const), target=GPUTarget("npu", TARGET_ARCH, 0))
    except Exception as exc:  # expected once the front end is done: the binary step needs CANN
        error = f"{type(exc).__name__}: {exc}"
    found = sorted(cache.glob("*/*.ttadapter"))
    if not found:
        return None, error.strip()[:2000] or "no Linalg module produced"
    return found[0].read_text(), ""


def bishengir(linalg: str, work: Path, binary: Path, timeout_s: int = 300) -> dict:
    """Run ``bishengir-compile`` on a Linalg module in ``work``; result, message and planned UB bits."""
    # triton-ascend strips the mix_mode attribute before handing the module over.
    src = work / "kernel.ttadapter.mlir"
    src.write_text(re.sub(r', mix_mode\s*=\s*"[^"]*"', "", linalg))
    for old in work.glob("memory_info_*.json"):
        old.unlink()
    cmd = [str(binary), src.name, *compiler_flags(), "--enable-memory-display", "-o", "kernel"]
    env = dict(os.environ, TMPDIR=str(work))
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout_s)
        output, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired:
        output, rc = f"bishengir-compile ran over {timeout_s} s", -1
    (work / "bishengir.log").write_text(" ".join(cmd) + "\n" + output)
    out = {"compiler": ERROR, "compiler_message": "", "ub_bits": None, "ub_available_bits": None,
           "compiler_s": round(time.perf_counter() - t, 2), "compiler_rc": rc}
    out["ub_bits"] = planned_ub_bits(work)
    out["largest_ub_buffers"] = largest_buffers(work, src.read_text().splitlines())
    m = _OVERFLOW.search(output)
    if REACHED_CODEGEN in output:
        out["compiler"] = CODEGEN
    elif m:
        out["compiler"] = UB_OVERFLOW
        out["compiler_message"] = m.group(0)
        out["ub_bits"], out["ub_available_bits"] = int(m.group(1)), int(m.group(2))
    else:
        out["compiler_message"] = error_lines(output)
    return out


def error_lines(output: str) -> str:
    lines = [ln.split("error: ", 1)[1] for ln in output.splitlines() if "error: " in ln]
    lines = [ln for ln in lines if "Failed to run BiShengHIR pipeline" not in ln] or lines
    return ("; ".join(dict.fromkeys(lines)) or output.strip()[-600:])[:1000]


def _ub_records(work: Path) -> list[dict]:
    """The unified-buffer plan records of ``memory_info_*.json``: the successful one(s), else the last."""
    chosen = []
    for path in sorted(work.glob("memory_info_*.json")):
        try:
            records = json.loads(path.read_text()).get("Record", [])
        except (ValueError, OSError):
            continue
        ub = [r for r in records if r.get("scope") == "ub"]
        chosen += [r for r in ub if r.get("status") == "success"] or ub[-1:]
    return chosen


def planned_ub_bits(work: Path) -> int | None:
    """Highest end (bits) of the unified-buffer plan in ``memory_info_*.json``, or None."""
    ends = [int(offset) * 8 + int(buf.get("extent", 0))
            for r in _ub_records(work) for buf in r.get("memory_info_array", []) for offset in buf.get("offset", [])]
    return max(ends) if ends else None


_SOURCE_LINE = re.compile(r":(\d+):\d+\)\"?\)?$")


def largest_buffers(work: Path, source: list[str], count: int = 3) -> list[str]:
    """The ``count`` largest planned UB buffers: KiB, buffer type and the Linalg op it came from."""
    bufs = {}
    for r in _ub_records(work):
        for buf in r.get("memory_info_array", []):
            kind = buf.get("buffer", "").rsplit(" : ", 1)[-1].replace(", #hivm.address_space<ub>>", ">")
            m = _SOURCE_LINE.search(buf.get("source_location", ""))
            op = source[int(m.group(1)) - 1].strip() if m and 0 < int(m.group(1)) <= len(source) else "?"
            key = (kind, op)
            bufs[key] = max(bufs.get(key, 0), int(buf.get("extent", 0)) * len(buf.get("offset", [])))
    top = sorted(bufs.items(), key=lambda kv: -kv[1])[:count]
    return [f"{bits / 8 / 1024:.0f} KiB {kind} from `{op[:120]}`" for (kind, op), bits in top]
