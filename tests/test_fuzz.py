"""Property-based fuzzing (hypothesis) against the independent float64 truth.

Fixed budgets and ``derandomize=True``: the same examples every run, about a minute on two cores
under the Triton interpreter. Each example runs one route drawn from all of them.

- valid inputs: any C, block sizes 1..256, several requests, int32/int64 index tensors, strided
  views, skipped slots, a non-zero cache written in place or a fresh one -> bytes as the truth;
- bad index values (exactly at and one past each bound): with validate=True a ValueError naming
  the argument and no byte changed; with validate=False no error, the bad outputs' slots
  untouched and every other output correct;
- bad metadata (type, dtype, rank, width): TypeError/ValueError naming the argument, no byte
  changed, whatever ``validate`` is.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from ascend_kvc import ASCEND_STAGES, c128_256_512_compress
from ascend_kvc.oracle import _resolve, check_cache
from ascend_kvc.indexing import plan_for
from ascend_kvc.validation import check_metadata, check_values, raise_on_bad_values

from cases import general_case

ON_NPU = hasattr(torch, "npu") and torch.npu.is_available()
DEVICE = "cuda" if torch.cuda.is_available() else "npu" if ON_NPU else "cpu"
ROUTES = ["reference", *(f"ascend:{s}" for s in ASCEND_STAGES), *([] if ON_NPU else ["gpgpu"])]
NAMES = ["state_cache", "token_to_req", "positions", "boundary_token_indices", "block_table",
         "rms_norm_weight", "cos_sin_cache", "kv_slot_mapping", "kv_cache", "block_size", "compress_ratio",
         "rms_norm_eps"]
# No shrinking: an interpreter run per step makes it slow; the failing example is printed as drawn.
FUZZ = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), print_blob=False,
            phases=(Phase.explicit, Phase.generate))


def _spread(t: torch.Tensor) -> torch.Tensor:
    """The same values as every other element of a buffer twice the size (a strided view)."""
    buf = torch.full((2 * t.numel(),), 7, dtype=t.dtype, device=t.device)
    buf[::2] = t
    return buf[::2]


@st.composite
def valid_cases(draw):
    C = draw(st.sampled_from([128, 128, 256, 512]))
    block_size = draw(st.one_of(st.integers(1, 16), st.integers(17, 256), st.sampled_from([1, 8, 64, 128, 256])))
    if C == 512 and block_size < 8:
        block_size = 8  # the interpreter walks one block per step
    num_reqs = draw(st.integers(1, 2))
    extra = draw(st.integers(0, 2 * block_size + 40))
    w = general_case(
        C, block_size, seed=draw(st.integers(0, 2**16)), num_reqs=num_reqs,
        tokens_per_req=C + extra, outputs_per_req=draw(st.integers(1, 2)),
        skip_some=draw(st.booleans()), nonzero_cache=draw(st.booleans()), device=DEVICE,
        state_dtype=draw(st.sampled_from([torch.float32, torch.float32, torch.bfloat16])),
    )
    for name in ("token_to_req", "positions", "boundary_token_indices", "block_table", "kv_slot_mapping"):
        setattr(w, name, getattr(w, name).to(draw(st.sampled_from([torch.int32, torch.int64]))))
    if draw(st.booleans()):
        for name in ("token_to_req", "positions", "boundary_token_indices", "kv_slot_mapping", "rms_norm_weight"):
            setattr(w, name, _spread(getattr(w, name)))
    if draw(st.booleans()):  # state rows further apart than 1024 values
        wide = torch.randn(*w.state_cache.shape[:2], 1536, device=DEVICE).to(w.state_cache.dtype)
        wide[..., 256:1280] = w.state_cache
        w.state_cache = wide[..., 256:1280]
    if draw(st.booleans()):
        w.rms_norm_weight = w.rms_norm_weight.float()
    return w, draw(st.sampled_from(ROUTES)), draw(st.booleans())


def _run(w, route, *, inplace=True, validate=True):
    before = w.kv_cache.clone() if inplace else torch.zeros_like(w.kv_cache)
    out = w.kv_cache.clone() if inplace else None
    got = c128_256_512_compress(*w.args(), out=out, route=route, validate=validate)
    return check_cache(w.checked_args(), got, before)


@settings(max_examples=24, **FUZZ)
@given(valid_cases())
def test_fuzz_valid_inputs_match_the_truth(case):
    w, route, inplace = case
    report = _run(w, route, inplace=inplace)
    assert report.ok, f"route {route}, C={w.compress_ratio}, block_size={w.block_size}: {report}"


# --- bad index values ---------------------------------------------------------------------------

# field -> (argument named in the error, {label: value or callable(w) -> value}); "past" values are
# invalid, "at" values are the last valid ones.
def _perturb(w, original, i, field, where):
    """Apply one defect to output ``i``; ``original[i]`` is its (token, request, position) before any."""
    tok, r, p = original[i]
    T, (R, W) = w.token_to_req.shape[0], w.block_table.shape
    C, bs = w.compress_ratio, w.block_size
    num_slots = w.kv_cache.shape[0] * 64
    if field == "boundary_token_indices":
        w.boundary_token_indices[i] = {"past": T, "below": -1, "at": T - 1}[where]
    elif field == "token_to_req":
        w.token_to_req[tok] = {"past": R, "below": -1, "at": R - 1}[where]
    elif field == "positions":
        last = min(W * bs, C * -(-w.cos_sin_cache.shape[0] // C)) - 1
        w.positions[tok] = {"past": last + 1, "below": C - 2, "at": last}[where]
    elif field == "block_table":
        col = (p - C + 1) // bs  # the window's first block column
        w.block_table[r, col] = {"past": w.state_cache.shape[0], "below": -1, "at": w.state_cache.shape[0] - 1}[where]
    elif field == "kv_slot_mapping":
        w.kv_slot_mapping[tok] = {"past": num_slots, "below": -1, "at": num_slots - 1}[where]
    elif field == "cos_sin_cache":
        pc = p // C * C
        w.cos_sin_cache = w.cos_sin_cache[: pc + (1 if where == "at" else 0)].clone()


FIELDS = ["boundary_token_indices", "token_to_req", "positions", "block_table", "kv_slot_mapping", "cos_sin_cache"]


@st.composite
def bad_value_cases(draw):
    C = draw(st.sampled_from([128, 256]))
    block_size = draw(st.sampled_from([1, 3, 8, 16, 64, 200]))
    if block_size == 1:
        C = 128  # the interpreter walks one-row blocks a row per step; C = 256 walks the same code twice as long
    w = general_case(C, block_size, seed=draw(st.integers(0, 2**16)), num_reqs=2, outputs_per_req=2,
                     skip_some=False, device=DEVICE,
                     index_dtype=draw(st.sampled_from([torch.int32, torch.int64])))
    perturbations = draw(st.lists(st.tuples(st.integers(0, w.num_outputs - 1), st.sampled_from(FIELDS),
                                            st.sampled_from(["past", "below", "at"])), min_size=1, max_size=2))
    original = [(t, int(w.token_to_req[t]), int(w.positions[t])) for t in w.boundary_token_indices.tolist()]
    for i, field, where in perturbations:
        _perturb(w, original, i, field, where)
    return w, perturbations, draw(st.sampled_from(ROUTES))


def _message(check) -> str | None:
    try:
        check()
    except ValueError as exc:
        return str(exc)
    return None


@settings(max_examples=28, **FUZZ)
@given(bad_value_cases(), st.booleans())
def test_fuzz_bad_index_values(case, validate):
    w, perturbations, route = case
    args = w.checked_args()
    # The cheap check (check_values) and the plan-based one the API may use agree, message for message.
    assert _message(lambda: check_values(args)) == _message(lambda: raise_on_bad_values(plan_for(args), args))
    res = _resolve(args)
    n_tokens = w.token_to_req.shape[0]
    b = w.boundary_token_indices.long().cpu()
    slot = w.kv_slot_mapping.long().cpu()[b.clamp(0, n_tokens - 1)]
    should_raise = bool(((b < 0) | (b >= n_tokens)).any() or ((slot >= 0) & ~res.written.cpu()).any())
    written_slots = res.slot[res.written].tolist()
    shared = len(set(written_slots)) < len(written_slots)
    out = w.kv_cache.clone()
    if validate and (should_raise or shared):
        named = {field for _, field, _ in perturbations} | ({"kv_slot_mapping"} if shared else set())
        if "positions" in named:  # a position past the end is a column past the table or a RoPE row past the cache
            named |= {"block_table", "cos_sin_cache"}
        with pytest.raises(ValueError) as info:
            c128_256_512_compress(*w.args(), out=out, route=route)
        event(f"rejected: {str(info.value).split(':')[0]}")
        assert str(info.value).split(":")[0] in named, f"{perturbations}: {info.value}"
        assert "nothing was written" in str(info.value)
        assert torch.equal(out, w.kv_cache)
        return
    got = c128_256_512_compress(*w.args(), out=out, route=route, validate=validate)
    report = check_cache(args, got, w.kv_cache)
    event(f"validate={validate}: {report.num_outputs_written} of {w.num_outputs} outputs written")
    assert report.ok, f"route {route}, validate={validate}, {perturbations}: {report}"


# --- bad metadata ----------------------------------------------------------------------------------

def _metadata_defects(w):
    """argument -> ways to break it (built lazily: only the drawn one is made)."""
    return {
        "state_cache": [lambda: w.state_cache.double(), lambda: w.state_cache[0], lambda: w.state_cache[..., :1000],
                        lambda: [[0.0] * 1024]],
        "token_to_req": [lambda: w.token_to_req.float(), lambda: w.token_to_req[:, None],
                         lambda: w.token_to_req.to(torch.int16)],
        "positions": [lambda: w.positions[:-1], lambda: w.positions.double(), lambda: 3],
        "boundary_token_indices": [lambda: w.boundary_token_indices.to(torch.int16),
                                   lambda: w.boundary_token_indices[:, None]],
        "block_table": [lambda: w.block_table.view(-1), lambda: w.block_table.float(), lambda: w.block_table[None]],
        "rms_norm_weight": [lambda: w.rms_norm_weight[:256], lambda: w.rms_norm_weight.half(),
                            lambda: w.rms_norm_weight[None]],
        "cos_sin_cache": [lambda: w.cos_sin_cache[:, :32], lambda: w.cos_sin_cache.double(),
                          lambda: w.cos_sin_cache.bfloat16()],
        "kv_slot_mapping": [lambda: w.kv_slot_mapping.float(), lambda: w.kv_slot_mapping[:-1], lambda: None],
        "kv_cache": [lambda: w.kv_cache.to(torch.int8), lambda: w.kv_cache[:, :37000], lambda: w.kv_cache[0]],
        "block_size": [lambda: 0, lambda: -8, lambda: 8.0, lambda: True, lambda: w.block_size + 1],
        "compress_ratio": [lambda: 64, lambda: 1024, lambda: 128.0, lambda: None],
        "rms_norm_eps": [lambda: float("inf"), lambda: float("nan"), lambda: -1.0, lambda: "1e-6", lambda: 0.0],
    }


@settings(max_examples=40, **FUZZ)
@given(st.sampled_from(NAMES), st.integers(0, 4), st.booleans(), st.sampled_from(ROUTES))
def test_fuzz_bad_metadata(name, k, validate, route):
    w = general_case(128, 8, seed=k, num_reqs=1, outputs_per_req=2, device=DEVICE)
    defects = _metadata_defects(w)[name]
    kwargs = dict(zip(NAMES, w.args()))
    kwargs[name] = defects[k % len(defects)]()
    out = w.kv_cache.clone()
    with pytest.raises((TypeError, ValueError)) as info:
        c128_256_512_compress(**kwargs, out=out, route=route, validate=validate)
    message = str(info.value)
    # A size that must match another argument's may be reported under either name.
    partners = {"block_size": "state_cache", "positions": "positions", "kv_slot_mapping": "kv_slot_mapping"}
    assert message.startswith(name) or message.startswith(partners.get(name, name)), message
    assert torch.equal(out, w.kv_cache)


def test_fuzz_examples_are_checked_by_the_truth():
    """The fuzz's judge is the independent truth: a flipped byte in a written slot fails it."""
    w = general_case(128, 8, seed=1, device=DEVICE)
    got = c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route="reference")
    slot = int(w.kv_slot_mapping[w.boundary_token_indices[0]])
    got[slot // 64, (slot % 64) * 576] ^= 0x40
    assert not check_cache(check_metadata(*w.args(), None), got, w.kv_cache).ok
