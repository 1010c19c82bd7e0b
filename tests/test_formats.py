"""The cache formats, page widths and the overlapping compressor: the reference route against the
independent float64 oracle, the oracle's e4m3 rounding against torch's, the errors, and the
plumbing through the registered ops, ``compress_step`` and ``CompressorKVWriter``."""

import pytest
import torch
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ascend_kvc import c128_256_512_compress, compress_step
from ascend_kvc.layers import CompressorKVWriter
from ascend_kvc.oracle import check_cache, e4m3_bits, e4m3_round_f64, e4m3_value
from ascend_kvc.workloads import make_workload

FORMATS = ["int8", "fp8_e4m3", "bf16"]
# (C, overlap, tokens per request): the overlapping ratio 4, the plain ratio 4, and C = 128.
WINDOWS = [(4, True, 45), (4, False, 45), (128, False, 300)]


def _case(kv_format, C, overlap, tokens, slots_per_page=64, seed=0, block_size=8, **kw):
    return make_workload(2, 2 * tokens, C, block_size=block_size, shuffle=True, nonzero_cache=True, seed=seed,
                         kv_format=kv_format, overlap=overlap, slots_per_page=slots_per_page, **kw)


def _run(w, route="reference", inplace=True):
    before = w.kv_cache.clone() if inplace else torch.zeros_like(w.kv_cache)
    got = c128_256_512_compress(*w.args(), out=w.kv_cache.clone() if inplace else None, route=route,
                                **w.format_kwargs())
    return got, before


@pytest.mark.parametrize("slots_per_page", [1, 2, 64, 128])
@pytest.mark.parametrize("C,overlap,tokens", WINDOWS)
@pytest.mark.parametrize("kv_format", FORMATS)
def test_reference_matches_the_truth(kv_format, C, overlap, tokens, slots_per_page):
    w = _case(kv_format, C, overlap, tokens, slots_per_page, seed=C + slots_per_page)
    got, before = _run(w)
    report = check_cache(w.checked_args(), got, before)
    assert report.ok, f"{kv_format}, C={C}, overlap={overlap}, P={slots_per_page}: {report}"
    assert report.num_outputs_written == w.num_outputs


@pytest.mark.parametrize("kv_format", FORMATS)
def test_the_oracle_sees_one_wrong_byte(kv_format):
    """A single flipped bit in a written slot, or outside it, fails the check (the check can fail)."""
    w = _case(kv_format, 4, True, 45, slots_per_page=2)
    got, before = _run(w)
    truth_args = w.checked_args()
    written = set(w.kv_slot_mapping[w.boundary_token_indices].tolist())
    unwritten = next(s for s in range(10**6) if s not in written)
    for flip in ("inside", "outside"):
        bad = got.clone()
        raw = bad.view(-1, 512).view(torch.uint8) if kv_format == "bf16" else bad
        slot = int(w.kv_slot_mapping[w.boundary_token_indices[0]]) if flip == "inside" else unwritten
        P = 1 if kv_format == "bf16" else raw.shape[1] // 584
        r, c = slot // P, (slot % P) * (1024 if kv_format == "bf16" else 576) + 3
        raw[r, c] ^= 0x10
        report = check_cache(truth_args, bad, before)
        assert not report.ok, f"{flip}: {report}"


@pytest.mark.parametrize("kv_format", FORMATS)
def test_out_none_returns_zeros_but_the_written_slots(kv_format):
    w = _case(kv_format, 4, True, 45, slots_per_page=3)
    got, before = _run(w, inplace=False)
    assert got.shape == w.kv_cache.shape and got.dtype == w.kv_cache.dtype
    assert check_cache(w.checked_args(), got, before).ok


def test_overlap_first_window_masks_negative_positions():
    """p = 3 with overlap: the older rows would be at positions -4..-1; they are masked, so the
    output equals the plain ratio-4 window over kv_b / score_b alone."""
    w = _case("int8", 4, True, 45, seed=3)
    first = w.boundary_token_indices[w.positions[w.boundary_token_indices] == 3]
    assert first.numel() == 2
    w.boundary_token_indices = first
    got, before = _run(w)
    plain = make_workload(2, 90, 4, block_size=8, shuffle=True, nonzero_cache=True, seed=3)
    plain.state_cache = torch.cat([w.state_cache[..., 512:1024], w.state_cache[..., 1536:]], dim=-1)
    plain.kv_cache, plain.kv_slot_mapping, plain.boundary_token_indices = w.kv_cache, w.kv_slot_mapping, first
    assert plain.block_table.equal(w.block_table)
    got_plain, _ = _run(plain)
    assert torch.equal(got, got_plain)
    assert check_cache(w.checked_args(), got, before).ok


