"""Golden cases: tiny inputs whose 584 written bytes are derived by hand below and spelled out.

Every route and Ascend stage must write exactly ``GOLDEN_SLOT_BYTES`` into slot 5 and leave every
other byte of the page at its 0xAA fill. The inputs are chosen so every step is exact and easy:

State (C = 128). Each window row holds the values ``V[d] = +1`` for even d, ``-1`` for odd d,
and scores 0. Every row outside the window (same request, earlier or later positions, and the
unused block 0) holds values 1000 and scores 8: a route that reads even one of them is far off.

1. Softmax: equal scores, so every weight is 1/128 and ``c[d] = V[d] = (-1)^d`` exactly.
2. RMSNorm with eps = 2^-126, the least eps accepted: ``mean(c^2) = 1`` and ``1 + 2^-126`` rounds
   to 1 (in float32 and float64), ``rsqrt(1) = 1``, so ``y[d] = (-1)^d * weight[d]``.
   The weight is float32 (accepted by the API), so y need not be a bf16 value.
3. NOPE group g (dims 64g..64g+63): weight[d] depends only on d % 4, so each group's 64 bytes
   are one 4-byte pattern repeated 16 times. ``e`` is the least integer with ``127 * 2^e >= amax``
   (= ceil(log2(amax / 127))), ``q = trunc(z * 2^-e)`` (toward zero), scale byte ``e + 127``.

   g  weight[d%4 = 0..3]        y = (-1)^d * weight         z = bf16(y)
   0  1, 0.3, 0.5, 0.75         1, -0.3, 0.5, -0.75         1, -0.30078125, 0.5, -0.75
   1  1.9921875, 1, 0.3, 0.1    1.9921875, -1, 0.3, -0.1    .., -1, 0.30078125, -0.10009765625
   2  2^-15, 2^-16, 0, 3*2^-17  2^-15, -2^-16, 0, -3*2^-17  same (powers of two)
   3  100, 3, 2^-7, 7           100, -3, 0.0078125, -7      same (short mantissas)
   4  0.25 (all four)           0.25, -0.25, ..             same
   5  4 (all four)              4, -4, ..                   same
   6  0.6 (all four)            0.6, -0.6, ..               0.6015625, -0.6015625, ..

   g  amax        e    q = trunc(z * 2^-e)              bytes
   0  1           -6   64, -19 (-19.25), 32, -48        40 ed 20 d0
   1  1.9921875   -5   63 (63.75), -32, 9 (9.625), -3   3f e0 09 fd
   2  3.05e-5     -20  32, -16, 0, -24                  20 f0 00 e8
   3  100         0    100, -3, 0 (0.0078), -7          64 fd 00 f9
   4  0.25        -8   64, -64, ..                      40 c0 40 c0
   5  4           -4   64, -64, ..                      40 c0 40 c0
   6  0.6015625   -7   77, -77, ..                      4d b3 4d b3

   - bf16 rounding: 0.3 = 1.0011001|1001..b * 2^-2 rounds up to 1.0011010b * 2^-2 = 0.30078125;
     0.1 = 1.1001100|1100..b * 2^-4 -> 1.1001101b * 2^-4 = 0.10009765625; 0.6 -> 0.6015625.
   - Group 1's amax 1.9921875 = 1.1111111b has the bf16 mantissa 127: 127 * 2^-6 = 1.984375 is
     just below it, so e = -5, not -6 (an exponent read off the bits without the mantissa-127
     correction gives -6 and q = 127).
   - Group 2's amax 2^-15 ~ 3.05e-5 is below the 1e-4 floor: e = ceil(log2(1e-4 / 127)) = -20.
   - Negative values truncate toward zero: -19.25 -> -19 (0xed), not -20 (floor).
   - Scale bytes e + 127: 121 122 107 127 119 123 120 = 79 7a 6b 7f 77 7b 78, then the pad 00.
4. RoPE (dims 448..511, pairs (448 + 2k, 449 + 2k)): weight 1.5 on even dims, 0.25 on odd, so
   every pair is u = 1.5, w = -0.25. The angle is read from cos_sin_cache row (p // C) * C = 128,
   whose (cos_k, sin_k) depend on k % 4; every other row holds cos = 2, sin = 3.

   k%4  cos, sin    u' = u cos - w sin    w' = w cos + u sin    bf16 bits       bytes (little-endian)
   0    1, 0        1.5                   -0.25                 3fc0 be80       c0 3f 80 be
   1    0, 1        0.25                  1.5                   3e80 3fc0       80 3e c0 3f
   2    0.5, -0.5   0.75 - 0.125 = 0.625  -0.125 - 0.75 = -0.875  3f20 bf60     20 3f 60 bf
   3    -1, 0       -1.5                  0.25                  bfc0 3e80       c0 bf 80 3e

   Rotating the other way (u cos + w sin, w cos - u sin) would write 80 be c0 bf for k % 4 = 1.
   The table has exactly 129 rows, so row 128 is its last: the boundary of the row check.

A second output (boundary token 127, slot -1) must be skipped.

The zero window (``ZERO_WINDOW_SLOT_BYTES``): the same inputs with every window value 0 (scores
still 0) and the RoPE row's cos/sin all positive. ``c = 0`` exactly, ``mean(c^2) + eps = 2^-126``,
``rsqrt = 2^63`` (finite: eps is a normal float32), ``y = 0 * 2^63 * weight = +0`` (every weight
is >= 0). Each group's ``amax = max(0, 1e-4)``, so ``e = -20`` and the scale byte is
``-20 + 127 = 107 = 0x6b``; every int8 is 0; ``u' = 0 cos - 0 sin`` and ``w' = 0 cos + 0 sin``
are +0 for cos, sin > 0 (bf16 bits 0000). With eps = 0 this window was 0 * rsqrt(0) = NaN, and
the routes wrote different bytes for it; eps = 0 is now refused.
"""

