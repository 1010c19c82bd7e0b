"""Every bad input docs/CONTRACT.md lists: a TypeError/ValueError naming the argument, and no byte written."""

import pytest
import torch

from ascend_kvc import ASCEND_STAGES, c128_256_512_compress
from ascend_kvc.routes import RouteUnavailableError

from cases import general_case

NAMES = ["state_cache", "token_to_req", "positions", "boundary_token_indices", "block_table",
         "rms_norm_weight", "cos_sin_cache", "kv_slot_mapping", "kv_cache", "block_size", "compress_ratio",
         "rms_norm_eps"]


def _call(w, route="reference", **overrides):
    kwargs = dict(zip(NAMES, w.args()))
    out = overrides.pop("out", None)
    kwargs.update(overrides)
    return c128_256_512_compress(**kwargs, out=out, route=route)


def _expect(w, exc, match, **overrides):
    out = overrides.get("out", w.kv_cache.clone())
    snapshot = out.clone()
    kv_before = w.kv_cache.clone()
    with pytest.raises(exc, match=match) as info:
        _call(w, **{**overrides, "out": out})
    assert torch.equal(out, snapshot), "bytes changed on a rejected call"
    assert torch.equal(w.kv_cache, kv_before)
    print(f"{exc.__name__}: {info.value}")  # shown with pytest -s: the messages users see
    return info.value


@pytest.fixture
def w():
    return general_case(128, 8, seed=21)


# --- metadata: dtype, rank, width, device, scalars -------------------------------------------

@pytest.mark.parametrize("name,bad,exc,match", [
    ("state_cache", lambda w: w.state_cache.double(), TypeError, "state_cache must have dtype"),
    ("state_cache", lambda w: w.state_cache[0], ValueError, "state_cache must have rank 3"),
    ("state_cache", lambda w: w.state_cache[..., :1000], ValueError, "state_cache must have size 1024"),
    ("token_to_req", lambda w: w.token_to_req.float(), TypeError, "token_to_req must have dtype"),
    ("token_to_req", lambda w: w.token_to_req[:, None], ValueError, "token_to_req must have rank 1"),
    ("positions", lambda w: w.positions[:-1], ValueError, "positions must have num_tokens"),
    ("boundary_token_indices", lambda w: w.boundary_token_indices.to(torch.int16), TypeError,
     "boundary_token_indices must have dtype"),
    ("block_table", lambda w: w.block_table.view(-1), ValueError, "block_table must have rank 2"),
    ("block_table", lambda w: w.block_table.float(), TypeError, "block_table must have dtype"),
    ("rms_norm_weight", lambda w: w.rms_norm_weight[:256], ValueError, "rms_norm_weight must have size 512"),
    ("rms_norm_weight", lambda w: w.rms_norm_weight.half(), TypeError, "rms_norm_weight must have dtype"),
    ("cos_sin_cache", lambda w: w.cos_sin_cache[:, :32], ValueError, "cos_sin_cache must have size 64"),
    ("cos_sin_cache", lambda w: w.cos_sin_cache.double(), TypeError, "cos_sin_cache must have dtype"),
    ("kv_slot_mapping", lambda w: w.kv_slot_mapping.float(), TypeError, "kv_slot_mapping must have dtype"),
    ("kv_slot_mapping", lambda w: w.kv_slot_mapping[:-1], ValueError,
     r"kv_slot_mapping must have num_tokens=\d+ entries \(like token_to_req\)"),
    ("kv_slot_mapping", lambda w: torch.cat([w.kv_slot_mapping, w.kv_slot_mapping[:1]]), ValueError,
     r"kv_slot_mapping must have num_tokens=\d+ entries \(like token_to_req\)"),
    ("kv_cache", lambda w: w.kv_cache.to(torch.int8), TypeError, "kv_cache must have dtype"),
    ("kv_cache", lambda w: w.kv_cache[:, :37000], ValueError, "kv_cache must have size 37376"),
    ("state_cache", lambda w: [1.0], TypeError, "state_cache must be a torch.Tensor"),
])
def test_bad_metadata(w, name, bad, exc, match):
    _expect(w, exc, match, **{name: bad(w)})


@pytest.mark.parametrize("name,value,exc,match", [
    ("compress_ratio", 64, ValueError, r"compress_ratio must be one of \(128, 256, 512\), got 64"),
    ("compress_ratio", 128.0, TypeError, "compress_ratio must be an int"),
    ("block_size", 0, ValueError, "block_size must be >= 1, got 0"),
    ("block_size", 4, ValueError, "state_cache must have block_size=4"),
    ("block_size", 16, ValueError, r"state_cache must have block_size=16 rows per block in dim 1, got shape \(\d+, 8,"),
    ("block_size", True, TypeError, "block_size must be an int"),
    ("rms_norm_eps", float("nan"), ValueError, "rms_norm_eps must be"),
])
def test_bad_scalars(w, name, value, exc, match):
    _expect(w, exc, match, **{name: value})