def test_e4m3_rounding_agrees_with_torch_float8():
    """The oracle's own e4m3 rounding and bits against torch.float8_e4m3fn, a second, independent
    implementation: every byte's value, every midpoint between neighbours, random values."""
    every = torch.arange(256, dtype=torch.uint8)
    values = e4m3_value(every)
    finite = ~values.isnan()
    assert torch.equal(every.view(torch.float8_e4m3fn).float().double()[finite], values[finite])
    assert torch.equal(e4m3_bits(values[finite]).to(torch.uint8), every[finite])  # -0 is 0x80
    pos = values[(values >= 0) & finite].unique().sort().values  # 0 .. 448
    mids = (pos[1:] + pos[:-1]) / 2
    g = torch.Generator().manual_seed(0)
    rand = (torch.rand(20000, generator=g, dtype=torch.float64) * 2 - 1) * 448 * 2.0 ** -torch.randint(
        0, 20, (20000,), generator=g)
    x = torch.cat([mids, -mids, pos, -pos, rand.float().double(), torch.tensor([2.0**-11, -2.0**-11, -1e-30])])
    assert torch.equal(x.float().double(), x)  # exact in float32, so torch's conversion sees the same value
    ours = e4m3_round_f64(x)
    theirs = x.float().to(torch.float8_e4m3fn)
    bad = (ours != theirs.float().double()) | (e4m3_bits(ours).to(torch.uint8) != theirs.view(torch.uint8))
    assert not bad.any(), f"first difference at x={x[bad][0].item()!r}"


@pytest.mark.parametrize("kw,exc,match", [
    (dict(kv_format="fp16"), ValueError, "kv_format must be one of"),
    (dict(kv_format=8), TypeError, "kv_format must be a str"),
    (dict(overlap=1), TypeError, "overlap must be a bool"),
    (dict(kv_format="bf16"), TypeError, "kv_cache must have dtype bfloat16"),
    (dict(overlap=True), ValueError, "overlap=True needs compress_ratio=4"),
])
def test_bad_format_arguments_name_the_argument(kw, exc, match):
    w = _case("int8", 128, False, 300)
    out = w.kv_cache.clone()
    with pytest.raises(exc, match=match):
        c128_256_512_compress(*w.args(), out=out, route="reference", **kw)
    assert torch.equal(out, w.kv_cache)


def test_bad_shapes_for_the_formats_name_the_argument():
    w = _case("int8", 4, True, 45)
    with pytest.raises(ValueError, match=r"state_cache must have size 1024 in dim 2"):
        c128_256_512_compress(*w.args(), route="reference")  # overlap state without overlap=True
    w = _case("int8", 4, False, 45)
    with pytest.raises(ValueError, match=r"state_cache must have size 2048 in dim 2 \(\[kv_a"):
        c128_256_512_compress(*w.args(), route="reference", overlap=True)
    args = list(w.args())
    args[8] = torch.zeros(2, 584 * 3 + 1, dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"kv_cache must have size 37376 .* multiple of 584"):
        c128_256_512_compress(*args, route="reference")
    args[8] = torch.zeros(2, 4, 2, 512, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"kv_cache must be shaped \[num_blocks, block_size, 512\]"):
        c128_256_512_compress(*args, route="reference", kv_format="bf16")
    args[8] = torch.zeros(2, 4, 512, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"out must be viewable as \[-1, 512\] rows"):
        c128_256_512_compress(*args, out=torch.zeros(2, 512, 4, dtype=torch.bfloat16).transpose(1, 2),
                              route="reference", kv_format="bf16")


def test_slot_past_a_narrow_page_cache_is_refused():
    w = _case("fp8_e4m3", 4, True, 45, slots_per_page=2)
    w.kv_slot_mapping[w.boundary_token_indices[1]] = w.kv_cache.shape[0] * 2
    with pytest.raises(ValueError, match=r"kv_slot_mapping: output 1 .*slot >= num_pages \* 2"):
        c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), route="reference", **w.format_kwargs())


@pytest.mark.parametrize("kv_format,overlap", [("fp8_e4m3", True), ("bf16", False)])
def test_op_layer_and_step_carry_the_format(kv_format, overlap):
    """The registered op, CompressorKVWriter (forward and step) and compress_step write what the
    function writes."""
    w = _case(kv_format, 4, overlap, 45, slots_per_page=2, seed=5)
    want, before = _run(w)
    assert check_cache(w.checked_args(), want, before).ok
    out = w.kv_cache.clone()
    torch.ops.ascend_kvc.compress_(*w.args()[:8], out, w.block_size, w.compress_ratio, w.rms_norm_eps,
                                   "reference", True, kv_format, overlap)
    assert torch.equal(out, want)
    layer = CompressorKVWriter(w.rms_norm_weight, w.cos_sin_cache, block_size=w.block_size, compress_ratio=4,
                               route="reference", kv_format=kv_format, overlap=overlap, validate=True)
    assert f"kv_format={kv_format!r}, overlap={overlap}" in repr(layer)
    out = w.kv_cache.clone()
    layer(w.state_cache, w.token_to_req, w.positions, w.boundary_token_indices, w.block_table, w.kv_slot_mapping, out)
    assert torch.equal(out, want)
    # A step: every token of the batch, the boundary tokens found by the step itself.
    out = w.kv_cache.clone()
    layer.step(w.state_cache, w.token_to_req, w.positions, w.block_table, w.kv_slot_mapping, out)
    assert torch.equal(out, want)
    out = w.kv_cache.clone()
    compress_step(w.state_cache, w.token_to_req, w.positions, w.block_table, w.rms_norm_weight, w.cos_sin_cache,
                  w.kv_slot_mapping, out, block_size=w.block_size, compress_ratio=4, rms_norm_eps=w.rms_norm_eps,
                  route="auto", kv_format=kv_format, overlap=overlap)
    assert torch.equal(out, want)
    with pytest.raises(ValueError, match="overlap=True needs compress_ratio=4"):
        CompressorKVWriter(w.rms_norm_weight, w.cos_sin_cache, block_size=8, compress_ratio=128, overlap=True)


