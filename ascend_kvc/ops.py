"""The operator as a PyTorch custom op: ``torch.ops.ascend_kvc.compress_``.

A serving engine calls the op instead of the Python function when the call must live inside a
``torch.compile`` graph or a captured CUDA graph: the op is opaque to Dynamo (no graph break,
no tracing into the routes) and its schema tells the compiler that it writes ``out`` and nothing
else::

    ascend_kvc::compress_(Tensor state_cache, Tensor token_to_req, Tensor positions,
                          Tensor boundary_token_indices, Tensor block_table, Tensor rms_norm_weight,
                          Tensor cos_sin_cache, Tensor kv_slot_mapping, Tensor(a!) out,
                          int block_size, int compress_ratio, float rms_norm_eps, str route,
                          bool validate, str kv_format="int8", bool overlap=False) -> ()

``out`` is the paged KV cache (``[num_pages, P * 584]`` uint8, or the ``bf16`` format's bfloat16
rows), written in place: the op is the function's serving form, ``c128_256_512_compress(...,
kv_cache=out, out=out, route=route, validate=validate, kv_format=kv_format, overlap=overlap)``.
``kv_format`` and ``overlap`` have defaults, so a caller of the earlier schema keeps working.
For the official "new zeroed cache" form, pass a zeroed tensor as ``out``.

Registration happens when this module is imported, which ``import ascend_kvc`` does: defining the
schemas and kernels in the dispatcher is bookkeeping (2-10 ms of the import on the CPU development
machine, almost all of it ``register_fake`` looking up its caller's source; docs/SERVING.md). It
probes no device, imports neither Triton nor torch-npu and compiles nothing; the ``PrivateUse1``
kernel is what torch-npu's ``npu`` device dispatches to once torch-npu is loaded (vLLM-Ascend
registers its ops under the same key). The kernels themselves load their route on first call,
exactly as the Python function does.

A second op is the serving engine's once-per-step form, ``ascend_kvc.compress_step`` (it finds
its own boundary tokens on the device; with ``validate=False`` capturable in a graph)::

    ascend_kvc::compress_step_(Tensor state_cache, Tensor token_to_req, Tensor positions,
                               Tensor block_table, Tensor rms_norm_weight, Tensor cos_sin_cache,
                               Tensor kv_slot_mapping, Tensor(a!) kv_cache, int block_size,
                               int compress_ratio, float rms_norm_eps, Tensor? state_slot_mapping,
                               str route, bool validate, str kv_format="int8", bool overlap=False) -> ()
"""

from __future__ import annotations

import torch

from .api import c128_256_512_compress
from .step import check_step_metadata, compress_step
from .validation import check_metadata

NAMESPACE = "ascend_kvc"
OP_NAME = "compress_"
QUALNAME = f"{NAMESPACE}::{OP_NAME}"
SCHEMA = (
    "(Tensor state_cache, Tensor token_to_req, Tensor positions, Tensor boundary_token_indices, "
    "Tensor block_table, Tensor rms_norm_weight, Tensor cos_sin_cache, Tensor kv_slot_mapping, "
    "Tensor(a!) out, int block_size, int compress_ratio, float rms_norm_eps, str route, "
    "bool validate, str kv_format=\"int8\", bool overlap=False) -> ()"
)
# CPU (reference route, or the Triton interpreter), CUDA, and Ascend NPUs: torch-npu's "npu"
# device is PyTorch's PrivateUse1 backend.
DISPATCH_KEYS = ("CPU", "CUDA", "PrivateUse1")
STEP_OP_NAME = "compress_step_"
STEP_QUALNAME = f"{NAMESPACE}::{STEP_OP_NAME}"
STEP_SCHEMA = (
    "(Tensor state_cache, Tensor token_to_req, Tensor positions, Tensor block_table, Tensor rms_norm_weight, "
    "Tensor cos_sin_cache, Tensor kv_slot_mapping, Tensor(a!) kv_cache, int block_size, int compress_ratio, "
    "float rms_norm_eps, Tensor? state_slot_mapping, str route, bool validate, str kv_format=\"int8\", "
    "bool overlap=False) -> ()"
)


