"""The route registry: which implementations exist, where each may run, and how to pick one.

A route is a module with ``run(args, route_name, plan, out)``, and optionally ``launch_plan`` and
``step_plan`` (the cached launch plans of a call and of a step). Modules are imported on first
use, so importing ``ascend_kvc`` compiles nothing, probes no device and imports torch-npu nowhere
itself; it also lets a caller set ``TRITON_INTERPRET`` before the first Triton kernel is defined.
(Where torch-npu is installed, ``import torch``, which this package does, loads it through torch's
device-backend autoload; ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns that off.)
"""

from __future__ import annotations

import functools
import importlib
import logging
import os
from dataclasses import dataclass

import torch

from .layout import COMPRESS_RATIOS, DEFAULT_KV_FORMAT, KV_FORMATS, OVERLAP_RATIO, SLOTS_PER_PAGE

logger = logging.getLogger("ascend_kvc")


class RouteUnavailableError(RuntimeError):
    """An explicitly requested route cannot run on the given tensors."""


@dataclass(frozen=True)
class Route:
    name: str
    module: str  # "package.module" with run(args, route_name, plan, out)
    uses_triton: bool
    description: str
    # (device type, why): device types whose tensors this route refuses, with the reason it gives.
    refuses: tuple[tuple[str, str], ...] = ()

    def load(self):
        return importlib.import_module(self.module)


# The Ascend ladder, bottom rung first. Each stage is the route "ascend:<name>". "ascend" runs
# triton-quant, the conservative design (a real bf16 tensor before quantisation, a pure-uint8
# scatter) in 3 launches; fused, the last rung, trades those safeguards for one launch.
ASCEND_STAGES: tuple[str, ...] = (
    "random-gather",
    "pre-gather",
    "block-gather",
    "block-gather-nomask",
    "block-d128",
    "block-d256",
    "block-d512",
    "byte-scatter",
    "triton-quant",
    "fused",
)
ASCEND_DEFAULT_STAGE = "triton-quant"
# The rungs users run (the default and fused): they split windows across vector cores when the
# outputs are too few to keep every core busy (``stages.work_split``), and repeat calls reuse a launch plan.
ASCEND_PLANNED_STAGES: tuple[str, ...] = ("triton-quant", "fused")

_STAGE_DESCRIPTIONS = {
    "random-gather": "per-row block-table lookups and indirect row loads in the hot loop",
    "pre-gather": "index_select pre-gather into [N, C, 1024], then a Triton linear scan",
    "block-gather": "one block-table lookup per physical block, every tile masked, BLOCK_D=64",
    "block-gather-nomask": "as block-gather, full middle blocks loaded without masks",
    "block-d128": "block-gather-nomask with BLOCK_D=128",
    "block-d256": "block-gather-nomask with BLOCK_D=256",
    "block-d512": "BLOCK_D=512: one program owns the head and does the RMSNorm",
    "byte-scatter": "block-d512 with fp32 RoPE, quantisation of a real bf16 tensor, pure-uint8 Triton scatter",
    "triton-quant": "block-d512 gather writes a real bf16 tensor; one Triton kernel quantises it; "
                    "pure-uint8 scatter; windows split across cores when outputs are few",
    "fused": "block-d512 gather, RMSNorm, quant/RoPE and the slot-byte stores in one kernel, one launch",
}

# The gpgpu route is refused on NPU tensors rather than adapted: it is a GPU design (several
# programs per SM, warps and eviction hints triton-ascend ignores, a grid of
# n * splits * 512 / block_d programs that passes triton-ascend's 65535-program limit on large
# calls) and it launches on whichever NPU is current. The Ascend ladder is the NPU route; a
# second, unmeasured NPU path would only be a slower way to the same bytes.
_GPGPU_NOT_ON_NPU = ("it is the GPU design and was never adapted to an NPU (its grid can pass triton-ascend's "
                     "65535-program limit); use route='ascend' (what 'auto' picks on an NPU) or 'ascend:fused'")

ROUTES: dict[str, Route] = {
    "reference": Route("reference", "ascend_kvc.reference", False, "PyTorch baseline, [N, C, 1024] materialised"),
    **{
        f"ascend:{stage}": Route(f"ascend:{stage}", "ascend_kvc.stages", True, _STAGE_DESCRIPTIONS[stage])
        for stage in ASCEND_STAGES
    },
    "gpgpu": Route("gpgpu", "gpgpu_fallback.route", True, "block8 online-softmax split gather + fused Triton finalizer",
                   refuses=(("npu", _GPGPU_NOT_ON_NPU),)),
}


def route_names() -> tuple[str, ...]:
    return ("auto", "ascend", *ROUTES)


def _interpreter_on() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def check_can_run(route: Route, device: torch.device) -> None:
    """Raise ``RouteUnavailableError`` with the reason when ``route`` cannot run on ``device``."""
    if not route.uses_triton:
        return
    if device.type == "cpu" and not _interpreter_on():
        raise RouteUnavailableError(
            f"route {route.name!r} runs Triton kernels; on CPU tensors that needs TRITON_INTERPRET=1 "
            "set before ascend_kvc's kernels are first used (or use route='reference')"
        )
    for device_type, why in route.refuses:
        if device.type == device_type:
            raise RouteUnavailableError(f"route {route.name!r} does not run on {device_type} tensors: {why}")
    if device.type not in ("cpu", "cuda", "npu", "xpu"):
        raise RouteUnavailableError(f"route {route.name!r} has no Triton backend for device type {device.type!r}")