@pytest.mark.parametrize("kv_format,overlap", [("fp8_e4m3", True), ("bf16", False)])
def test_fake_kernels_check_the_format_they_are_given(kv_format, overlap):
    """Under fake tensors (torch.compile's trace) both ops accept a good call in the format and
    window asked for, and refuse a cache of the wrong width naming kv_cache."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    w = _case(kv_format, 4, overlap, 45, slots_per_page=2, seed=6)
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(a) for a in w.args()[:9]]  # the tensors, then the scalars
        scalars = (w.block_size, w.compress_ratio, w.rms_norm_eps)
        torch.ops.ascend_kvc.compress_(*fake[:8], fake[8], *scalars, "auto", False, kv_format, overlap)
        step = [fake[k] for k in (0, 1, 2, 4, 5, 6, 7, 8)]
        torch.ops.ascend_kvc.compress_step_(*step, *scalars, None, "auto", False, kv_format, overlap)
        narrow = fake[8][..., :-1]  # a row one element short
        with pytest.raises(ValueError, match="kv_cache"):
            torch.ops.ascend_kvc.compress_(*fake[:8], narrow, *scalars, "auto", False, kv_format, overlap)


FUZZ = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), print_blob=False,
            phases=(Phase.explicit, Phase.generate), max_examples=25)


@settings(**FUZZ)
@given(kv_format=st.sampled_from(FORMATS), window=st.sampled_from(WINDOWS[:2] + [(128, False, 150)]),
       slots_per_page=st.sampled_from([1, 2, 3, 64, 128]), block_size=st.sampled_from([1, 3, 8, 16]),
       seed=st.integers(0, 2**16), state_dtype=st.sampled_from([torch.float32, torch.bfloat16]),
       scales=st.sampled_from([(1.0, 1.0), (30.0, 1e-3), (0.01, 1e4)]), inplace=st.booleans())
def test_fuzz_formats_match_the_truth(kv_format, window, slots_per_page, block_size, seed, state_dtype, scales,
                                      inplace):
    C, overlap, tokens = window
    w = _case(kv_format, C, overlap, tokens, slots_per_page, seed=seed, block_size=block_size,
              state_dtype=state_dtype, score_scale=scales[0], value_scale=scales[1])
    got, before = _run(w, inplace=inplace)
    report = check_cache(w.checked_args(), got, before)
    assert report.ok, str(report)


def test_overlap_checks_the_older_rows_blocks_and_only_those():
    """The older rows' blocks are checked (a bad one is refused, naming block_table, or with
    validate=False the output is skipped); the first window's masked rows need no block."""
    from ascend_kvc.indexing import plan_for
    from ascend_kvc.validation import check_values, raise_on_bad_values

    w = _case("int8", 4, True, 45, block_size=4, seed=8)
    args = w.checked_args()
    check_values(args)  # p = 3 outputs pool masked rows: nothing to refuse
    raise_on_bad_values(plan_for(args), args)
    # Output with p = 11 of request 0: its older rows 4..7 are block column 1, its newer rows column 2.
    (i,) = ((w.positions[w.boundary_token_indices] == 11)
            & (w.token_to_req[w.boundary_token_indices] == 0)).nonzero()[0]
    w.block_table[0, 1] = w.state_cache.shape[0]  # past the state blocks; column 1 is read by p = 7 and p = 11
    args = w.checked_args()
    for check in (lambda: check_values(args), lambda: raise_on_bad_values(plan_for(args), args)):
        with pytest.raises(ValueError, match=r"block_table: output \d+ .*block id outside state_cache"):
            check()
    out = w.kv_cache.clone()
    c128_256_512_compress(*w.args(), out=out, route="reference", validate=False, **w.format_kwargs())
    report = check_cache(args, out, w.kv_cache)
    assert report.ok and report.num_outputs_written == w.num_outputs - 2, str(report)
    slot = int(w.kv_slot_mapping[w.boundary_token_indices[i]])
    P = w.kv_cache.shape[1] // 584
    assert torch.equal(out[slot // P, (slot % P) * 576:(slot % P + 1) * 576],
                       w.kv_cache[slot // P, (slot % P) * 576:(slot % P + 1) * 576]), "a skipped output wrote"
