"""What the audit compiles: every Ascend kernel x C x block_size x state dtype, deduplicated.

Two scopes (``build_matrix``): ``full``, the whole matrix (``make audit``, which CI runs after
``make test``), and ``quick``, every stage once, at C=128 (4 for the overlapping compressor's
stages), block size 64 and a float32 state (``make test``: every kernel reaches the 910B
compiler in a minute or two of CPU, where the whole matrix takes 11 to 19 minutes on 2 cores).

``fused`` is compiled for every cache format it writes (``FUSED_FORMATS`` besides int8), unsplit and split.
The rungs users run (``triton-quant`` and ``fused``, every variant) are compiled at ``compress_ratio=4``
too, and with the overlapping compressor (stages ``<rung>/overlap...``, C = 4 only).

The kernels of a stage and their exact constexprs and pointer types come from
``ascend_kvc.stages.kernel_specializations(stage, block_size, compress_ratio, state_dtype)``, the
list the route's launchers themselves run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import torch

from ascend_kvc import ASCEND_STAGES

RATIOS = (128, 256, 512)
OVERLAP_RATIOS = (4,)  # the ratio of the overlapping compressor, also run plain by the planned rungs
ALL_RATIOS = (*OVERLAP_RATIOS, *RATIOS)
BLOCK_SIZES = (1, 3, 8, 16, 32, 64, 128, 256)
STATE_DTYPES = (torch.float32, torch.bfloat16)
SCOPES = ("full", "quick")
QUICK_RATIO = 128  # a stage's ratio in the quick scope (the overlapping compressor's stages: 4)
QUICK_BLOCK_SIZE = 64
QUICK_STATE_DTYPE = torch.float32
# ``make test`` sets it to ``quick``; unset, the tests audit the full matrix.
SCOPE_ENV = "ASCEND_KVC_AUDIT_SCOPE"
SCATTER_KERNEL = "_byte_scatter_kernel"
# The boundary search of a step: one loop over token tiles, the list's scattered store inside it.
SEARCH_KERNELS = ("_count_boundaries_kernel", "_list_boundaries_kernel")

_TRITON_TYPES = {
    torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.int64: "i64",
    torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8", torch.bool: "i1",
}
_TYPE_ALIASES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "int64": "i64", "int32": "i32",
                 "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1"}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def pointer_type(dtype) -> str:
    """Triton signature type (``*fp32``) of a pointer to ``dtype`` (torch dtype or its name)."""
    if isinstance(dtype, torch.dtype):
        return "*" + _TRITON_TYPES[dtype]
    name = str(dtype).removeprefix("torch.").lstrip("*")
    return "*" + _TYPE_ALIASES.get(name, name)


SPLIT_SUFFIX = "/split"
# ``<stage>/step``: ``compress_step``, the boundary search, then the rung's kernels reading its count
STEP_SUFFIX = "/step"
# ``<stage>/step/inline``: a small step's split path, searched inside the piece gather
INLINE_SUFFIX = "/inline"
# a stage ``<rung>/overlap[/<format>][/step][/split]``: the overlapping compressor
OVERLAP_PART = "overlap"
# The cache formats ``fused`` writes besides int8 (``kv_format``), each a stage ``fused/<format>`` and
# ``fused/<format>/split``: the slots a page are a run-time argument, so no page width is audited apart.
FUSED_FORMATS = ("fp8_e4m3", "bf16")


def _format_stages() -> tuple[str, ...]:
    """``fused/<format>`` and ``fused/<format>/split`` where ``fused`` writes the other formats."""
    from ascend_kvc.stages import kernel_specializations

    try:
        kernel_specializations("fused", BLOCK_SIZES[0], RATIOS[0], STATE_DTYPES[0], kv_format=FUSED_FORMATS[0])
    except (TypeError, ValueError):
        return ()
    return tuple(f"fused/{fmt}{tail}" for fmt in FUSED_FORMATS for tail in ("", SPLIT_SUFFIX))


def _split_stages() -> tuple[str, ...]:
    """``<stage>/split``: the kernels a planned rung launches when it splits windows; then
    ``<stage>/step``, ``<stage>/step/split`` and ``<stage>/step/inline``: those of a step
    (``ascend_kvc.compress_step``), the last where the package searches small steps inside the
    piece gather."""
    try:
        from ascend_kvc.routes import ASCEND_PLANNED_STAGES
    except ImportError:
        return ()
    split = tuple(s + SPLIT_SUFFIX for s in ASCEND_PLANNED_STAGES)
    try:
        from ascend_kvc import boundaries  # a package with compress_step
    except ImportError:
        return split
    tails = ("", SPLIT_SUFFIX) + ((INLINE_SUFFIX,) if hasattr(boundaries, "INLINE_SEARCH_TOKENS") else ())
    return split + tuple(s + STEP_SUFFIX + tail for s in ASCEND_PLANNED_STAGES for tail in tails)


def _overlap_stages(planned: tuple[str, ...]) -> tuple[str, ...]:
    """``<rung>/overlap`` for every planned-rung stage (``planned``: those of the plain compressor),
    where the package computes overlap."""
    from ascend_kvc.stages import kernel_specializations

    try:
        kernel_specializations("fused", BLOCK_SIZES[0], OVERLAP_RATIOS[0], STATE_DTYPES[0], overlap=True)
    except (TypeError, ValueError):
        return ()
    return tuple(s.split("/", 1)[0] + "/" + OVERLAP_PART + s[len(s.split("/", 1)[0]):] for s in planned)


def _planned_stages(stages_: tuple[str, ...]) -> tuple[str, ...]:
    try:
        from ascend_kvc.routes import ASCEND_PLANNED_STAGES
    except ImportError:
        return ()
    return tuple(s for s in stages_ if s.split("/", 1)[0] in ASCEND_PLANNED_STAGES)


def stages() -> tuple[str, ...]:
    """The Ascend ladder's stages, then the split variants of the planned rungs (``fused`` added
    where the package has it outside the ladder), then the planned rungs' overlap stages."""
    if "fused" in ASCEND_STAGES:
        plain = ASCEND_STAGES + _split_stages() + _format_stages()
        return plain + _overlap_stages(_planned_stages(plain))
    from ascend_kvc.stages import kernel_specializations

    try:
        kernel_specializations("fused", BLOCK_SIZES[0], RATIOS[0], STATE_DTYPES[0])
    except ValueError:
        return ASCEND_STAGES
    return ASCEND_STAGES + ("fused",)