import pytest
import torch

from ascend_kvc import ASCEND_STAGES, c128_256_512_compress, route_names
from ascend_kvc.oracle import check_cache, compute_truth
from ascend_kvc.validation import check_metadata

GOLDEN_SLOT_BYTES = bytes.fromhex(
    # NOPE group 0: 40 ed 20 d0 x 16
    "40ed20d040ed20d040ed20d040ed20d040ed20d040ed20d040ed20d040ed20d0"
    "40ed20d040ed20d040ed20d040ed20d040ed20d040ed20d040ed20d040ed20d0"
    # group 1: 3f e0 09 fd x 16
    "3fe009fd3fe009fd3fe009fd3fe009fd3fe009fd3fe009fd3fe009fd3fe009fd"
    "3fe009fd3fe009fd3fe009fd3fe009fd3fe009fd3fe009fd3fe009fd3fe009fd"
    # group 2: 20 f0 00 e8 x 16
    "20f000e820f000e820f000e820f000e820f000e820f000e820f000e820f000e8"
    "20f000e820f000e820f000e820f000e820f000e820f000e820f000e820f000e8"
    # group 3: 64 fd 00 f9 x 16
    "64fd00f964fd00f964fd00f964fd00f964fd00f964fd00f964fd00f964fd00f9"
    "64fd00f964fd00f964fd00f964fd00f964fd00f964fd00f964fd00f964fd00f9"
    # group 4: 40 c0 40 c0 x 16
    "40c040c040c040c040c040c040c040c040c040c040c040c040c040c040c040c0"
    "40c040c040c040c040c040c040c040c040c040c040c040c040c040c040c040c0"
    # group 5: 40 c0 40 c0 x 16
    "40c040c040c040c040c040c040c040c040c040c040c040c040c040c040c040c0"
    "40c040c040c040c040c040c040c040c040c040c040c040c040c040c040c040c0"
    # group 6: 4d b3 4d b3 x 16
    "4db34db34db34db34db34db34db34db34db34db34db34db34db34db34db34db3"
    "4db34db34db34db34db34db34db34db34db34db34db34db34db34db34db34db3"
    # RoPE pairs k = 0..31: (c0 3f 80 be | 80 3e c0 3f | 20 3f 60 bf | c0 bf 80 3e) x 8
    "c03f80be803ec03f203f60bfc0bf803ec03f80be803ec03f203f60bfc0bf803e"
    "c03f80be803ec03f203f60bfc0bf803ec03f80be803ec03f203f60bfc0bf803e"
    "c03f80be803ec03f203f60bfc0bf803ec03f80be803ec03f203f60bfc0bf803e"
    "c03f80be803ec03f203f60bfc0bf803ec03f80be803ec03f203f60bfc0bf803e"
    # scale bytes e + 127 for groups 0..6, then the pad byte
    "797a6b7f777b7800"
)
assert len(GOLDEN_SLOT_BYTES) == 584
ZERO_WINDOW_SLOT_BYTES = bytes(448) + bytes(128) + bytes.fromhex("6b6b6b6b6b6b6b00")
assert len(ZERO_WINDOW_SLOT_BYTES) == 584

