"""The correctness oracle (SPEC "Correctness"): byte-exact wherever the math is unambiguous.

The truth is the reference computed in float64. Each pre-rounding value is known to within a
tolerance: 1e-5 of itself (SPEC), plus what fp32 summation of the softmax-weighted window can
lose to cancellation (a few ulps times sqrt(C) of the sum of |terms|). The bf16 values, int8
values and scale exponents that any point of that interval rounds to form the acceptable set:

- where the interval rounds to one result (almost everywhere), the bytes must be exactly that,
  which is what the fp32 reference writes;
- near a bf16 rounding midpoint or where ``amax / 127`` is near a power of two, both neighbours
  pass (the SPEC's one step; a group's int8 values are judged at the group's written scale);
- where cancellation leaves a value small next to its terms (a RoPE output ``u cos - w sin``
  close to 0, say), every result inside the tolerance passes, which can be more than one step.

The fp32 reference must itself pass. Placement, pad and untouched bytes are always exact. Tests
and benchmarks both use this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from . import reference
from .indexing import OutputPlan, plan_for
from .layout import (
    AMAX_FLOOR,
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
    ambiguous_elements: int  # values and scales whose truth interval admits more than one result
    ambiguous_differences: int  # bytes that differ from the fp32 reference yet lie inside the truth
    first_mismatch: str = ""
    mismatches: int = 0
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        head = "ok" if self.ok else f"MISMATCH ({self.mismatches} bytes): {self.first_mismatch}"
        return (
            f"{head}; {self.num_outputs_written} outputs written, {self.ambiguous_elements} ambiguous elements, "
            f"{self.ambiguous_differences} bytes differ from the fp32 reference inside the truth's tolerance"
        )


def _bf16_rne_f64(x: torch.Tensor) -> torch.Tensor:
    """Round float64 ``x`` to the nearest bf16 value (ties to even), exactly, as float64."""
    _, exp = torch.frexp(x)  # |x| = m * 2^exp, m in [0.5, 1)
    ulp = torch.ldexp(torch.ones_like(x), exp - 8)  # bf16 keeps 8 significant bits
    return torch.round(x / ulp) * ulp  # torch.round rounds half to even


def _scale_exponent_f64(amax: torch.Tensor) -> torch.Tensor:
    """``ceil(log2(max(amax, 1e-4) / 127))``, exact: a device's float64 log2 need not be exact at
    powers of two (seen on CUDA), so the estimate is corrected with exact ldexp comparisons."""
    a = amax.clamp_min(AMAX_FLOOR)
    e = torch.ceil(torch.log2(a / QMAX))
    limit = torch.full_like(a, float(QMAX))
    e = torch.where(torch.ldexp(limit, e - 1) >= a, e - 1, e)
    return torch.where(torch.ldexp(limit, e) < a, e + 1, e)


@dataclass
class Truth:
    """The float64 truth of every written output, as intervals of acceptable results.

    Each value is known to within a tolerance (the spread two correct fp32 implementations can
    have); every bf16/int8 result any point of that interval rounds to is acceptable. Where the
    interval holds one result, only that exact byte pattern passes.
    """

    outputs: torch.Tensor  # [M] indices of written outputs
    slots: torch.Tensor  # [M]
    expected: torch.Tensor  # [M, 584] fp32 reference bytes
    z_lo: torch.Tensor  # [M, 448] float64: bf16 z interval of each NOPE value
    z_hi: torch.Tensor
    e_lo: torch.Tensor  # [M, 7] float64: scale exponent interval of each group
    e_hi: torch.Tensor
    rope_lo: torch.Tensor  # [M, 64] float64: bf16 interval of each rotated value
    rope_hi: torch.Tensor

    def ambiguous_elements(self) -> int:
        return int((self.z_lo != self.z_hi).sum() + (self.e_lo != self.e_hi).sum() + (self.rope_lo != self.rope_hi).sum())


def compute_truth(args) -> Truth:
    plan = plan_for(args)
    outputs = plan.valid.nonzero().squeeze(1)
    sub = plan_subset(plan, outputs)
    common = (args.state_cache, sub, args.block_table, args.rms_norm_weight, args.cos_sin_cache,
              args.block_size, args.compress_ratio, args.rms_norm_eps)
    _, payload32, scales32 = reference.compress(*common, dtype=torch.float32)

    rows = reference.gather_window(args.state_cache, sub, args.block_table, args.block_size, args.compress_ratio)
    rows = rows.to(torch.float64)
    weights = torch.softmax(rows[..., HEAD_DIM:], dim=1)
    c64 = (rows[..., :HEAD_DIM] * weights).sum(dim=1)
    c_mag = (rows[..., :HEAD_DIM].abs() * weights).sum(dim=1)  # magnitude of the summed terms
    del rows, weights
    w = args.rms_norm_weight.to(torch.float64)
    rrms = torch.rsqrt(c64.pow(2).mean(dim=-1, keepdim=True) + args.rms_norm_eps)
    y64 = c64 * rrms * w
    tol = REL_TOL * y64.abs() + SUM_TOL_PER_SQRT_TERM * args.compress_ratio ** 0.5 * c_mag * rrms * w.abs()

    y_nope, t_nope = y64[:, :NOPE_DIM], tol[:, :NOPE_DIM]
    z_lo, z_hi = _bf16_rne_f64(y_nope - t_nope), _bf16_rne_f64(y_nope + t_nope)
    straddles = (z_lo <= 0) & (z_hi >= 0)
    abs_lo = torch.where(straddles, torch.zeros_like(z_lo), torch.minimum(z_lo.abs(), z_hi.abs()))
    abs_hi = torch.maximum(z_lo.abs(), z_hi.abs())
    e_lo = _scale_exponent_f64(abs_lo.view(-1, NOPE_GROUPS, QUANT_GROUP).amax(dim=-1))
    e_hi = _scale_exponent_f64(abs_hi.view(-1, NOPE_GROUPS, QUANT_GROUP).amax(dim=-1))

    cs = args.cos_sin_cache[sub.rope_pos].to(torch.float64)
    cos, sin = cs[:, :ROPE_PAIRS].abs(), cs[:, ROPE_PAIRS:].abs()
    rope64 = reference.rotate_rope(y64, sub.rope_pos, args.cos_sin_cache)
    tu, tw = tol[:, NOPE_DIM::2], tol[:, NOPE_DIM + 1 :: 2]
    rope_tol = torch.stack([tu * cos + tw * sin, tw * cos + tu * sin], dim=-1).view(-1, 2 * ROPE_PAIRS)
    rope_tol = rope_tol + REL_TOL * rope64.abs()

    return Truth(
        outputs=outputs, slots=sub.slot, expected=torch.cat([payload32, scales32], dim=1),
        z_lo=z_lo, z_hi=z_hi, e_lo=e_lo, e_hi=e_hi,
        rope_lo=_bf16_rne_f64(rope64 - rope_tol), rope_hi=_bf16_rne_f64(rope64 + rope_tol),
    )


def plan_subset(plan: OutputPlan, idx: torch.Tensor) -> OutputPlan:
    return OutputPlan(plan.token[idx], plan.req[idx], plan.pos[idx], plan.slot[idx], plan.rope_pos[idx], [])


def _acceptable(slot_bytes: torch.Tensor, truth: Truth) -> torch.Tensor:
    """[M, 584] bool: whether each byte belongs to a value inside its truth interval."""
    ok = torch.zeros_like(slot_bytes, dtype=torch.bool)
    # Scales: the exponent within its interval; the pad byte exactly 0.
    scale_cols = slice(PAYLOAD_BYTES, PAYLOAD_BYTES + NOPE_GROUPS)
    e = slot_bytes[:, scale_cols].to(torch.float64) - SCALE_BIAS
    scale_ok = (e >= truth.e_lo) & (e <= truth.e_hi)
    ok[:, scale_cols] = scale_ok
    ok[:, PAYLOAD_BYTES + NOPE_GROUPS :] = slot_bytes[:, PAYLOAD_BYTES + NOPE_GROUPS :] == 0
    # int8 values: inside the interval the z interval quantises to, at the slot's own scale.
    inv = torch.exp2(-e)[:, :, None]
    q = slot_bytes[:, :NOPE_DIM].view(torch.int8).to(torch.float64).view(-1, NOPE_GROUPS, QUANT_GROUP)
    q_lo = torch.trunc(torch.clamp(truth.z_lo.view_as(q) * inv, -QMAX, QMAX))
    q_hi = torch.trunc(torch.clamp(truth.z_hi.view_as(q) * inv, -QMAX, QMAX))
    ok[:, :NOPE_DIM] = ((q >= q_lo) & (q <= q_hi) & scale_ok[:, :, None]).view(-1, NOPE_DIM)
    # bf16 RoPE values: inside their interval (NaN never is).
    rope = slot_bytes[:, NOPE_DIM:PAYLOAD_BYTES].contiguous().view(torch.bfloat16).to(torch.float64)
    rope_ok = (rope >= truth.rope_lo) & (rope <= truth.rope_hi)
    ok[:, NOPE_DIM:PAYLOAD_BYTES] = rope_ok.repeat_interleave(2, dim=1)
    return ok


def _truth_of(truth: Truth, i: int, j: int) -> str:
    """What the float64 truth allows for byte ``j`` of written output ``i``, for messages."""
    if j < NOPE_DIM:
        return f" (bf16 z in [{truth.z_lo[i, j].item():.6g}, {truth.z_hi[i, j].item():.6g}])"
    if j < PAYLOAD_BYTES:
        k = (j - NOPE_DIM) // 2
        return f" (bf16 value in [{truth.rope_lo[i, k].item():.6g}, {truth.rope_hi[i, k].item():.6g}])"
    if j < PAYLOAD_BYTES + NOPE_GROUPS:
        g = j - PAYLOAD_BYTES
        return f" (exponent in [{int(truth.e_lo[i, g])}, {int(truth.e_hi[i, g])}])"
    return " (pad byte)"


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
    bad_in_slots = ~_acceptable(got_slots, truth)
    slot_mask = torch.zeros_like(got, dtype=torch.bool)
    slot_mask[page, cols] = True
    bad_outside = (got != expected_cache) & ~slot_mask

    # The fp32 reference itself must lie inside the float64 truth's intervals.
    ref_bad = ~_acceptable(truth.expected, truth)
    if bool(ref_bad.any()):
        i, j = ref_bad.nonzero()[0].tolist()
        notes.append(f"fp32 reference outside the float64 truth at output {truth.outputs[i].item()} byte {j}")

    amb_count = truth.ambiguous_elements()
    amb_diff = int((got_slots != truth.expected).sum())
    mismatches = int(bad_in_slots.sum() + bad_outside.sum() + ref_bad.sum())
    first = ""
    if bool(bad_in_slots.any()):
        # Name a byte that differs where there is one: a wrong scale also fails its group's values.
        differing = bad_in_slots & (got_slots != truth.expected)
        i, j = (differing if bool(differing.any()) else bad_in_slots).nonzero()[0].tolist()
        region = "int8 NOPE" if j < NOPE_DIM else "bf16 RoPE" if j < PAYLOAD_BYTES else (
            "scale" if j < PAYLOAD_BYTES + NOPE_GROUPS else "pad")
        first = (
            f"output {truth.outputs[i].item()} (slot {truth.slots[i].item()}) byte {j} [{region}]: "
            f"got {got_slots[i, j].item()}, expected {truth.expected[i, j].item()}{_truth_of(truth, i, j)}"
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
