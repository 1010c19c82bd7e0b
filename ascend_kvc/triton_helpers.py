"""Triton device functions shared by the kernels of both routes, and the Ascend gathers' launcher.

Everything here stays within the Triton 3.2 language (triton-ascend 3.2.0) and is exact under the
CPU interpreter: bf16 rounding and power-of-two scales are done with integer bit operations,
never with ``.to(tl.bfloat16)`` or ``log2``/``exp2``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .device import persistent_programs
from .layout import HEAD_DIM, SLOTS_PER_PAGE


@triton.jit
def resolve_output(
    i,
    boundary_ptr,  # in, [num_outputs], int32/int64
    token_to_req_ptr,  # in, [num_tokens], int32/int64
    positions_ptr,  # in, [num_tokens], int32/int64
    slot_mapping_ptr,  # in, [num_tokens], int32/int64
    num_tokens,
    num_reqs,
    blocks_per_req,
    num_slots,
    max_pos,
    block_size,
    C: tl.constexpr,
):
    """Scalar look-ups of output ``i``: ``(ok, req, pos, slot)``, each index clamped to a safe value.

    ``ok`` is false when the output is skipped (slot < 0) or any of its indices is out of range;
    a caller must then read nothing through ``req``/``pos`` beyond the block table's first row.
    """
    b = tl.load(boundary_ptr + i).to(tl.int64)
    return resolve_token(b, token_to_req_ptr, positions_ptr, slot_mapping_ptr, num_tokens, num_reqs, blocks_per_req,
                         num_slots, max_pos, block_size, C)


@triton.jit
def resolve_token(b, token_to_req_ptr, positions_ptr, slot_mapping_ptr, num_tokens, num_reqs, blocks_per_req,
                  num_slots, max_pos, block_size, C: tl.constexpr):
    """``resolve_output`` for the output of token ``b`` (int64), found by the caller."""
    ok = (b >= 0) & (b < num_tokens)
    b = tl.where(ok, b, 0)
    slot = tl.load(slot_mapping_ptr + b).to(tl.int64)
    req = tl.load(token_to_req_ptr + b).to(tl.int64)
    pos = tl.load(positions_ptr + b).to(tl.int64)
    ok = ok & (slot >= 0) & (slot < num_slots) & (req >= 0) & (req < num_reqs) & (pos >= C - 1)
    ok = ok & (pos // block_size < blocks_per_req) & ((pos // C) * C < max_pos)
    req = tl.where(ok, req, 0)
    pos = tl.where(ok, pos, C - 1)
    return ok, req, pos, slot


@triton.jit
def online_softmax_update(m, l, acc, values, scores):
    """Fold a ``[rows, D]`` tile into the running per-dimension max ``m``, sum ``l`` and ``acc``.

    Masked rows must carry ``scores = -inf`` and ``values = 0``.
    """
    m_new = tl.maximum(m, tl.max(scores, axis=0))
    alpha = tl.exp(m - m_new)
    p = tl.exp(scores - m_new[None, :])
    l = l * alpha + tl.sum(p, axis=0)
    acc = acc * alpha + tl.sum(p * values, axis=0)
    return m_new, l, acc


@triton.jit
def bf16_rne_bits(x):
    """fp32 -> the bf16 it rounds to (nearest even), as int32 bits with the low 16 bits zero."""
    bits = x.to(tl.int32, bitcast=True)
    bits = bits + (0x7FFF + ((bits >> 16) & 1))
    return bits & -65536


@triton.jit
def bf16_round(x):
    """fp32 -> float(bf16(x)), round to nearest even, exact on every backend."""
    return bf16_rne_bits(x).to(tl.float32, bitcast=True)


@triton.jit
def pow2_scale_exponent(amax):
    """``ceil(log2(max(amax, 1e-4) / 127))`` for a bf16-valued ``amax >= 0``, from its bits.

    For ``amax = 1.m * 2^E`` with a 7-bit mantissa ``m``, ``amax / 127`` lies in
    ``(2^(E-7), 2^(E-6)]`` unless ``m == 127`` (then in ``(2^(E-6), 2^(E-5))``). Below the 1e-4
    floor the answer is the floor's: ``ceil(log2(1e-4 / 127)) = -20``.
    """
    bits = amax.to(tl.int32, bitcast=True)
    biased = (bits >> 23) & 0xFF
    mant7 = (bits >> 16) & 0x7F
    e = biased - 127 - 6 + (mant7 == 127).to(tl.int32)
    return tl.where(amax < 1.0e-4, -20, e)


@triton.jit
def exp2_int(e):
    """``2.0 ** e`` for an int32 ``e`` in [-126, 127], built from its exponent bits."""
    return ((e + 127) << 23).to(tl.float32, bitcast=True)


@triton.jit
def int8_groups(z):
    """Quantise bf16-valued ``z [groups, 64]``: ``(q, e)`` with ``q`` int32 in [-127, 127] per value
    and ``e`` int32 per group, ``q = trunc(z / 2^e)`` and ``e`` the group's power-of-two exponent.

    Division by ``2^e`` is a multiplication by ``2^-e`` (exact); the int conversion truncates
    toward zero; ``|q| <= 127`` by the choice of ``e``, and the clamp only guards that.
    """
    e = pow2_scale_exponent(tl.max(tl.abs(z), axis=1))
    q = (z * exp2_int(-e)[:, None]).to(tl.int32)
    return tl.minimum(tl.maximum(q, -127), 127), e


def launch_index_kernel(kernel, args, constexprs: dict, extra: tuple = ()):
    """Launch one of the Ascend gathers that resolve their own indices, on a persistent grid.

    ``constexprs`` come from ``stages.kernel_specializations`` (``C`` and ``BLOCK_D`` among them).
    """
    n = args.num_outputs
    block_d = constexprs["BLOCK_D"]
    dev = args.device
    pooled = torch.empty(n, HEAD_DIM, dtype=torch.float32, device=dev)
    slot = torch.empty(n, dtype=torch.int64, device=dev)
    rope_pos = torch.empty(n, dtype=torch.int64, device=dev)
    st, bt = args.state_cache, args.block_table
    grid = (persistent_programs(dev, n * (HEAD_DIM // block_d)),)
    kernel[grid](
        st, args.boundary_token_indices, args.token_to_req, args.positions, args.kv_slot_mapping, bt,
        pooled, slot, rope_pos,
        n, args.token_to_req.shape[0], bt.shape[0], bt.shape[1], st.shape[0], args.kv_cache.shape[0] * SLOTS_PER_PAGE,
        args.cos_sin_cache.shape[0], args.block_size,
        st.stride(0), st.stride(1), st.stride(2), bt.stride(0), bt.stride(1), *extra,
        **constexprs,
    )
    return pooled, slot, rope_pos