def test_bad_out(w):
    _expect(w, ValueError, "out must have kv_cache's shape", out=torch.zeros(1, 37376, dtype=torch.uint8))
    _expect(w, TypeError, "out must have dtype uint8", out=w.kv_cache.to(torch.int8))
    wide = torch.zeros(w.kv_cache.shape[0], 37376 * 2, dtype=torch.uint8)[:, ::2]
    _expect(w, ValueError, "out must have contiguous rows", out=wide)


def test_device_mix(w):
    w.state_cache = w.state_cache.to("meta")
    with pytest.raises(ValueError, match="token_to_req is on cpu but state_cache is on meta"):
        _call(w)


@pytest.mark.parametrize("out", [None, "cpu"])
def test_kv_cache_on_another_device(w, out):
    """kv_cache alone on another device is named, whether or not out (on state_cache's device) is given."""
    w.kv_cache = w.kv_cache.to("meta")
    with pytest.raises(ValueError, match="kv_cache is on meta but state_cache is on cpu"):
        _call(w, out=None if out is None else torch.zeros(w.kv_cache.shape, dtype=torch.uint8))


def test_bad_route(w):
    with pytest.raises(ValueError, match="route must be one of"):
        _call(w, route="ascend:warp-speed")
    with pytest.raises(TypeError, match="route must be a str"):
        _call(w, route=3)