@dataclass(frozen=True)
class Capabilities:
    """What a Triton route computes beyond the challenge's layout (int8, 64 slots a page, C in
    {128, 256, 512}, no overlap)."""

    kv_formats: tuple[str, ...] = (DEFAULT_KV_FORMAT,)
    any_slots_per_page: bool = False  # 584-byte slots into pages of any P >= 1, not only 64
    ratio_4: bool = False  # compress_ratio=4 without overlap
    overlap: bool = False  # the overlapping ratio-4 compressor


# Triton routes by name; a route not named here computes only the challenge's layout. The
# reference route (no Triton) computes everything. The rungs users run compute compress_ratio=4,
# with and without overlap (their kernels' OVERLAP specialisation); the study rungs do not.
CAPABILITIES: dict[str, Capabilities] = {
    "ascend:fused": Capabilities(kv_formats=KV_FORMATS, any_slots_per_page=True, ratio_4=True, overlap=True),
    "ascend:triton-quant": Capabilities(ratio_4=True, overlap=True),
    "gpgpu": Capabilities(kv_formats=KV_FORMATS, any_slots_per_page=True, ratio_4=True, overlap=True),
}


def capabilities(route: Route) -> Capabilities:
    """What ``route`` computes (everything, for the reference route)."""
    if not route.uses_triton:
        return Capabilities(kv_formats=KV_FORMATS, any_slots_per_page=True, ratio_4=True, overlap=True)
    return CAPABILITIES.get(route.name, Capabilities())


def unsupported(route: Route, args) -> str:
    """Why ``route`` cannot compute these checked arguments' cache format, page width or window,
    or ``""`` when it can (``CAPABILITIES``)."""
    can = capabilities(route)
    problems = []
    if args.kv_format not in can.kv_formats:
        problems.append(f"kv_format={args.kv_format!r} (only {', '.join(map(repr, can.kv_formats))})")
    if args.overlap and not can.overlap:
        problems.append("overlap=True")
    elif not args.overlap and args.compress_ratio == OVERLAP_RATIO and not can.ratio_4:
        problems.append(f"compress_ratio={args.compress_ratio} (only {COMPRESS_RATIOS})")
    if args.kv_format != "bf16" and args.slots_per_page != SLOTS_PER_PAGE and not can.any_slots_per_page:
        problems.append(f"kv_cache with {args.slots_per_page} slots a page (width {args.kv_cache.shape[1]}; only "
                        f"{SLOTS_PER_PAGE} slots, width {SLOTS_PER_PAGE * 584})")
    if not problems:
        return ""
    return f"route {route.name!r} cannot compute " + ", ".join(problems) + "; route='reference' computes every format"


# The Triton routes that write every cache format with any slots per page: what ``route='auto'``
# runs on a GPU or an NPU when the route it picks cannot compute the arguments.
FORMAT_ROUTES = frozenset(name for name, can in CAPABILITIES.items()
                          if set(can.kv_formats) == set(KV_FORMATS) and can.any_slots_per_page)


@functools.lru_cache(maxsize=None)
def _announce_fallback(device_type: str, name: str, reason: str, instead: str = "reference") -> None:
    logger.info("ascend_kvc: route='auto' on %s tensors runs route %r instead of %r: %s",
                device_type, instead, name, reason)


def for_arguments(requested: str, chosen: Route, args) -> Route:
    """``chosen`` if it computes these arguments' format; for ``route='auto'`` otherwise, on a GPU
    or an NPU a ``FORMAT_ROUTES`` route that runs there and computes them, else the reference route
    (said once in the log); for a route asked by name, ``RouteUnavailableError`` with the reason
    (it names ``kv_format``, ``overlap``, ``compress_ratio`` or ``kv_cache``)."""
    reason = unsupported(chosen, args)
    if not reason:
        return chosen
    if requested == "auto":
        # On a GPU or an NPU the kernel route that writes every format, where it computes these
        # arguments (vLLM's fp8 slot, vLLM-Ascend's bf16 rows); else the reference.
        for name in sorted(FORMAT_ROUTES):
            refused = any(device_type == args.device.type for device_type, _ in ROUTES[name].refuses)
            if args.device.type in ("cuda", "npu") and not refused and not unsupported(ROUTES[name], args):
                _announce_fallback(args.device.type, chosen.name, reason, name)
                return ROUTES[name]
        _announce_fallback(args.device.type, chosen.name, reason)
        return ROUTES["reference"]
    raise RouteUnavailableError(reason)


@functools.lru_cache(maxsize=None)
def _announce(device_type: str, name: str) -> None:
    logger.info("ascend_kvc: route='auto' on %s tensors runs route %r", device_type, name)


def resolve(route: str, device: torch.device) -> Route:
    """Map a user's ``route`` argument to a registered route."""
    if not isinstance(route, str):
        raise TypeError(f"route must be a str, got {type(route).__name__}")
    if route == "auto":
        name = {"npu": "ascend", "cuda": "gpgpu"}.get(device.type, "reference")
        resolved = resolve(name, device)
        _announce(device.type, resolved.name)
        return resolved
    if route == "ascend":
        route = f"ascend:{ASCEND_DEFAULT_STAGE}"
    if route not in ROUTES:
        raise ValueError(f"route must be one of {route_names()}, got {route!r}")
    return ROUTES[route]