@dataclass(frozen=True)
class Spec:
    """One compilation: a kernel with its constexprs and pointer element types."""

    module: str
    kernel: str
    constexprs: tuple  # sorted (name, value) pairs
    pointer_types: tuple  # sorted (name, "*fp32") pairs

    @property
    def key(self) -> str:
        blob = json.dumps([self.module, self.kernel, self.constexprs, self.pointer_types])
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def hot_depth(self) -> int:
        # The gathers' per-output window loop sits inside the persistent loop; the scatter has none,
        # and the boundary search only its loop over token tiles.
        return 1 if self.kernel == SCATTER_KERNEL or self.kernel in SEARCH_KERNELS else 2

    def as_dict(self) -> dict:
        return {"module": self.module, "kernel": self.kernel, "constexprs": dict(self.constexprs),
                "pointer_types": dict(self.pointer_types), "hot_depth": self.hot_depth}


def to_spec(kernel_spec) -> Spec:
    """A ``KernelSpec`` (module, kernel, constexprs, pointer_dtypes) as a hashable ``Spec``."""
    cx = {k: (v.item() if hasattr(v, "item") else v) for k, v in dict(kernel_spec.constexprs).items()}
    ptrs = {k: pointer_type(v) for k, v in dict(kernel_spec.pointer_dtypes).items()}
    return Spec(kernel_spec.module, kernel_spec.kernel, tuple(sorted(cx.items())), tuple(sorted(ptrs.items())))


