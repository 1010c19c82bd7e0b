"""Golden bytes of the other cache formats and of the overlapping compressor, derived by hand.

The inputs are ``test_golden``'s (C = 128, every window weight 1/128, ``c[d] = (-1)^d`` exactly,
``rrms = 1``, so ``y[d] = (-1)^d * weight[d]``), with NOPE weights chosen for each format below.
``z = bf16(y)``; each group's weight depends only on ``d % 4`` and the sign alternates, so a group's
64 values are one 4-value pattern, signs ``+ - + -``. The RoPE dims and their bytes are
``test_golden``'s.

fp8_e4m3 (OCP e4m3fn: bias 7, 3 mantissa bits, max 448 = 0x7e, subnormal step 2^-9). ``e`` is the
least integer with ``448 * 2^e >= max(amax, 1e-4)``; each value ``clamp(z * 2^-e, +-448)`` is
rounded to the nearest e4m3 value, ties to even; scale byte ``e + 127``.

   g  weight[d%4 = 0..3]                 amax       e    z * 2^-e                        e4m3 bytes
   0  1.75, 1.0625, 1.1875, 0.3          1.75       -8   448, -272, 304, -77             7e f8 7a ea
   1  1.75, 2^-19, 3*2^-17, 5*2^-18      1.75       -8   448, -2^-11, 3*2^-9, -2.5*2^-9   7e 80 03 82
   2  1.7578125, 1, 0.5, 0.25            1.7578125  -7   225, -128, 64, -32              76 f0 68 e0
   3  2^-15, 2^-16, 0, 3*2^-17           1e-4 floor -22  128, -64, 0, -96                70 e8 00 ec
   4  0.25 x4                            0.25       -10  256, -256                       78 f8 78 f8
   5  4 x4                               4          -6   256, -256                       78 f8 78 f8
   6  0.6 x4 (bf16 0.6015625)            0.6015625  -9   308, -308                       7a fa 7a fa

   - Saturation: amax 1.75 = 448 * 2^-8 exactly, so e = -8 (not -7) and amax itself is 448 = 0x7e;
     the next bf16 amax, 1.7578125, takes e = -7 (group 2), where 225 rounds to 224 (1.75 * 2^7: 76).
   - Ties to even: 272 = 1.0625 * 2^8 lies between 256 (mantissa 000) and 288 (001): 256, so -272
     is f8; 304 = 1.1875 * 2^8 between 288 (001) and 320 (010): 320 = 7a.
   - 77 = 1.203125 * 2^6 rounds to 80 (1.25 * 2^6, 1 1101 010 = ea); 308 to 320 (7a / fa).
   - Subnormals: -2^-11 is below half the least subnormal, so it is -0 = 80 (the sign kept);
     3 * 2^-9 is subnormal mantissa 3 = 03; -2.5 * 2^-9 ties between 2 and 3 steps: 2, so 82.
   - Group 3's amax 2^-15 is below the 1e-4 floor: ceil(log2(1e-4 / 448)) = ceil(-22.09) = -22.
     Its third value is +0 (weight 0): 00.
   - Scale bytes: 119 119 120 105 117 121 118 = 77 77 78 69 75 79 76, then the pad 00.

bf16 row (512 bfloat16 values, little-endian). NOPE weights ``1.00390625, 1.01171875, 0.1, 2^-20``
give ``1`` (1 + 2^-8 is the midpoint of 1 and 1 + 2^-7: to even, 3f80), ``-1.015625`` (1 + 3 * 2^-8,
the midpoint of 1 + 2^-7 and 1 + 2^-6: to even, bf82), ``0.10009765625`` (3dcd) and ``-2^-20``
(b580): bytes ``80 3f 82 bf cd 3d 80 b5`` x 112, then the RoPE bytes.

The overlapping compressor (C = 4, ``overlap=True``, state rows of 2048): for the boundary
``p = 131`` the window is rows 124..131. The older rows 124..127 hold ``kv_a = 3 * (-1)^d``,
``score_a = 0``; the newer rows 128..131 ``kv_b = -(-1)^d``, ``score_b = 0``; every other column
(kv_b and score_b of the older rows, kv_a and score_a of the newer ones, every other row) holds
value 1000 and score 8. Eight equal weights: ``c = (4 * 3 - 4) / 8 * (-1)^d = (-1)^d``, the int8
golden's ``c``; the RoPE row ``(131 // 4) * 4 = 128`` is the golden's too. So the int8 slot is
``GOLDEN_SLOT_BYTES`` exactly. A route that pooled the newer rows only would have ``c = -(-1)^d``;
one that swapped kv_a and kv_b would read the 1000s.
"""