GOLDEN_SLOT = 5  # page 0, payload bytes 2880..3455, scale bytes 36904..36911
FILL = 0xAA

ON_NPU = hasattr(torch, "npu") and torch.npu.is_available()
DEVICE = "cuda" if torch.cuda.is_available() else "npu" if ON_NPU else "cpu"
# Triton routes run under the CPU interpreter without an accelerator; "auto" is one of the others.
# On an NPU only the Ascend ladder (and the reference) is promised.
ROUTES = [r for r in route_names() if r != "auto" and not (ON_NPU and r == "gpgpu")]
if "fused" in ASCEND_STAGES and "ascend:fused" not in ROUTES:
    ROUTES.append("ascend:fused")

# (block_size, boundary position p): blocks of 4 (window = whole blocks 32..63), of 3 (the window
# starts at row 2 of one block and ends at row 0 of another), of 256 (the window, rows 73..200,
# lies inside one block that also holds rows before and after it).
GEOMETRIES = [(4, 255), (3, 255), (256, 200)]


def golden_inputs(block_size: int, p: int, device: str = "cpu") -> dict:
    C = 128
    num_tokens = 256
    cols = -(-num_tokens // block_size)
    num_blocks = cols + 1  # block 0 is never in the table
    # Column c of the request lives in block cols - c: the table runs backwards.
    block_table = torch.arange(cols, 0, -1, dtype=torch.int32)[None, :]

    d = torch.arange(512)
    sign = torch.where(d % 2 == 0, 1.0, -1.0)
    state = torch.empty(num_blocks, block_size, 1024)
    state[..., :512] = 1000.0  # poison: rows outside any window
    state[..., 512:] = 8.0
    t = torch.arange(p - C + 1, p + 1)
    col = t // block_size
    state[cols - col, t % block_size, :512] = sign
    state[cols - col, t % block_size, 512:] = 0.0

    nope = {0: [1.0, 0.3, 0.5, 0.75], 1: [1.9921875, 1.0, 0.3, 0.1], 2: [2.0**-15, 2.0**-16, 0.0, 3 * 2.0**-17],
            3: [100.0, 3.0, 2.0**-7, 7.0], 4: [0.25] * 4, 5: [4.0] * 4, 6: [0.6] * 4}
    weight = torch.empty(512, dtype=torch.float32)
    for g, pattern in nope.items():
        weight[64 * g:64 * g + 64] = torch.tensor(pattern).repeat(16)
    weight[448::2] = 1.5
    weight[449::2] = 0.25

    cos_sin = torch.empty(129, 64)
    cos_sin[:, :32], cos_sin[:, 32:] = 2.0, 3.0
    k = torch.arange(32) % 4
    cos_sin[128, :32] = torch.tensor([1.0, 0.0, 0.5, -1.0])[k]
    cos_sin[128, 32:] = torch.tensor([0.0, 1.0, -0.5, 0.0])[k]

    slot_mapping = torch.full((num_tokens,), -1, dtype=torch.int64)
    slot_mapping[p] = GOLDEN_SLOT
    kw = dict(
        state_cache=state, token_to_req=torch.zeros(num_tokens, dtype=torch.int32),
        positions=torch.arange(num_tokens), boundary_token_indices=torch.tensor([p, 127]),
        block_table=block_table, rms_norm_weight=weight, cos_sin_cache=cos_sin,
        kv_slot_mapping=slot_mapping, kv_cache=torch.full((1, 37376), FILL, dtype=torch.uint8),
        block_size=block_size, compress_ratio=C, rms_norm_eps=2.0**-126,
    )
    return {name: v.to(device) if isinstance(v, torch.Tensor) else v for name, v in kw.items()}


def zero_window_inputs(device: str = "cpu") -> dict:
    """``golden_inputs(4, 255)`` with every window value 0 and cos = 0.6, sin = 0.8 at row 128."""
    kw = golden_inputs(4, 255)
    t = torch.arange(255 - 128 + 1, 256)
    kw["state_cache"][64 - t // 4, t % 4, :512] = 0.0
    kw["cos_sin_cache"][128, :32], kw["cos_sin_cache"][128, 32:] = 0.6, 0.8
    return {name: v.to(device) if isinstance(v, torch.Tensor) else v for name, v in kw.items()}


def _expected_page(slot_bytes: bytes = GOLDEN_SLOT_BYTES) -> torch.Tensor:
    page = torch.full((37376,), FILL, dtype=torch.uint8)
    golden = torch.tensor(list(slot_bytes), dtype=torch.uint8)
    page[GOLDEN_SLOT * 576:(GOLDEN_SLOT + 1) * 576] = golden[:576]
    page[36864 + GOLDEN_SLOT * 8:36864 + (GOLDEN_SLOT + 1) * 8] = golden[576:]
    return page[None, :]


def _first_difference(got: torch.Tensor, want: torch.Tensor) -> str:
    diff = (got != want).nonzero()
    if diff.numel() == 0:
        return "identical"
    _, col = diff[0].tolist()
    return f"{diff.shape[0]} bytes differ; first at page column {col}: got {got[0, col]:#04x}, want {want[0, col]:#04x}"


@pytest.mark.parametrize("block_size,p", GEOMETRIES)
@pytest.mark.parametrize("route", ROUTES)
def test_golden_bytes(route, block_size, p):
    kw = golden_inputs(block_size, p, DEVICE)
    out = kw["kv_cache"].clone()
    got = c128_256_512_compress(**kw, out=out, route=route).cpu()
    want = _expected_page()
    assert torch.equal(got, want), f"route {route}, block_size {block_size}: {_first_difference(got, want)}"


@pytest.mark.parametrize("block_size,p", GEOMETRIES)
def test_oracle_truth_is_the_golden_bytes(block_size, p):
    """The float64 truth, built without any route code, derives the same 584 bytes exactly."""
    kw = golden_inputs(block_size, p)
    truth = compute_truth(check_metadata(**kw, out=None))
    assert truth.outputs.tolist() == [0] and truth.slots.tolist() == [GOLDEN_SLOT]
    assert bytes(truth.expected[0].tolist()) == GOLDEN_SLOT_BYTES
    assert truth.ambiguous_elements() == 0


@pytest.mark.parametrize("route", ROUTES)
def test_zero_window_golden_bytes(route):
    """An all-zero window at the least eps: y = +0, every route writes int8 0, scale 107, RoPE +0."""
    kw = zero_window_inputs(DEVICE)
    before = kw["kv_cache"].clone()
    got = c128_256_512_compress(**kw, out=before.clone(), route=route)
    want = _expected_page(ZERO_WINDOW_SLOT_BYTES)
    assert torch.equal(got.cpu(), want), f"route {route}: {_first_difference(got.cpu(), want)}"
    report = check_cache(check_metadata(**kw, out=None), got, before)
    assert report.ok and report.num_outputs_written == 1, str(report)


# One route per place the RMSNorm is computed: the framework finalize (reference.rms_norm), the
# block-d512 kernel, the default's planned gather or window merge, slot_bytes.py (fused, gpgpu).
RANGE_ROUTES = [r for r in ("reference", "ascend:block-gather", "ascend:block-d512", "ascend", "ascend:fused",
                            "gpgpu") if r in ROUTES]


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the interpreter's float32 sum, on purpose
@pytest.mark.parametrize("route", RANGE_ROUTES)
def test_float32_range_of_the_pooled_vector(route):
    """docs/CONTRACT.md, "Range": the golden window scaled by 2^58 has sum(c^2) = 512 * 2^116 = 2^125,
    inside the range, and RMSNorm is scale-invariant: the golden bytes exactly. Scaled by 2^60,
    sum(c^2) = 2^129 overflows float32: every route writes y = 0 (int8 0, scale 107, RoPE +-0),
    the float64 truth is finite, and the oracle leaves the output unjudged, its placement exact."""
    for scale, inside in ((2.0**58, True), (2.0**60, False)):
        kw = golden_inputs(4, 255)
        t = torch.arange(128, 256)
        kw["state_cache"][64 - t // 4, t % 4, :512] *= scale
        kw = {name: v.to(DEVICE) if isinstance(v, torch.Tensor) else v for name, v in kw.items()}
        before = kw["kv_cache"].clone()
        got = c128_256_512_compress(**kw, out=before.clone(), route=route)
        report = check_cache(check_metadata(**kw, out=None), got, before)
        assert report.ok and report.num_outputs_written == 1, str(report)
        assert report.out_of_range == (0 if inside else 1), str(report)
        if inside:
            want = _expected_page()
            assert torch.equal(got.cpu(), want), f"route {route}: {_first_difference(got.cpu(), want)}"
            continue
        page = got.cpu()[0]
        payload, scales = page[GOLDEN_SLOT * 576:(GOLDEN_SLOT + 1) * 576], page[36864 + GOLDEN_SLOT * 8:][:8]
        assert payload[:448].eq(0).all(), "int8 values of y = 0"
        assert bytes(scales.tolist()) == bytes.fromhex("6b6b6b6b6b6b6b00"), "scale bytes of y = 0"
        assert (payload[448:].view(torch.int16) & 0x7FFF).eq(0).all(), "RoPE values of y = 0 (either sign)"


def test_oracle_still_judges_the_placement_of_unjudged_outputs():
    """Outside the range only the slot's bytes are free: a byte changed elsewhere still fails, and
    a NaN in the window also puts the output outside."""
    kw = golden_inputs(4, 255)
    kw["state_cache"][64 - 200 // 4, 200 % 4, 7] = float("nan")
    args = check_metadata(**kw, out=None)
    assert compute_truth(args).in_range.tolist() == [False]
    got = kw["kv_cache"].clone()
    got[0, GOLDEN_SLOT * 576:(GOLDEN_SLOT + 1) * 576] = 0x55  # anything, in its own slot
    assert check_cache(args, got, kw["kv_cache"]).ok
    got[0, 0] ^= 1  # slot 0's first byte: not this output's
    report = check_cache(args, got, kw["kv_cache"])
    assert not report.ok and "is not a written slot's byte but changed" in report.first_mismatch


def test_oracle_truth_of_the_zero_window():
    truth = compute_truth(check_metadata(**zero_window_inputs(), out=None))
    assert bytes(truth.expected[0].tolist()) == ZERO_WINDOW_SLOT_BYTES
    assert truth.ambiguous_elements() == 0
