"""The operator as a PyTorch custom op: ``torch.ops.ascend_kvc.compress_``.

A serving engine calls the op instead of the Python function when the call must live inside a
``torch.compile`` graph or a captured CUDA graph: the op is opaque to Dynamo (no graph break,
no tracing into the routes) and its schema tells the compiler that it writes ``out`` and nothing
else::

    ascend_kvc::compress_(Tensor state_cache, Tensor token_to_req, Tensor positions,
                          Tensor boundary_token_indices, Tensor block_table, Tensor rms_norm_weight,
                          Tensor cos_sin_cache, Tensor kv_slot_mapping, Tensor(a!) out,
                          int block_size, int compress_ratio, float rms_norm_eps, str route,
                          bool validate) -> ()

``out`` is the paged KV cache (``[num_pages, 37376]`` uint8), written in place: the op is the
function's serving form, ``c128_256_512_compress(..., kv_cache=out, out=out, route=route,
validate=validate)``. For the official "new zeroed cache" form, pass a zeroed tensor as ``out``.

Registration happens when this module is imported, which ``import ascend_kvc`` does: defining a
schema and four kernels in the dispatcher is a few hundred microseconds of pure bookkeeping. It
probes no device, imports neither Triton nor torch-npu and compiles nothing; the ``PrivateUse1``
kernel is what torch-npu's ``npu`` device dispatches to once torch-npu is loaded (vLLM-Ascend
registers its ops under the same key). The kernels themselves load their route on first call,
exactly as the Python function does.
"""

from __future__ import annotations

import torch

from .api import c128_256_512_compress
from .validation import check_metadata

NAMESPACE = "ascend_kvc"
OP_NAME = "compress_"
QUALNAME = f"{NAMESPACE}::{OP_NAME}"
SCHEMA = (
    "(Tensor state_cache, Tensor token_to_req, Tensor positions, Tensor boundary_token_indices, "
    "Tensor block_table, Tensor rms_norm_weight, Tensor cos_sin_cache, Tensor kv_slot_mapping, "
    "Tensor(a!) out, int block_size, int compress_ratio, float rms_norm_eps, str route, "
    "bool validate) -> ()"
)
# CPU (reference route, or the Triton interpreter), CUDA, and Ascend NPUs: torch-npu's "npu"
# device is PyTorch's PrivateUse1 backend.
DISPATCH_KEYS = ("CPU", "CUDA", "PrivateUse1")


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
) -> None:
    c128_256_512_compress(
        state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
        cos_sin_cache, kv_slot_mapping, out, block_size, compress_ratio, rms_norm_eps,
        out=out, route=route, validate=validate,
    )


def _compress_fake(
    state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
    cos_sin_cache, kv_slot_mapping, out, block_size, compress_ratio, rms_norm_eps, route, validate,
) -> None:
    # Shapes, dtypes and devices only (no values exist here): bad metadata fails at trace time,
    # with the same message as in eager mode.
    check_metadata(
        state_cache, token_to_req, positions, boundary_token_indices, block_table, rms_norm_weight,
        cos_sin_cache, kv_slot_mapping, out, block_size, compress_ratio, rms_norm_eps, out,
    )


_LIBRARY: torch.library.Library | None = None


def _is_defined() -> bool:
    return hasattr(getattr(torch.ops, NAMESPACE), OP_NAME)


def register() -> None:
    """Define ``ascend_kvc::compress_`` with its kernels and fake kernel; idempotent.

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
    _LIBRARY = lib


register()
