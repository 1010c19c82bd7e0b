"""What the audit compiles: every Ascend kernel x C x block_size x state dtype, deduplicated.

The kernels of a stage and their exact constexprs come from
``ascend_kvc.stages.kernel_specializations(stage, block_size, compress_ratio, state_dtype)`` when
the package has it (the route's own launch parameters); for older trees a local table mirrors
what the gathers launch.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import torch

from ascend_kvc import ASCEND_STAGES

RATIOS = (128, 256, 512)
BLOCK_SIZES = (1, 3, 8, 16, 32, 64, 128, 256)
STATE_DTYPES = (torch.float32, torch.bfloat16)
SCATTER_KERNEL = "_byte_scatter_kernel"

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


def stages() -> tuple[str, ...]:
    """The Ascend ladder's stages, plus ``fused`` where the package has that rung."""
    return ASCEND_STAGES + (() if "fused" in ASCEND_STAGES or not _has_fused() else ("fused",))


def _has_fused() -> bool:
    from ascend_kvc import stages as stage_module

    ladder = getattr(stage_module, "_LADDER", {})
    return "fused" in ladder


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
        # The gathers' per-output window loop sits inside the persistent loop; the scatter has none.
        return 1 if self.kernel == SCATTER_KERNEL else 2

    def as_dict(self) -> dict:
        return {"module": self.module, "kernel": self.kernel, "constexprs": dict(self.constexprs),
                "pointer_types": dict(self.pointer_types), "hot_depth": self.hot_depth}


def to_spec(kernel_spec) -> Spec:
    """A ``KernelSpec`` (module, kernel, constexprs, pointer_dtypes) as a hashable ``Spec``."""
    cx = {k: (v.item() if hasattr(v, "item") else v) for k, v in dict(kernel_spec.constexprs).items()}
    ptrs = {k: pointer_type(v) for k, v in dict(kernel_spec.pointer_dtypes).items()}
    return Spec(kernel_spec.module, kernel_spec.kernel, tuple(sorted(cx.items())), tuple(sorted(ptrs.items())))


def kernel_specs(stage: str, block_size: int, ratio: int, state_dtype: torch.dtype) -> list[Spec]:
    from ascend_kvc import stages as stage_module

    fn = getattr(stage_module, "kernel_specializations", None)
    found = fn(stage, block_size, ratio, state_dtype) if fn is not None else _local_table(stage, block_size, ratio, state_dtype)
    return [to_spec(k) for k in found]


@dataclass(frozen=True)
class Entry:
    stage: str
    C: int
    block_size: int
    state_dtype: str
    specs: tuple[Spec, ...]


def build_matrix() -> list[Entry]:
    return [
        Entry(stage, C, bs, dtype_name(dt), tuple(kernel_specs(stage, bs, C, dt)))
        for stage in stages() for C in RATIOS for bs in BLOCK_SIZES for dt in STATE_DTYPES
    ]


def unique_specs(matrix: list[Entry]) -> list[Spec]:
    seen: dict[str, Spec] = {}
    for e in matrix:
        for s in e.specs:
            seen.setdefault(s.key, s)
    return list(seen.values())


# ---------------------------------------------------------------- local table (older trees)

@dataclass(frozen=True)
class _KernelSpec:
    module: str
    kernel: str
    constexprs: dict
    pointer_dtypes: dict


def _index_pointers(state_dtype) -> dict:
    return {"state_ptr": state_dtype, "boundary_ptr": torch.int64, "token_to_req_ptr": torch.int32,
            "positions_ptr": torch.int64, "slot_mapping_ptr": torch.int64, "block_table_ptr": torch.int32,
            "pooled_ptr": torch.float32, "slot_out_ptr": torch.int64, "rope_pos_out_ptr": torch.int64,
            "weight_ptr": torch.bfloat16}


def _local_table(stage: str, block_size: int, ratio: int, state_dtype) -> list[_KernelSpec]:
    from ascend_kvc.layout import PAYLOAD_BYTES, SCALE_BYTES, SCALE_REGION, SLOTS_PER_PAGE

    block_bs = 1 << (block_size - 1).bit_length()
    if stage == "random-gather":
        return [_KernelSpec("ascend_kvc.gather_random", "_random_gather_softmax_kernel",
                            dict(C=ratio, BLOCK_D=64, BLOCK_T=32), _index_pointers(state_dtype))]
    if stage == "pre-gather":
        return [_KernelSpec("ascend_kvc.gather_pregather", "_linear_scan_softmax_kernel",
                            dict(C=ratio, BLOCK_D=64, BLOCK_T=32),
                            {"rows_ptr": state_dtype, "pooled_ptr": torch.float32})]
    block_d, unmasked = {"block-gather": (64, False), "block-gather-nomask": (64, True), "block-d128": (128, True),
                         "block-d256": (256, True), "block-d512": (512, True), "byte-scatter": (512, True)}[stage]
    out = [_KernelSpec("ascend_kvc.gather_block", "_block_gather_softmax_kernel",
                       dict(C=ratio, BLOCK_D=block_d, BLOCK_BS=block_bs, UNMASKED_MIDDLE=unmasked,
                            ROWS_PADDED=block_bs != block_size, FUSE_RMSNORM=block_d == 512),
                       _index_pointers(state_dtype))]
    if stage == "byte-scatter":
        out.append(_KernelSpec("ascend_kvc.scatter", SCATTER_KERNEL,
                               dict(PAYLOAD_BYTES=PAYLOAD_BYTES, SCALE_BYTES=SCALE_BYTES, SCALE_REGION=SCALE_REGION,
                                    SLOTS_PER_PAGE=SLOTS_PER_PAGE),
                               {"payload_ptr": torch.uint8, "scales_ptr": torch.uint8, "slot_ptr": torch.int64,
                                "kv_cache_ptr": torch.uint8}))
    return out