def ratios(stage: str) -> tuple[int, ...]:
    """The ``compress_ratio`` values a stage is compiled at: 4 only with overlap, 4 too on the
    planned rungs where the package computes it, else ``RATIOS``."""
    if OVERLAP_PART in stage.split("/"):
        return OVERLAP_RATIOS
    if _planned_stages((stage,)) and _overlap_stages(("fused",)):
        return ALL_RATIOS
    return RATIOS


def kernel_specs(stage: str, block_size: int, ratio: int, state_dtype: torch.dtype) -> list[Spec]:
    from ascend_kvc.stages import kernel_specializations

    if OVERLAP_PART in stage.split("/"):
        parts = stage.split("/")
        fmt = next((f for f in FUSED_FORMATS if f in parts), "int8")
        inline = INLINE_SUFFIX[1:] in parts
        return [to_spec(k) for k in kernel_specializations(
            parts[0], block_size, ratio, state_dtype, split=SPLIT_SUFFIX[1:] in parts or inline,
            step=STEP_SUFFIX[1:] in parts, state_slots=True, kv_format=fmt, overlap=True, inline_search=inline)]
    if stage.endswith(STEP_SUFFIX + INLINE_SUFFIX):
        return [to_spec(k) for k in kernel_specializations(stage.split("/", 1)[0], block_size, ratio, state_dtype,
                                                           split=True, step=True, state_slots=True,
                                                           inline_search=True)]
    split = stage.endswith(SPLIT_SUFFIX)
    stage = stage.removesuffix(SPLIT_SUFFIX)
    fmt = next((f for f in FUSED_FORMATS if stage.endswith("/" + f)), None)
    if fmt is not None:
        return [to_spec(k) for k in kernel_specializations(stage.removesuffix("/" + fmt), block_size, ratio,
                                                           state_dtype, split=split, kv_format=fmt)]
    if stage.endswith(STEP_SUFFIX):  # with a state slot mapping: the search's fuller form
        return [to_spec(k) for k in kernel_specializations(stage.removesuffix(STEP_SUFFIX), block_size, ratio,
                                                           state_dtype, split=split, step=True, state_slots=True)]
    return [to_spec(k) for k in kernel_specializations(stage, block_size, ratio, state_dtype, split=split)]


@dataclass(frozen=True)
class Entry:
    stage: str
    C: int
    block_size: int
    state_dtype: str
    specs: tuple[Spec, ...]


def cells(scope: str = "full") -> list[tuple[str, int, int, torch.dtype]]:
    """``(stage, C, block_size, state_dtype)`` of every matrix entry of ``scope``."""
    if scope == "full":
        return [(stage, C, bs, dt) for stage in stages() for C in ratios(stage) for bs in BLOCK_SIZES
                for dt in STATE_DTYPES]
    if scope == "quick":
        return [(stage, QUICK_RATIO if QUICK_RATIO in ratios(stage) else ratios(stage)[0], QUICK_BLOCK_SIZE,
                 QUICK_STATE_DTYPE) for stage in stages()]
    raise ValueError(f"audit scope must be one of {SCOPES}, got {scope!r}")


def scope_from_env() -> str:
    """The scope ``SCOPE_ENV`` names (``full`` when unset)."""
    import os

    return os.environ.get(SCOPE_ENV) or "full"


def build_matrix(scope: str = "full") -> list[Entry]:
    return [Entry(stage, C, bs, dtype_name(dt), tuple(kernel_specs(stage, bs, C, dt)))
            for stage, C, bs, dt in cells(scope)]


def unique_specs(matrix: list[Entry]) -> list[Spec]:
    seen: dict[str, Spec] = {}
    for e in matrix:
        for s in e.specs:
            seen.setdefault(s.key, s)
    return list(seen.values())