def test_triton_route_on_cpu_without_interpreter(w, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    for route in ("gpgpu", "ascend", f"ascend:{ASCEND_STAGES[0]}"):
        with pytest.raises(RouteUnavailableError, match="TRITON_INTERPRET=1"):
            _call(w, route=route)


# --- values (validate=True): the first offending output is named -----------------------------

def _output_token(w, i):
    return int(w.boundary_token_indices[i])


def test_position_too_small(w):
    w.positions[_output_token(w, 2)] = 5
    _expect(w, ValueError, r"positions: output 2 .*< compress_ratio - 1 = 127")


def test_request_outside_block_table(w):
    w.token_to_req[_output_token(w, 3)] = w.block_table.shape[0]
    _expect(w, ValueError, r"token_to_req: output 3 .*outside block_table rows")


def test_window_column_outside_block_table(w):
    w.positions[_output_token(w, 0)] = w.block_table.shape[1] * w.block_size + 3
    _expect(w, ValueError, r"block_table: output 0 .*column past block_table's width")


def test_block_id_outside_state_cache(w):
    p = int(w.positions[_output_token(w, 2)])
    r = int(w.token_to_req[_output_token(w, 2)])
    w.block_table[r, (p - 5) // w.block_size] = w.state_cache.shape[0]
    _expect(w, ValueError, r"block_table: output 2 .*block id outside state_cache")


def test_slot_outside_cache(w):
    w.kv_slot_mapping[_output_token(w, 4)] = w.kv_cache.shape[0] * 64
    _expect(w, ValueError, r"kv_slot_mapping: output 4 .*slot >= num_pages \* 64")


def test_rope_position_outside_cos_sin_cache(w):
    w.cos_sin_cache = w.cos_sin_cache[:128]
    _expect(w, ValueError, r"cos_sin_cache: output \d+ .*>= cos_sin_cache rows")


def test_boundary_index_outside_tokens(w):
    w.boundary_token_indices[3] = w.token_to_req.shape[0]
    _expect(w, ValueError, r"boundary_token_indices: output 3 .*outside \[0, num_tokens\)")
    w.boundary_token_indices[3] = -1
    _expect(w, ValueError, r"boundary_token_indices: output 3")


def _give_slot_zero(w, i):
    """Map output ``i`` to slot 0 (the output that had slot 0, if any, takes ``i``'s old slot)."""
    tok = _output_token(w, i)
    w.kv_slot_mapping[w.kv_slot_mapping == 0] = int(w.kv_slot_mapping[tok])
    w.kv_slot_mapping[tok] = 0


@pytest.mark.parametrize("defect,match", [
    (lambda w, tok: w.positions.__setitem__(tok, w.block_table.shape[1] * w.block_size + 3),
     r"block_table: output 2 .*column past block_table's width"),
    (lambda w, tok: w.token_to_req.__setitem__(tok, w.block_table.shape[0]),
     r"token_to_req: output 2 .*outside block_table rows"),
])
def test_an_output_writing_slot_zero_is_validated(w, defect, match):
    """Slot 0 is a real slot, not a skip: the quick check must not wave its output through."""
    from ascend_kvc.validation import check_values

    _give_slot_zero(w, 2)
    defect(w, _output_token(w, 2))
    with pytest.raises(ValueError, match=match):
        check_values(w.checked_args())  # the quick check alone: it must see something wrong
    _expect(w, ValueError, match)


def test_first_offending_output_is_named(w):
    w.positions[_output_token(w, 4)] = 0
    w.kv_slot_mapping[_output_token(w, 2)] = 10**9
    _expect(w, ValueError, r"kv_slot_mapping: output 2 ")


def test_skipped_outputs_are_not_validated(w):
    tok = _output_token(w, 1)
    assert int(w.kv_slot_mapping[tok]) == -1  # general_case skips output 1
    w.positions[tok] = 0
    _call(w, out=w.kv_cache.clone())  # no error: a skipped output reads nothing


# --- cost, shared slots, non-finite eps ---------------------------------------------------------

_VIEW_OPS = {"unsqueeze", "squeeze", "slice", "select", "unbind", "view", "_unsafe_view", "expand", "alias",
             "t", "transpose", "as_strided", "detach", "lift_fresh"}


def _count_ops(fn):
    """``(compute ops, host syncs)`` that ``fn`` dispatches to ATen; views are free."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    with Counter() as counter:
        fn()
    compute = [op for op in counter.ops if op not in _VIEW_OPS]
    return compute, sum(op in ("_local_scalar_dense", "item") for op in compute)


@pytest.mark.parametrize("block_size,outputs_per_req", [(8, 3), (1, 3), (64, 12)])
def test_value_checks_cost_a_few_ops_and_one_sync(block_size, outputs_per_req):
    from ascend_kvc.validation import check_values

    args = general_case(128, block_size, seed=22, outputs_per_req=outputs_per_req).checked_args()
    check_values(args)  # warm the cached window offsets
    ops, syncs = _count_ops(lambda: check_values(args))
    print(f"check_values: {len(ops)} ATen compute ops, {syncs} host sync: {ops}")
    assert syncs == 1
    assert len(ops) <= 25, ops  # was ~70 with the per-check pass


def test_two_outputs_sharing_a_slot(w):
    slot = int(w.kv_slot_mapping[_output_token(w, 2)])
    w.kv_slot_mapping[_output_token(w, 4)] = slot
    b2, b4 = _output_token(w, 2), _output_token(w, 4)
    err = _expect(w, ValueError, rf"kv_slot_mapping: outputs 2 and 4 \(boundary tokens {b2} and {b4}\) map to "
                                 rf"the same slot {slot}; nothing was written")
    assert "outputs 2 and 4" in str(err)


def test_a_range_error_is_named_before_a_shared_slot(w):
    w.kv_slot_mapping[_output_token(w, 4)] = int(w.kv_slot_mapping[_output_token(w, 2)])
    w.positions[_output_token(w, 5)] = 3
    _expect(w, ValueError, r"positions: output 5 ")


def test_skipped_outputs_never_share_a_slot(w):
    w.kv_slot_mapping[_output_token(w, 3)] = -1  # now outputs 1 and 3 both skip with slot -1
    _call(w, out=w.kv_cache.clone())


# 0 leaves an all-zero window at 0 * rsqrt(0) = NaN (routes disagree on its bytes); a subnormal eps
# is 0 where a device flushes subnormals. The smallest normal float32 is the least eps accepted.
@pytest.mark.parametrize("eps", [0.0, 0, 1e-40, 2.0**-127, 1e39, float("inf"), float("-inf"), float("nan"), -1e-6])
def test_eps_below_the_smallest_normal_float32_or_not_finite(w, eps):
    _expect(w, ValueError, r"rms_norm_eps must be a finite float >= 2\*\*-126", rms_norm_eps=eps)


@pytest.mark.parametrize("eps", [2.0**-126, 1, 3.4028234663852886e38])
def test_the_float32_normal_range_of_eps_is_accepted(w, eps):
    _call(w, rms_norm_eps=eps, out=w.kv_cache.clone())


@pytest.mark.parametrize("value", [1, 0, None, 1.0, "no"])
def test_validate_must_be_a_bool(w, value):
    _expect(w, TypeError, f"validate must be a bool, got {type(value).__name__}", validate=value)


# --- out: rows that alias each other ------------------------------------------------------------

def test_out_with_overlapping_rows(w):
    """Rows closer than a page (``page.expand(n, -1)``) would let one slot's bytes land in several pages."""
    pages = w.kv_cache.shape[0]
    assert pages > 1
    _expect(w, ValueError, r"out must not have overlapping rows .*got strides \(0, 1\)",
            out=w.kv_cache[:1].clone().expand(pages, -1))
    flat = torch.zeros(pages * 37376, dtype=torch.uint8)
    _expect(w, ValueError, "out must not have overlapping rows", out=flat.as_strided((pages, 37376), (37375, 1)))
    # kv_cache passed as out is out; through the op, out is the cache.
    w.kv_cache = w.kv_cache[:1].expand(pages, -1)
    with pytest.raises(ValueError, match="out must not have overlapping rows"):
        _call(w, out=w.kv_cache)
    args = list(w.args())
    with pytest.raises(ValueError, match="out must not have overlapping rows"):
        torch.ops.ascend_kvc.compress_(*args[:8], w.kv_cache, *args[9:], "reference", False)


def test_expanded_kv_cache_with_out_none_is_fine(w):
    """out=None only reads kv_cache's shape: the new cache has its own rows."""
    from ascend_kvc.oracle import check_cache

    w.kv_cache = w.kv_cache[:1].expand(w.kv_cache.shape[0], -1)
    got = _call(w)
    assert got.stride() == (37376, 1)
    report = check_cache(w.checked_args(), got, torch.zeros_like(got))
    assert report.ok and report.num_outputs_written > 0, str(report)


def test_one_row_out_may_have_any_row_stride(w):
    w.kv_cache = w.kv_cache[:1]
    w.kv_slot_mapping[w.kv_slot_mapping >= 64] = -1
    _call(w, out=w.kv_cache.clone().as_strided((1, 37376), (5, 1)))


# --- the layer takes its scalars as the function does --------------------------------------------

@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(block_size=8.9), TypeError, "block_size must be an int, got float"),
    (dict(block_size=8.0), TypeError, "block_size must be an int, got float"),
    (dict(compress_ratio=128.7), TypeError, "compress_ratio must be an int, got float"),
    (dict(compress_ratio=64), ValueError, r"compress_ratio must be one of \(128, 256, 512\)"),
    (dict(block_size=0), ValueError, "block_size must be >= 1"),
    (dict(rms_norm_eps=0.0), ValueError, r"rms_norm_eps must be a finite float >= 2\*\*-126"),
    (dict(validate=None), TypeError, "validate must be a bool, got NoneType"),
    (dict(validate=1), TypeError, "validate must be a bool, got int"),
    (dict(route=3), TypeError, "route must be a str"),
])
def test_layer_checks_its_scalars_like_the_function(w, kwargs, exc, match):
    from ascend_kvc.layers import CompressorKVWriter

    settings = dict(block_size=8, compress_ratio=128, rms_norm_eps=1e-6, route="reference", validate=False)
    with pytest.raises(exc, match=match):
        CompressorKVWriter(w.rms_norm_weight, w.cos_sin_cache, **{**settings, **kwargs})
    function_kwargs = {k: v for k, v in kwargs.items() if k != "route"}
    if function_kwargs.keys() & {"block_size", "compress_ratio", "rms_norm_eps", "validate"}:
        _expect(w, exc, match, **function_kwargs)  # the function: same exception, same message