import pytest
import torch

from ascend_kvc import RouteUnavailableError, c128_256_512_compress
from ascend_kvc.oracle import compute_truth
from ascend_kvc.validation import check_metadata

from test_golden import DEVICE, FILL, GOLDEN_SLOT, GOLDEN_SLOT_BYTES, golden_inputs

FP8_NOPE_WEIGHTS = {
    0: [1.75, 1.0625, 1.1875, 0.3], 1: [1.75, 2.0**-19, 3 * 2.0**-17, 5 * 2.0**-18],
    2: [1.7578125, 1.0, 0.5, 0.25], 3: [2.0**-15, 2.0**-16, 0.0, 3 * 2.0**-17],
    4: [0.25] * 4, 5: [4.0] * 4, 6: [0.6] * 4,
}
FP8_GROUP_BYTES = ["7ef87aea", "7e800382", "76f068e0", "70e800ec", "78f878f8", "78f878f8", "7afa7afa"]
ROPE_BYTES = bytes.fromhex("c03f80be803ec03f203f60bfc0bf803e" * 8)
FP8_GOLDEN_SLOT_BYTES = (b"".join(bytes.fromhex(g * 16) for g in FP8_GROUP_BYTES) + ROPE_BYTES
                         + bytes.fromhex("7777786975797600"))
assert len(FP8_GOLDEN_SLOT_BYTES) == 584

BF16_NOPE_WEIGHTS = [1.00390625, 1.01171875, 0.1, 2.0**-20]
BF16_GOLDEN_ROW_BYTES = bytes.fromhex("803f82bfcd3d80b5" * 112) + ROPE_BYTES
assert len(BF16_GOLDEN_ROW_BYTES) == 1024

GEOMETRIES = [(4, 255), (3, 255), (256, 200)]
SLOTS_PER_PAGE = [1, 2, 64, 128]


def fp8_inputs(block_size: int, p: int, slots_per_page: int = 64) -> dict:
    kw = golden_inputs(block_size, p)
    for g, pattern in FP8_NOPE_WEIGHTS.items():
        kw["rms_norm_weight"][64 * g:64 * g + 64] = torch.tensor(pattern).repeat(16)
    pages = GOLDEN_SLOT // slots_per_page + 2
    kw["kv_cache"] = torch.full((pages, slots_per_page * 584), FILL, dtype=torch.uint8)
    return kw


def bf16_inputs(block_size: int, p: int, four_d: bool = False) -> dict:
    kw = golden_inputs(block_size, p)
    kw["rms_norm_weight"][:448] = torch.tensor(BF16_NOPE_WEIGHTS).repeat(112)
    shape = (2, 4, 1, 512) if four_d else (2, 4, 512)
    kw["kv_cache"] = torch.full(shape, -3.0, dtype=torch.bfloat16)  # the fill, bits c040
    return kw