def _compress_kernel(
    state_cache: torch.Tensor,
    token_to_req: torch.Tensor,
    positions: torch.Tensor,
    boundary_token_indices: torch.Tensor,
    block_table: torch.Tensor,
    rms_norm_weight: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_slot_mapping: torch.Tensor,
    out: torch.Tensor,
    block_size: int,
    compress_ratio: int,
    rms_norm_eps: float,
    route: str,
    validate: bool,
    kv_format: str = "int8",
    overlap: bool = False,
) -> None:
    c128_256_512_compress(
        state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
        cos_sin_cache, kv_slot_mapping, out, block_size, compress_ratio, rms_norm_eps,
        out=out, route=route, validate=validate, kv_format=kv_format, overlap=overlap,
    )


def _compress_fake(
    state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
    cos_sin_cache, kv_slot_mapping, out, block_size, compress_ratio, rms_norm_eps, route, validate,
    kv_format="int8", overlap=False,
) -> None:
    # Shapes, dtypes and devices only (no values exist here): bad metadata fails at trace time,
    # with the same message as in eager mode.
    check_metadata(
        state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
        cos_sin_cache, kv_slot_mapping, out, block_size, compress_ratio, rms_norm_eps, out, kv_format, overlap,
    )


def _compress_step_kernel(
    state_cache: torch.Tensor,
    token_to_req: torch.Tensor,
    positions: torch.Tensor,
    block_table: torch.Tensor,
    rms_norm_weight: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_slot_mapping: torch.Tensor,
    kv_cache: torch.Tensor,
    block_size: int,
    compress_ratio: int,
    rms_norm_eps: float,
    state_slot_mapping: torch.Tensor | None,
    route: str,
    validate: bool,
    kv_format: str = "int8",
    overlap: bool = False,
) -> None:
    compress_step(
        state_cache, token_to_req, positions, block_table, rms_norm_weight, cos_sin_cache, kv_slot_mapping, kv_cache,
        block_size=block_size, compress_ratio=compress_ratio, rms_norm_eps=rms_norm_eps,
        state_slot_mapping=state_slot_mapping, route=route, validate=validate, kv_format=kv_format, overlap=overlap,
    )


def _compress_step_fake(
    state_cache, token_to_req, positions, block_table, rms_norm_weight, cos_sin_cache, kv_slot_mapping, kv_cache,
    block_size, compress_ratio, rms_norm_eps, state_slot_mapping, route, validate, kv_format="int8", overlap=False,
) -> None:
    check_step_metadata(state_cache, token_to_req, positions, block_table, rms_norm_weight, cos_sin_cache,
                        kv_slot_mapping, kv_cache, block_size, compress_ratio, rms_norm_eps, state_slot_mapping,
                        kv_format, overlap)


_LIBRARY: torch.library.Library | None = None


def _is_defined() -> bool:
    return hasattr(getattr(torch.ops, NAMESPACE), OP_NAME)


def register() -> None:
    """Define ``ascend_kvc::compress_`` and ``ascend_kvc::compress_step_`` with their kernels and
    fake kernels; idempotent.

    An op of that name already in the dispatcher (a second copy of this package imported in the
    same process) is left as it is.
    """
    global _LIBRARY
    if _LIBRARY is not None or _is_defined():
        return
    lib = torch.library.Library(NAMESPACE, "FRAGMENT")
    lib.define(OP_NAME + SCHEMA)
    for key in DISPATCH_KEYS:
        lib.impl(OP_NAME, _compress_kernel, key)
    torch.library.register_fake(QUALNAME, _compress_fake, lib=lib)
    lib.define(STEP_OP_NAME + STEP_SCHEMA)
    for key in DISPATCH_KEYS:
        lib.impl(STEP_OP_NAME, _compress_step_kernel, key)
    torch.library.register_fake(STEP_QUALNAME, _compress_step_fake, lib=lib)
    _LIBRARY = lib


register()