@pytest.mark.parametrize("defect", [
    lambda w: w.positions.__setitem__(_output_token(w, 2), 5),
    lambda w: w.token_to_req.__setitem__(_output_token(w, 3), w.block_table.shape[0]),
    lambda w: w.positions.__setitem__(_output_token(w, 0), w.block_table.shape[1] * w.block_size + 3),
    lambda w: w.kv_slot_mapping.__setitem__(_output_token(w, 4), w.kv_cache.shape[0] * 64),
    lambda w: w.boundary_token_indices.__setitem__(3, -1),
    lambda w: setattr(w, "cos_sin_cache", w.cos_sin_cache[:128]),
    lambda w: setattr(w, "cos_sin_cache", w.cos_sin_cache[:0]),
    lambda w: setattr(w, "block_table", w.block_table[:, :0]),
    lambda w: w.kv_slot_mapping.__setitem__(_output_token(w, 5), int(w.kv_slot_mapping[_output_token(w, 0)])),
])
def test_cheap_and_detailed_checks_give_the_same_message(w, defect):
    from ascend_kvc.indexing import plan_for
    from ascend_kvc.validation import check_values, raise_on_bad_values

    defect(w)
    args = w.checked_args()
    messages = []
    for check in (lambda: check_values(args), lambda: raise_on_bad_values(plan_for(args), args)):
        with pytest.raises(ValueError) as info:
            check()
        messages.append(str(info.value))
    assert messages[0] == messages[1]