def overlap_inputs(block_size: int, slots_per_page: int = 64) -> dict:
    """``golden_inputs``' weights and cos/sin with C = 4 and the overlapping state described above."""
    kw = golden_inputs(4, 255)
    C, p, num_tokens = 4, 131, 136
    cols = -(-num_tokens // block_size)
    sign = torch.where(torch.arange(512) % 2 == 0, 1.0, -1.0)
    state = torch.empty(cols + 1, block_size, 2048)
    state[..., :1024], state[..., 1024:] = 1000.0, 8.0
    for t in range(p - 2 * C + 1, p + 1):
        blk, row = cols - t // block_size, t % block_size
        if t <= p - C:  # older: kv_a, score_a
            state[blk, row, :512], state[blk, row, 1024:1536] = 3 * sign, 0.0
        else:  # newer: kv_b, score_b
            state[blk, row, 512:1024], state[blk, row, 1536:] = -sign, 0.0
    slot_mapping = torch.full((num_tokens,), -1, dtype=torch.int64)
    slot_mapping[p] = GOLDEN_SLOT
    kw.update(state_cache=state, token_to_req=torch.zeros(num_tokens, dtype=torch.int32),
              positions=torch.arange(num_tokens), boundary_token_indices=torch.tensor([p, 127]),
              block_table=torch.arange(cols, 0, -1, dtype=torch.int32)[None, :], kv_slot_mapping=slot_mapping,
              kv_cache=torch.full((GOLDEN_SLOT // slots_per_page + 2, slots_per_page * 584), FILL, dtype=torch.uint8),
              block_size=block_size, compress_ratio=C)
    return kw


def _on_device(kw: dict, device=DEVICE) -> dict:
    """``kw`` with its tensors on ``device`` (the golden inputs are built on the CPU)."""
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kw.items()}


def expected_pages(kv_cache: torch.Tensor, slot_bytes: bytes) -> torch.Tensor:
    """``kv_cache`` with ``slot_bytes`` placed into slot ``GOLDEN_SLOT`` by hand (P = page width / 584)."""
    P = kv_cache.shape[1] // 584
    want = kv_cache.clone()
    page, o = divmod(GOLDEN_SLOT, P)
    golden = torch.tensor(list(slot_bytes), dtype=torch.uint8)
    want[page, o * 576:(o + 1) * 576] = golden[:576]
    want[page, P * 576 + o * 8:P * 576 + (o + 1) * 8] = golden[576:]
    return want


def _first_difference(got: torch.Tensor, want: torch.Tensor) -> str:
    diff = (got != want).nonzero()
    if diff.numel() == 0:
        return "identical"
    r, c = diff[0].tolist()
    return f"{diff.shape[0]} bytes differ; first at [{r}, {c}]: got {got[r, c]:#04x}, want {want[r, c]:#04x}"


@pytest.mark.parametrize("block_size,p", GEOMETRIES)
def test_oracle_fp8_truth_is_the_golden_bytes(block_size, p):
    truth = compute_truth(check_metadata(**fp8_inputs(block_size, p), out=None, kv_format="fp8_e4m3"))
    assert truth.slots.tolist() == [GOLDEN_SLOT]
    got = bytes(truth.expected[0].tolist())
    assert got == FP8_GOLDEN_SLOT_BYTES, _first_difference(truth.expected[:1],
                                                           torch.tensor([list(FP8_GOLDEN_SLOT_BYTES)]))
    assert truth.ambiguous_elements() == 0


@pytest.mark.parametrize("slots_per_page", SLOTS_PER_PAGE)
@pytest.mark.parametrize("block_size,p", GEOMETRIES)
def test_reference_fp8_golden_bytes(block_size, p, slots_per_page):
    kw = fp8_inputs(block_size, p, slots_per_page)
    got = c128_256_512_compress(**kw, out=kw["kv_cache"].clone(), route="reference", kv_format="fp8_e4m3")
    want = expected_pages(kw["kv_cache"], FP8_GOLDEN_SLOT_BYTES)
    assert torch.equal(got, want), f"P={slots_per_page}: {_first_difference(got, want)}"


@pytest.mark.parametrize("slots_per_page", SLOTS_PER_PAGE)
def test_reference_int8_golden_bytes_at_any_page_width(slots_per_page):
    kw = golden_inputs(3, 255)
    kw["kv_cache"] = torch.full((GOLDEN_SLOT // slots_per_page + 2, slots_per_page * 584), FILL, dtype=torch.uint8)
    got = c128_256_512_compress(**kw, out=kw["kv_cache"].clone(), route="reference")
    want = expected_pages(kw["kv_cache"], GOLDEN_SLOT_BYTES)
    assert torch.equal(got, want), f"P={slots_per_page}: {_first_difference(got, want)}"
    truth = compute_truth(check_metadata(**kw, out=None))
    assert bytes(truth.expected[0].tolist()) == GOLDEN_SLOT_BYTES and truth.slots_per_page == slots_per_page


def test_oracle_bf16_truth_is_the_golden_row():
    truth = compute_truth(check_metadata(**bf16_inputs(4, 255), out=None, kv_format="bf16"))
    assert truth.slots.tolist() == [GOLDEN_SLOT]
    assert bytes(truth.expected[0].tolist()) == BF16_GOLDEN_ROW_BYTES
    # The two NOPE ties lie on bf16 midpoints: the truth's interval admits both neighbours (112 each).
    assert truth.ambiguous_elements() == 2 * 112


@pytest.mark.parametrize("four_d", [False, True])
@pytest.mark.parametrize("block_size,p", GEOMETRIES)
def test_reference_bf16_golden_row(block_size, p, four_d):
    kw = bf16_inputs(block_size, p, four_d)
    before = kw["kv_cache"].clone()
    got = c128_256_512_compress(**kw, out=before.clone(), route="reference", kv_format="bf16")
    rows, want = got.view(-1, 512), before.view(-1, 512).clone()
    want[GOLDEN_SLOT] = torch.tensor(list(BF16_GOLDEN_ROW_BYTES), dtype=torch.uint8).view(torch.bfloat16)
    assert torch.equal(rows.view(torch.int16), want.view(torch.int16)), \
        _first_difference(rows.view(torch.int16), want.view(torch.int16))


# the default (ascend) writes 64-slot pages only
@pytest.mark.parametrize("route,slots_per_page", [("reference", 1), ("reference", 64), ("ascend", 64),
                                                  ("ascend:fused", 1), ("ascend:fused", 64)])
@pytest.mark.parametrize("block_size", [4, 3])
def test_overlap_golden_bytes(block_size, slots_per_page, route):
    kw = overlap_inputs(block_size, slots_per_page)
    on_device = _on_device(kw)
    got = c128_256_512_compress(**on_device, out=on_device["kv_cache"].clone(), route=route, overlap=True).cpu()
    want = expected_pages(kw["kv_cache"], GOLDEN_SLOT_BYTES)
    assert torch.equal(got, want), _first_difference(got, want)
    truth = compute_truth(check_metadata(**kw, out=None, overlap=True))
    assert bytes(truth.expected[0].tolist()) == GOLDEN_SLOT_BYTES and truth.ambiguous_elements() == 0


@pytest.mark.parametrize("route", ["ascend", "ascend:block-d512"])
def test_triton_routes_refuse_formats_they_do_not_compute(route):
    """The default computes the int8 slot of a 64-slot page only (with ratio 4 and the overlap), a
    study rung not the overlapping compressor either (fused and gpgpu compute all of it); asked by
    name for anything else a route says which argument, before writing (route='auto' on CPU
    tensors runs the reference)."""
    refused = [(overlap_inputs(4), dict(overlap=True), "overlap")] if route != "ascend" else []
    refused += [(fp8_inputs(4, 255), dict(kv_format="fp8_e4m3"), "kv_format"),
                (bf16_inputs(4, 255), dict(kv_format="bf16"), "kv_format"),
                (fp8_inputs(4, 255, 2), dict(), "kv_cache")]
    for kw, extra, name in refused:
        out = kw["kv_cache"].clone()
        with pytest.raises(RouteUnavailableError, match=name):
            c128_256_512_compress(**kw, out=out, route=route, **extra)
        assert torch.equal(out, kw["kv_cache"])
    kw = fp8_inputs(4, 255)
    got = c128_256_512_compress(**kw, out=kw["kv_cache"].clone(), route="auto", kv_format="fp8_e4m3")
    assert torch.equal(got, expected_pages(kw["kv_cache"], FP8_GOLDEN_SLOT_BYTES))
