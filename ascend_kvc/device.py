"""Lazy, cached device facts: how many programs a persistent grid should launch."""

from __future__ import annotations

import functools
import os

import torch


@functools.lru_cache(maxsize=None)
def compute_units(device_type: str, index: int) -> int:
    """Compute units of device ``index``: SMs on CUDA, vector cores (AIV) on an NPU (this operator
    uses no cube core; no core limit applied, see ``npu_vector_cores``), 4 on the CPU interpreter."""
    if device_type == "cuda":
        return torch.cuda.get_device_properties(index).multi_processor_count
    if device_type == "npu":
        return _npu_device_vector_cores(index)
    return 4  # the CPU interpreter runs programs one after another; a few exercise the loop


def _npu_device_vector_cores(index: int) -> int:
    """NPU ``index``'s vector cores: torch-npu's per-device property (torch-npu 2.7.1 has
    ``vector_core_num``), else triton-ascend's driver property. The driver reads the *current*
    context, whatever index it is given, so it is asked with ``index`` current."""
    npu = torch.npu
    cores = getattr(npu.get_device_properties(index), "vector_core_num", None)
    if cores:
        return int(cores)
    import triton

    with npu.device(index):
        props = triton.runtime.driver.active.utils.get_device_properties(index)
    # Older drivers name only the AI cores; either way at least one program.
    return int(props.get("num_vectorcore") or props.get("num_aicore") or 1)


# torch-npu's core limits (``torch.npu.set_device_limit``, ``set_stream_limit``), which an engine
# sharing the NPU sets; each query answers ``{"cube_core_num": c, "vector_core_num": v}``. A
# torch-npu or CANN without them is asked once, then never again.
_LIMIT_QUERIES_FAILED: set[str] = set()


def _vector_core_limit(query: str, target) -> int:
    """The vector-core limit ``torch.npu.<query>(target)`` reports, 0 for none (or no such query)."""
    if query in _LIMIT_QUERIES_FAILED:
        return 0
    ask = getattr(torch.npu, query, None)
    try:
        return int(ask(target)["vector_core_num"]) if ask is not None else 0
    except (RuntimeError, AssertionError, KeyError, TypeError, AttributeError):
        _LIMIT_QUERIES_FAILED.add(query)
        return 0


@functools.lru_cache(maxsize=None)
def _within_limits(index: int, device_limit: int, stream_limit: int) -> int:
    cores = compute_units("npu", index)
    for limit in (device_limit, stream_limit):
        if 0 < limit < cores:
            cores = limit
    return cores


def npu_vector_cores(index: int) -> int:
    """Vector cores a kernel queued now on NPU ``index`` may use: the device's, within the limits
    torch-npu sets for the device and for its current stream. The limits are read on every call
    (they may change between calls); the rest is cached per (device, limits)."""
    npu = torch.npu
    return _within_limits(index, _vector_core_limit("get_device_limit", index),
                          _vector_core_limit("get_stream_limit", npu.current_stream(index)))


def _current_index(device_type: str) -> int:
    """The current device of ``device_type`` (a tensor's device always has an index; a bare
    ``torch.device("cuda")`` means the current one)."""
    module = getattr(torch, device_type, None)
    if device_type == "cpu" or not hasattr(module, "current_device"):
        return 0
    return module.current_device()


# Persistent programs per compute unit: one per Ascend vector core (grids above the core count
# run in extra rounds there); several per SM on a GPU, to hide memory latency (4 measured faster
# than 8 for the 512-wide Ascend kernels on an H200, split and unsplit).
_PROGRAMS_PER_UNIT = {"npu": 1, "cuda": 4}

# Sizes every Ascend grid, and the Ascend work split, as for this many vector cores on any device:
# to study on a GPU how a 910B (40 or 48 vector cores) would share the work, or to cap the cores
# used on a shared NPU. Read when a launch is planned (``api.clear_launch_plans()`` after a change).
VECTOR_CORES_ENV = "ASCEND_KVC_VECTOR_CORES"


def vector_cores_override() -> int | None:
    """The core count ``ASCEND_KVC_VECTOR_CORES`` asks for, or ``None`` when it is unset or empty."""
    value = os.environ.get(VECTOR_CORES_ENV, "").strip()
    if not value:
        return None
    try:
        cores = int(value)
    except ValueError:
        cores = 0
    if cores < 1:
        raise ValueError(f"{VECTOR_CORES_ENV} must be a whole number >= 1, got {value!r}")
    return cores


def ascend_programs(device: torch.device) -> int:
    """Programs an Ascend grid may have at most: ``ASCEND_KVC_VECTOR_CORES`` if set, else one per
    vector core of the tensors' NPU that its current stream may use (``npu_vector_cores``),
    ``_PROGRAMS_PER_UNIT`` per SM on CUDA, a few on the CPU interpreter."""
    override = vector_cores_override()
    if override is not None:
        return override
    index = device.index if device.index is not None else _current_index(device.type)
    if device.type == "npu":
        return npu_vector_cores(index)  # one program per vector core (_PROGRAMS_PER_UNIT)
    return compute_units(device.type, index) * _PROGRAMS_PER_UNIT.get(device.type, 1)


# Which rule splits the calls of the default and ``fused`` among vector cores (``work_split``):
# "auto" (unset) splits where whole windows would leave cores idle and, where each program has a
# core to itself, every call whose piece gather reads wider tiles than the unsplit loops; the
# second part was measured on an H200 only. "occupancy" keeps the first part alone, to measure
# both on an NPU. Read when a launch plan is made, as ``ASCEND_KVC_VECTOR_CORES`` is.
SPLIT_RULE_ENV = "ASCEND_KVC_SPLIT"
SPLIT_RULES = ("auto", "occupancy")


def split_rule() -> str:
    """``ASCEND_KVC_SPLIT``: ``"auto"`` when unset or empty, else one of ``SPLIT_RULES``."""
    value = os.environ.get(SPLIT_RULE_ENV, "").strip() or "auto"
    if value not in SPLIT_RULES:
        raise ValueError(f"{SPLIT_RULE_ENV} must be one of {', '.join(SPLIT_RULES)}, got {value!r}")
    return value


def programs_own_cores(device: torch.device) -> bool:
    """Whether each program of an Ascend grid has a compute unit to itself: on an NPU (one per
    vector core), under ``ASCEND_KVC_VECTOR_CORES`` (a 910B's view) and on the CPU interpreter;
    not on CUDA, where ``_PROGRAMS_PER_UNIT`` programs share an SM."""
    return vector_cores_override() is not None or _PROGRAMS_PER_UNIT.get(device.type, 1) == 1


def persistent_programs(device: torch.device, work_items: int) -> int:
    """Programs for a persistent 1-D Ascend grid: ``ascend_programs``, never more than the work."""
    return max(1, min(work_items, ascend_programs(device)))


@functools.lru_cache(maxsize=None)
def device_kind(device: torch.device) -> str:
    """A short name for per-device tuning tables, e.g. ``cuda:sm90``, ``npu``, ``cpu``."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return f"cuda:sm{major}{minor}"
    return device.type
