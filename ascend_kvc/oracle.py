"""The correctness oracle (SPEC "Correctness"): byte-exact wherever the math is unambiguous.

The truth is the reference computed in float64. An element is *ambiguous* where two correct
fp32 implementations that sum in different orders may round it differently: a value within
~1e-5 (relative to the magnitude of the terms that formed it) of a bf16 rounding midpoint, or a
group maximum whose ``amax / 127`` lies that close to a power of two. Everywhere else the bytes
must equal the fp32 reference's exactly, and the fp32 reference must equal the float64 truth;
ambiguous elements may differ by one step (one int8 step, one bf16 step, one scale step with the
group's int8 values requantised at the other scale). Placement, pad and untouched bytes are
always exact. Tests and benchmarks both use this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from . import reference
from .indexing import OutputPlan, plan_for
from .layout import (
    HEAD_DIM,
    NOPE_DIM,
    NOPE_GROUPS,
    PAYLOAD_BYTES,
    QMAX,
    QUANT_GROUP,
    ROPE_PAIRS,
    SCALE_BIAS,
    SCALE_BYTES,
    SCALE_REGION,
    SLOTS_PER_PAGE,
    slot_byte_columns,
)

REL_TOL = 1.0e-5  # relative to the value itself (SPEC)
# fp32 error of a C-term softmax-weighted sum grows like sqrt(C) ulps of the sum of |terms|; the
# part of a value's tolerance that comes from cancellation in that sum.
SUM_TOL_PER_SQRT_TERM = 2.0e-7


@dataclass
class OracleReport:
    ok: bool
    num_outputs_written: int
    ambiguous_elements: int  # elements (int8 value, bf16 value, scale) marked ambiguous
    ambiguous_differences: int  # of those, how many differ from the fp32 reference (by one step)
    first_mismatch: str = ""
    mismatches: int = 0
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        head = "ok" if self.ok else f"MISMATCH ({self.mismatches} bytes): {self.first_mismatch}"
        return (
            f"{head}; {self.num_outputs_written} outputs written, {self.ambiguous_elements} ambiguous elements, "
            f"{self.ambiguous_differences} differ by one step"
        )


def _bf16_midpoint_distance(x: torch.Tensor) -> torch.Tensor:
    """Distance (float64) from each x to the nearest bf16 rounding midpoint of its binade."""
    mant, exp = torch.frexp(x.abs())  # |x| = mant * 2^exp, mant in [0.5, 1)
    ulp = torch.ldexp(torch.ones_like(x), exp - 8)
    frac = x.abs() / ulp
    return (frac - torch.floor(frac) - 0.5).abs() * ulp


def _power_of_two_distance(x: torch.Tensor) -> torch.Tensor:
    """Relative distance (float64) from x > 0 to the nearest power of two."""
    l2 = torch.log2(x)
    return (l2 - torch.round(l2)).abs() * 0.6931471805599453


@dataclass
class Truth:
    """Everything the oracle needs about the valid outputs, for the fp32 and float64 references."""

    outputs: torch.Tensor  # [M] indices of written outputs
    slots: torch.Tensor  # [M]
    expected: torch.Tensor  # [M, 584] fp32 reference bytes
    truth: torch.Tensor  # [M, 584] float64 truth bytes
    ambiguous_value: torch.Tensor  # [M, 448 + 64] bool: one-step tolerance on this int8 / bf16 value
    ambiguous_scale: torch.Tensor  # [M, 7] bool
    z32: torch.Tensor  # [M, 448] fp32 reference z = bf16(y), for requantising at another scale


def compute_truth(args) -> Truth:
    plan = plan_for(args)
    outputs = plan.valid.nonzero().squeeze(1)
    sub = plan_subset(plan, outputs)
    common = (args.state_cache, sub, args.block_table, args.rms_norm_weight, args.cos_sin_cache,
              args.block_size, args.compress_ratio, args.rms_norm_eps)
    y32, payload32, scales32 = reference.compress(*common, dtype=torch.float32)

    rows = reference.gather_window(args.state_cache, sub, args.block_table, args.block_size, args.compress_ratio)
    rows = rows.to(torch.float64)
    weights = torch.softmax(rows[..., HEAD_DIM:], dim=1)
    c64 = (rows[..., :HEAD_DIM] * weights).sum(dim=1)
    c_mag = (rows[..., :HEAD_DIM].abs() * weights).sum(dim=1)  # magnitude of the summed terms
    del rows, weights
    w = args.rms_norm_weight.to(torch.float64)
    rrms = torch.rsqrt(c64.pow(2).mean(dim=-1, keepdim=True) + args.rms_norm_eps)
    y64 = c64 * rrms * w
    y_cond = SUM_TOL_PER_SQRT_TERM * args.compress_ratio ** 0.5 * c_mag * rrms * w.abs()
    payload64, scales64 = reference.pack_slot_bytes(y64, sub.rope_pos, args.cos_sin_cache)

    # NOPE values: y near a bf16 midpoint.
    tol = REL_TOL * y64.abs() + y_cond
    amb_nope = _bf16_midpoint_distance(y64[:, :NOPE_DIM]) <= tol[:, :NOPE_DIM]
    # Group scales: amax/127 near a power of two, or the group's largest |y| itself ambiguous.
    z64 = y64[:, :NOPE_DIM].to(torch.bfloat16).to(torch.float64).view(-1, NOPE_GROUPS, QUANT_GROUP)
    amax = z64.abs().amax(dim=-1).clamp_min(1.0e-4)
    amb_scale = _power_of_two_distance(amax / QMAX) <= REL_TOL
    top = y64[:, :NOPE_DIM].abs().view(-1, NOPE_GROUPS, QUANT_GROUP).argmax(dim=-1, keepdim=True)
    amb_scale |= amb_nope.view(-1, NOPE_GROUPS, QUANT_GROUP).gather(2, top).squeeze(2)
    # RoPE outputs: rotated value near a bf16 midpoint.
    cs = args.cos_sin_cache[sub.rope_pos].to(torch.float64)
    cos, sin = cs[:, :ROPE_PAIRS].abs(), cs[:, ROPE_PAIRS:].abs()
    rope64 = reference.rotate_rope(y64, sub.rope_pos, args.cos_sin_cache)
    tu, tw = tol[:, NOPE_DIM::2], tol[:, NOPE_DIM + 1 :: 2]
    rope_tol = torch.stack([tu * cos + tw * sin, tw * cos + tu * sin], dim=-1).view(-1, 2 * ROPE_PAIRS)
    amb_rope = _bf16_midpoint_distance(rope64) <= rope_tol + REL_TOL * rope64.abs()

    z32 = y32[:, :NOPE_DIM].to(torch.bfloat16).to(torch.float32)
    return Truth(
        outputs=outputs,
        slots=sub.slot,
        expected=torch.cat([payload32, scales32], dim=1),
        truth=torch.cat([payload64, scales64], dim=1),
        ambiguous_value=torch.cat([amb_nope, amb_rope], dim=1),
        ambiguous_scale=amb_scale,
        z32=z32,
    )


def plan_subset(plan: OutputPlan, idx: torch.Tensor) -> OutputPlan:
    return OutputPlan(plan.token[idx], plan.req[idx], plan.pos[idx], plan.slot[idx], plan.rope_pos[idx], [])


def _allowed(got: torch.Tensor, expected: torch.Tensor, truth: Truth) -> torch.Tensor:
    """[M, 584] bool: where ``got`` may differ from the fp32 reference."""
    allowed = torch.zeros_like(got, dtype=torch.bool)
    # int8 NOPE values: one step where the value is ambiguous.
    g8 = got[:, :NOPE_DIM].view(torch.int8).int()
    e8 = expected[:, :NOPE_DIM].view(torch.int8).int()
    allowed[:, :NOPE_DIM] = truth.ambiguous_value[:, :NOPE_DIM] & ((g8 - e8).abs() <= 1)
    # Groups whose scale is ambiguous: the implementation's scale within one step, its values
    # within one step of the fp32 z requantised at that scale.
    g_scale = got[:, PAYLOAD_BYTES : PAYLOAD_BYTES + NOPE_GROUPS].int()
    e_scale = expected[:, PAYLOAD_BYTES : PAYLOAD_BYTES + NOPE_GROUPS].int()
    scale_ok = truth.ambiguous_scale & ((g_scale - e_scale).abs() <= 1)
    allowed[:, PAYLOAD_BYTES : PAYLOAD_BYTES + NOPE_GROUPS] = scale_ok
    e = (g_scale - SCALE_BIAS).to(torch.float32)[:, :, None]
    q_alt = torch.trunc(torch.clamp(truth.z32.view(-1, NOPE_GROUPS, QUANT_GROUP) * torch.exp2(-e), -QMAX, QMAX))
    q_ok = scale_ok[:, :, None] & ((g8.view(-1, NOPE_GROUPS, QUANT_GROUP) - q_alt.int()).abs() <= 1)
    allowed[:, :NOPE_DIM] |= q_ok.view(-1, NOPE_DIM)
    # bf16 RoPE values: one step of the 16-bit pattern where the value is ambiguous.
    rope_cols = slice(NOPE_DIM, PAYLOAD_BYTES)
    g16 = got[:, rope_cols].contiguous().view(torch.int16).int()
    e16 = expected[:, rope_cols].contiguous().view(torch.int16).int()
    ok16 = truth.ambiguous_value[:, NOPE_DIM:] & ((g16 - e16).abs() <= 1)
    allowed[:, rope_cols] = ok16.repeat_interleave(2, dim=1)
    return allowed


def check_cache(args, got: torch.Tensor, before: torch.Tensor, truth: Truth | None = None) -> OracleReport:
    """Compare a written cache ``got`` with what the contract says it must hold.

    ``before`` is what the cache held before the call: zeros for ``out=None``, the original bytes
    for an in-place write. Every byte outside the written slots must keep its ``before`` value.
    """
    truth = truth or compute_truth(args)
    notes = []
    page, cols = slot_byte_columns(truth.slots)
    expected_cache = before.clone()
    expected_cache[page, cols] = truth.expected

    got_slots = got[page, cols]
    allowed = _allowed(got_slots, truth.expected, truth)
    bad_in_slots = (got_slots != truth.expected) & ~allowed
    slot_mask = torch.zeros_like(got, dtype=torch.bool)
    slot_mask[page, cols] = True
    bad_outside = (got != expected_cache) & ~slot_mask

    # The fp32 reference itself must agree with the float64 truth where nothing is ambiguous.
    ref_bad = (truth.expected != truth.truth) & ~_allowed(truth.truth, truth.expected, truth)
    if bool(ref_bad.any()):
        i, j = ref_bad.nonzero()[0].tolist()
        notes.append(f"fp32 reference differs from float64 truth at output {truth.outputs[i].item()} byte {j}")

    amb_count = int(truth.ambiguous_value.sum() + truth.ambiguous_scale.sum())
    amb_diff = int(((got_slots != truth.expected) & allowed).sum())
    mismatches = int(bad_in_slots.sum() + bad_outside.sum() + ref_bad.sum())
    first = ""
    if bool(bad_in_slots.any()):
        i, j = bad_in_slots.nonzero()[0].tolist()
        region = "int8 NOPE" if j < NOPE_DIM else "bf16 RoPE" if j < PAYLOAD_BYTES else (
            "scale" if j < PAYLOAD_BYTES + NOPE_GROUPS else "pad")
        first = (
            f"output {truth.outputs[i].item()} (slot {truth.slots[i].item()}) byte {j} [{region}]: "
            f"got {got_slots[i, j].item()}, expected {truth.expected[i, j].item()}"
        )
    elif bool(bad_outside.any()):
        p, c = bad_outside.nonzero()[0].tolist()
        in_page = c // PAYLOAD_BYTES if c < SCALE_REGION else (c - SCALE_REGION) // SCALE_BYTES
        first = (
            f"byte [{p}, {c}] (slot {p * SLOTS_PER_PAGE + in_page}) is not a written slot's byte but changed: "
            f"got {got[p, c].item()}, expected {expected_cache[p, c].item()}"
        )
    elif notes:
        first = notes[0]
    return OracleReport(
        ok=mismatches == 0, num_outputs_written=int(truth.outputs.numel()), ambiguous_elements=amb_count,
        ambiguous_differences=amb_diff, first_mismatch=first, mismatches=mismatches, notes=notes,
    )
