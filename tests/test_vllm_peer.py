"""``bench.vllm_peer``: vLLM's compressor kernel next to ours, on the CPU.

vLLM's file (``.peers/vllm/fused_compress_quant_cache.py``, bench/peers.md) is someone else's code
and never committed; without it the peer parts skip. Under the Triton interpreter its fp32 ->
bf16 / e4m3 casts truncate, so its CPU bytes are never judged exactly here: the tests check the
stand-ins, the argument conversion (against our layout and the oracle, and by running our own
route behind vLLM's signature through the whole comparison), the classing of differences on
planted bytes, the JSON and the command-line errors. The GPU run is the lead's.
"""

import dataclasses
import inspect
import json
import math
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import bench.vllm_peer as vp
from ascend_kvc.layout import (FP8_MAX, HEAD_DIM, NOPE_DIM, NOPE_GROUPS, PAYLOAD_BYTES, QUANT_GROUP, SCALE_BIAS,
                               SLOT_BYTES, slot_byte_offsets)
from ascend_kvc.oracle import _pooled_f64, _resolve, compute_truth, e4m3_bits, e4m3_round_f64, e4m3_value, slot_columns

PEER = Path(__file__).resolve().parent.parent / ".peers" / "vllm" / "fused_compress_quant_cache.py"
needs_peer = pytest.mark.skipif(not PEER.is_file(), reason=f"vLLM's file is not at {PEER} (bench/peers.md says how "
                                                           "to get it); its own runs are skipped")

# A file with vLLM's signature that runs OUR reference route from the arguments vLLM's launcher
# takes: if the conversion dropped or mangled anything, its bytes would fail the oracle.
OURS_BEHIND_PEER_SIGNATURE = textwrap.dedent("""\
    from typing import Any
    import torch
    from vllm.platforms import current_platform
    from vllm.triton_utils import tl, triton
    from .fused_indexer_q import _fp32x2_to_fp4x2

    ROCM = current_platform.is_rocm()

    def compress_norm_rope_store_triton(state_cache, num_actual, token_to_req_indices, positions, slot_mapping,
                                        block_table, block_size, state_width, cos_sin_cache, kv_cache,
                                        k_cache_metadata: Any, pdl_kwargs, head_dim, rope_head_dim, compress_ratio,
                                        overlap, use_fp4_cache, rms_norm_weight, rms_norm_eps, quant_block,
                                        token_stride, scale_dim):
        from ascend_kvc import compress_step
        assert (head_dim, rope_head_dim, quant_block, token_stride, scale_dim) == (512, 64, 64, 576, 8)
        assert state_width == state_cache.shape[-1] // 2 and not use_fp4_cache and pdl_kwargs == {}
        assert num_actual == positions.shape[0]
        compress_step(state_cache, token_to_req_indices, positions, block_table, rms_norm_weight, cos_sin_cache,
                      k_cache_metadata.slot_mapping, kv_cache.view(kv_cache.shape[0], -1), block_size=block_size,
                      compress_ratio=compress_ratio, rms_norm_eps=rms_norm_eps, state_slot_mapping=slot_mapping,
                      kv_format="fp8_e4m3", overlap=overlap, route="reference")
""")


@pytest.fixture
def ours_as_peer(tmp_path):
    path = tmp_path / "fused_compress_quant_cache.py"
    path.write_text(OURS_BEHIND_PEER_SIGNATURE)
    return path


# --- stand-ins -------------------------------------------------------------------------------------------

def test_stand_ins_answer_the_imports_for_the_import_only(ours_as_peer):
    before = {name for name in sys.modules if name == "vllm" or name.startswith("vllm.")}
    module = vp.load_peer(str(ours_as_peer))
    assert module.ROCM is False  # current_platform.is_rocm(): a CUDA machine, so _ON_GFX950 is False
    with pytest.raises(NotImplementedError, match="MXFP4"):
        module._fp32x2_to_fp4x2(None, None)
    after = {name for name in sys.modules if name == "vllm" or name.startswith("vllm.")}
    assert after == before  # nothing of the stand-ins stays behind


def test_load_peer_names_a_missing_file_or_function(tmp_path):
    with pytest.raises(FileNotFoundError, match="peers.md"):
        vp.load_peer(str(tmp_path / "absent.py"))
    bare = tmp_path / "bare.py"
    bare.write_text("x = 1\n")
    with pytest.raises(AttributeError, match="compress_norm_rope_store_triton"):
        vp.load_peer(str(bare))


# --- conversion, against our own layout and the oracle ---------------------------------------------------

@pytest.mark.parametrize("P", [1, 2, 5, 64])
def test_vllm_page_addressing_is_our_slot_layout(P):
    cache = torch.zeros(3, P * SLOT_BYTES, dtype=torch.uint8)
    view = vp.peer_kv_view(cache)
    assert view.data_ptr() == cache.data_ptr() and view.shape[1] == P and view.stride(0) == P * SLOT_BYTES
    for slot in range(3 * P):
        page, payload, scale = slot_byte_offsets(torch.tensor(slot), P)
        assert vp.peer_slot_offsets(slot, view) == (int(page), int(payload), int(scale))
    with pytest.raises(ValueError, match="kv_cache"):
        vp.peer_kv_view(torch.zeros(2, 100, dtype=torch.uint8))


@pytest.mark.parametrize("C,overlap", [(4, True), (4, False), (128, False)])
def test_vllm_window_addressing_pools_what_the_oracle_pools(C, overlap):
    """Pool in float64 with vLLM's column addressing; the oracle's pooled vector must come out."""
    step, _ = vp.official_step(1, 2 * C if C > 4 else 16, C, kv_format="fp8_e4m3", overlap=overlap, shuffle=True,
                               block_size=3)
    checked = vp.checked_operator_args(step)
    res = _resolve(checked)
    outputs = res.written.nonzero().squeeze(1)
    want, _, _ = _pooled_f64(checked, res, outputs)
    head, score = vp.peer_window_columns(C, overlap)
    state = checked.state_cache.double()
    for n, i in enumerate(outputs.tolist()):
        rows = state[res.block[i], res.row[i]]  # [W, state row]
        kv = torch.stack([rows[j, head[j]:head[j] + HEAD_DIM] for j in range(len(head))])
        sc = torch.stack([rows[j, score[j]:score[j] + HEAD_DIM] for j in range(len(head))])
        sc = torch.where(res.present[i][:, None], sc, float("-inf"))
        kv = torch.where(res.present[i][:, None], kv, 0.0)
        got = (torch.softmax(sc, dim=0) * kv).sum(0)
        torch.testing.assert_close(got, want[n], rtol=1e-12, atol=1e-12)


def _small_cases_side_by_side(module):
    """``(label, truth, ours, peer, stats)`` for each small case: the peer module and our
    reference route each write a copy of the case's cache, and ``compare_caches`` judges both."""
    for label, step in vp.build_cases(["C128", "C4", "decode"], True, "cpu"):
        checked = vp.checked_operator_args(step)
        truth = compute_truth(checked)
        before = step.kv_cache.clone()
        peer, ours = before.clone(), before.clone()
        vp.peer_call(module, step, peer)()
        vp.ours_call(step, ours, "reference")()
        yield label, truth, ours, peer, vp.compare_caches(checked, truth, before, ours, peer)


def test_peer_inputs_carry_the_step(ours_as_peer):
    """vLLM's signature, filled by ``peer_inputs``, is enough to compute the step: our own route
    behind that signature writes bytes the oracle passes, and the same bytes as ours."""
    module = vp.load_peer(str(ours_as_peer))
    for label, truth, ours, peer, stats in _small_cases_side_by_side(module):
        assert truth.outputs.numel() > 0, label
        assert stats["ours_ok"] and stats["real"] == 0 and stats["equal"] == stats["slots"] == truth.outputs.numel(), \
            (label, stats)


def test_cases_are_the_asked_shapes():
    small = dict(vp.build_cases(["C128", "C4", "decode"], True, "cpu"))
    c4 = small["C4/prefill-T32"]
    assert c4.base.overlap and c4.compress_ratio == 4 and c4.block_size == 8 and c4.base.tags["shuffle"]
    assert c4.kv_cache.shape[1] == (vp.KV_BLOCK_TOKENS // 4) * SLOT_BYTES
    skipped = c4.kv_slot_mapping < 0  # padding tokens, one of them a boundary token: both sides skip it
    assert bool(skipped.any()) and bool((skipped & ((c4.positions + 1) % 4 == 0)).any())
    live = c4.kv_slot_mapping[~skipped]
    assert live.unique().numel() == live.numel()  # every other token its own slot
    assert small["C128/R1-T256-C128"].kv_cache.shape[1] == (vp.KV_BLOCK_TOKENS // 128) * SLOT_BYTES
    dec = small["decode/R4-B2-C4"]
    assert int(((dec.positions + 1) % 4 == 0).sum()) == 2 and dec.num_tokens == 4
    with pytest.raises(ValueError, match="cases"):
        vp.build_cases(["C9"], True, "cpu")


# --- classing differences, on planted bytes --------------------------------------------------------------

@pytest.fixture(scope="module")
def judged():
    """A small fp8 case's truth and the truth's own slot bytes (what a right writer writes)."""
    step = dict(vp.build_cases(["decode"], True, "cpu"))["decode/R4-B2-C4"]
    truth = compute_truth(vp.checked_operator_args(step))
    return truth, truth.expected.clone()


def test_equal_and_real(judged):
    truth, good = judged
    assert vp.classify_slots(truth, good, good).equal == good.shape[0]
    bad = good.clone()
    bad[1, 5] ^= 0x40  # a NOPE value far off
    c = vp.classify_slots(truth, bad, good)
    assert (c.equal, c.real) == (good.shape[0] - 1, 1) and "byte 5 [e4m3 NOPE]" in c.first_real
    bad = good.clone()
    bad[0, PAYLOAD_BYTES + NOPE_GROUPS] = 1  # the pad byte
    assert vp.classify_slots(truth, bad, good).real == 1


def test_ambiguous_is_a_difference_inside_the_truth_interval(judged):
    truth, good = judged
    z = truth.z_lo.clone()
    e = truth.e_lo[0, 0]
    q = e4m3_value(good[0, 3:4]).double()
    other = e4m3_bits(e4m3_round_f64(q * (1 + 2.0**-3)))  # the next e4m3 value up (same sign)
    peer = good.clone()
    peer[0, 3] = other.to(torch.uint8)
    assert vp.classify_slots(truth, peer, good).real == 1  # not inside the interval as it stands
    lo = torch.minimum(z[0, 3], e4m3_value(other).double() * 2.0 ** e)
    hi = torch.maximum(truth.z_hi[0, 3], e4m3_value(other).double() * 2.0 ** e)
    z_lo, z_hi = truth.z_lo.clone(), truth.z_hi.clone()
    z_lo[0, 3], z_hi[0, 3] = lo, hi  # now the truth admits both values
    wide = dataclasses.replace(truth, z_lo=z_lo, z_hi=z_hi)
    c = vp.classify_slots(wide, peer, good)
    assert (c.ambiguous, c.real) == (1, 0)


def _group_at(truth, good, amax: float, exponent: int, value_exponent: int | None = None):
    """``truth`` with group 0 of output 0 exactly known, its |z| max ``amax``, and the slot bytes
    written with that group's scale byte ``exponent``, its values at ``value_exponent`` (the same
    by default)."""
    z = torch.linspace(-amax, amax * 0.5, QUANT_GROUP, dtype=torch.float64)
    z = torch.round(z * 64) / 64  # bf16-exact, |z| max still amax
    z[7] = amax
    z_lo, z_hi = truth.z_lo.clone(), truth.z_hi.clone()
    z_lo[0, :QUANT_GROUP] = z
    z_hi[0, :QUANT_GROUP] = z
    exact = math.ceil(math.log2(amax / FP8_MAX) - 1e-12)
    e_lo, e_hi = truth.e_lo.clone(), truth.e_hi.clone()
    e_lo[0, 0] = e_hi[0, 0] = exact
    t = dataclasses.replace(truth, z_lo=z_lo, z_hi=z_hi, e_lo=e_lo, e_hi=e_hi)
    slot = good.clone()
    at = exponent if value_exponent is None else value_exponent
    slot[0, :QUANT_GROUP] = e4m3_bits(e4m3_round_f64(z * 2.0**-at)).to(torch.uint8)
    slot[0, PAYLOAD_BYTES] = exponent + SCALE_BIAS
    return t, slot, exact


def test_scale_one_up_at_a_power_of_two_is_its_own_class(judged):
    truth, good = judged
    t, right, exact = _group_at(truth, good, 1.75, -8)  # 1.75 = 448 * 2^-8: the exact rule says -8
    assert exact == -8 and vp.classify_slots(t, right, right).equal == right.shape[0]
    _, peer, _ = _group_at(truth, good, 1.75, -7)  # vLLM's float32 log2 can say -7
    c = vp.classify_slots(t, peer, right)
    assert (c.scale_pow2, c.real) == (1, 0)
    _, mixed, _ = _group_at(truth, good, 1.75, -7, value_exponent=-8)  # vLLM's scale, values at another
    c = vp.classify_slots(t, mixed, right)
    assert (c.scale_pow2, c.real) == (0, 1)


def test_scale_one_off_away_from_a_power_of_two_is_real(judged):
    truth, good = judged
    t, right, exact = _group_at(truth, good, 1.5, -8)  # 448 * 2^-9 < 1.5 < 448 * 2^-8: no doubt about -8
    _, peer, _ = _group_at(truth, good, 1.5, -7)
    c = vp.classify_slots(t, peer, right)
    assert (c.scale_pow2, c.real) == (0, 1) and "output 0 " in c.first_real and "byte 0 [e4m3 NOPE]" in c.first_real


def test_bytes_changed_outside_the_slots_are_real(ours_as_peer):
    step = dict(vp.build_cases(["decode"], True, "cpu"))["decode/R4-B2-C4"]
    checked = vp.checked_operator_args(step)
    truth = compute_truth(checked)
    before = step.kv_cache.clone()
    ours = before.clone()
    vp.ours_call(step, ours, "reference")()
    peer = ours.clone()
    page, cols = slot_columns(truth.slots, truth.slots_per_page, "fp8_e4m3")
    free = torch.ones_like(before, dtype=torch.bool)
    free[page, cols] = False
    p, c = free.nonzero()[0].tolist()
    peer[p, c] ^= 1
    stats = vp.compare_caches(checked, truth, before, ours, peer)
    assert stats["peer_outside_changed"] == 1 and stats["real"] == 1 and stats["equal"] == stats["slots"]


# --- the command ------------------------------------------------------------------------------------------

def test_main_writes_json_and_exits_0_when_the_bytes_agree(ours_as_peer, tmp_path):
    out = tmp_path / "o.json"
    assert vp.main([str(ours_as_peer), "--small", "--device", "cpu", "--routes", "reference,auto",
                    "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["device"] == "cpu" and {"torch", "triton", "device_name"} <= set(doc)
    rows = doc["rows"]
    cases = ("C128/R1-T256-C128", "C4/prefill-T32", "decode/R4-B2-C4")
    assert [(r["case"], r["route"]) for r in rows] == [(c, r) for c in cases for r in ("reference", "auto")]
    for r in rows:
        assert r["mode"] == "none" and r["resolved_route"] == "reference" and r["bytes"]["real"] == 0
        assert {"case", "route", "mode", "outputs", "slots_per_page", "bytes", "device_name", "torch",
                "triton"} <= set(r)
        assert {"slots", "equal", "ambiguous", "scale_pow2", "real", "ours_ok"} <= set(r["bytes"])


def test_main_exits_1_on_a_real_difference(tmp_path):
    path = tmp_path / "wrong.py"
    path.write_text(OURS_BEHIND_PEER_SIGNATURE.replace('route="reference")', 'route="reference")\n'
                                                       '    kv_cache.view(-1)[3] ^= 1  # one NOPE byte of slot 0'))
    assert vp.main([str(path), "--small", "--device", "cpu", "--cases", "C4", "--routes", "reference"]) == 1


@pytest.mark.parametrize("argv,message", [
    (["--cases", "C9"], "--cases: unknown 'C9'"),
    (["--cases", ","], "--cases: unknown empty list"),
    (["--routes", "nope"], "--routes: unknown 'nope'"),
    (["--reps", "0"], "--reps must be >= 1"),
    (["--kv-block-tokens", "0"], "--kv-block-tokens must be >= 1"),
])
def test_argument_errors(ours_as_peer, capsys, argv, message):
    with pytest.raises(SystemExit) as e:
        vp.main([str(ours_as_peer), *argv])
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_missing_path_and_help(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        vp.main([str(tmp_path / "absent.py")])
    assert e.value.code == 2 and "path: no file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        vp.main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and all(flag in out for flag in ("--cases", "--routes", "--small", "--device",
                                                                "--no-time", "--json"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")
def test_device_cuda_without_a_gpu(ours_as_peer, capsys):
    with pytest.raises(SystemExit) as e:
        vp.main([str(ours_as_peer), "--device", "cuda"])
    assert e.value.code == 2 and "no CUDA GPU" in capsys.readouterr().err


# --- vLLM's own file ------------------------------------------------------------------------------------------

@needs_peer
def test_peer_inputs_match_vllms_signature():
    module = vp.load_peer(str(PEER))
    step = dict(vp.build_cases(["decode"], True, "cpu"))["decode/R4-B2-C4"]
    params = inspect.signature(getattr(module, vp.PEER_FUNCTION)).parameters
    assert list(vp.peer_inputs(step, step.kv_cache)) == list(params)


@needs_peer
@pytest.mark.skipif(torch.cuda.is_available(), reason="bounds the CPU interpreter's casts; on a GPU "
                    "test_vllm_kernel_on_a_gpu_writes_the_contracts_bytes compares the compiled kernel")
def test_vllm_kernel_runs_at_tiny_size_and_writes_only_the_slots(tmp_path):
    """Under the interpreter vLLM's casts truncate: its bytes are near ours, not equal. Near means
    every output's slot written (not the bytes around it), NOPE signs equal and values within
    the interpreter's casts of ours, scales within one, RoPE values within bf16's truncation."""
    out = tmp_path / "o.json"
    vp.main([str(PEER), "--small", "--device", "cpu", "--cases", "C4,decode", "--json", str(out)])
    assert {r["case"] for r in json.loads(out.read_text())["rows"]} == {"C4/prefill-T32", "decode/R4-B2-C4"}
    module = vp.load_peer(str(PEER))
    for label, truth, ours, peer, stats in _small_cases_side_by_side(module):
        assert stats["peer_outside_changed"] == 0 and stats["ours_ok"], (label, stats)
        page, cols = slot_columns(truth.slots, truth.slots_per_page, "fp8_e4m3")
        a, b = peer[page, cols], ours[page, cols]
        ea = a[:, PAYLOAD_BYTES:PAYLOAD_BYTES + NOPE_GROUPS].double() - SCALE_BIAS
        eb = b[:, PAYLOAD_BYTES:PAYLOAD_BYTES + NOPE_GROUPS].double() - SCALE_BIAS
        assert (ea - eb).abs().max() <= 1 and (a[:, PAYLOAD_BYTES + NOPE_GROUPS] == 0).all(), label
        va = e4m3_value(a[:, :NOPE_DIM]).view(-1, NOPE_GROUPS, QUANT_GROUP) * torch.exp2(ea)[..., None]
        vb = e4m3_value(b[:, :NOPE_DIM]).view(-1, NOPE_GROUPS, QUANT_GROUP) * torch.exp2(eb)[..., None]
        step_size = torch.exp2(eb)[..., None] * 2.0**-6  # e4m3's subnormal step at our scale
        # The interpreter's e4m3 cast even drops the carry of a value rounding up to a power of
        # two (127.5 -> 64, not 120 or 128): a value lies within a factor of two below ours.
        assert ((va.abs() >= 0.5 * vb.abs() - 2 * step_size) & (va.abs() <= 1.25 * vb.abs() + 2 * step_size)).all(), \
            label
        assert ((torch.signbit(va) == torch.signbit(vb)) | (vb == 0)).all(), label
        ra = a[:, NOPE_DIM:PAYLOAD_BYTES].contiguous().view(torch.bfloat16).double()
        rb = b[:, NOPE_DIM:PAYLOAD_BYTES].contiguous().view(torch.bfloat16).double()
        assert ((ra - rb).abs() <= 2.0**-6 * rb.abs() + 1e-30).all(), label


def test_timed_rows_with_fake_timers(ours_as_peer, tmp_path, monkeypatch, capsys):
    """The timing path with CUDA's timers replaced: a row per mode with both times and their
    ratio; a call that cannot be captured gets no time and its reason, not a crash."""
    assert vp.capturable("gpgpu") and vp.capturable("ascend:fused") and not vp.capturable("reference")
    calls = []

    def eager(call, reps, warmup, flush):
        calls.append(("eager", reps, warmup, flush))
        call()
        return 10.0 if len(calls) % 2 else 25.0  # ours first, then vLLM

    def graph(call, reps, warmup, flush):
        calls.append(("graph", reps, warmup, flush))
        if len(calls) % 2:
            raise RuntimeError("operation not permitted when stream is capturing")
        return 5.0

    monkeypatch.setattr(vp, "can_time", lambda device: True)
    monkeypatch.setattr(vp, "capturable", lambda route: False)
    second_out = tmp_path / "t2.json"
    assert vp.main([str(ours_as_peer), "--small", "--device", "cpu", "--cases", "decode", "--routes", "reference",
                    "--json", str(second_out)]) == 0
    second = json.loads(second_out.read_text())
    monkeypatch.setattr(vp, "capturable", lambda route: True)
    calls.clear()
    monkeypatch.setattr(vp, "event_us", eager)
    monkeypatch.setattr(vp, "graph_us", graph)
    out = tmp_path / "t.json"
    assert vp.main([str(ours_as_peer), "--small", "--device", "cpu", "--cases", "decode", "--routes", "reference",
                    "--reps", "7", "--warmup", "2", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["mode"] for r in rows] == ["eager", "graph"] and all(c[1:] == (7, 2, True) for c in calls)
    e, g = rows
    assert (e["ours_us"], e["vllm_us"], e["ratio"]) == (10.0, 25.0, 2.5)
    assert g["ours_us"] is None and "capturing" in g["ours_error"] and g["vllm_us"] == 5.0 and g["ratio"] is None
    assert "no graph" in second["rows"][1]["ours_error"]  # the reference route is not even tried in a graph
    table = capsys.readouterr().out
    assert "| decode/R4-B2-C4 | reference (reference) | eager | 10.0 | 25.0 | 2.50 |" in table
    assert "| graph | - | 5.0 | - |" in table
    assert "eager, ours:reference: vllm / ours over 1 cases: geomean 2.50" in table


def test_a_route_that_cannot_compute_the_case_is_reported(ours_as_peer, tmp_path):
    out = tmp_path / "u.json"
    assert vp.main([str(ours_as_peer), "--small", "--device", "cpu", "--cases", "decode", "--routes",
                    "ascend:block-d512,reference", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["route"] for r in rows] == ["ascend:block-d512", "reference"]
    assert "fp8_e4m3" in rows[0]["unavailable"] and rows[1]["bytes"]["real"] == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA events need a GPU")
def test_gpu_timers_time_a_call():
    x = torch.zeros(1 << 20, device="cuda")
    eager = vp.event_us(lambda: x.add_(1), reps=5, warmup=1)
    graph = vp.graph_us(lambda: x.add_(1), reps=5, warmup=1, flush=False)
    assert 0 < eager < 1e5 and 0 < graph < 1e5


@needs_peer
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: compiled, vLLM's casts round "
                    "to nearest even; the interpreter's truncate (the test above bounds those)")
def test_vllm_kernel_on_a_gpu_writes_the_contracts_bytes(tmp_path):
    """Compiled on a GPU, vLLM's kernel writes, on every small case, the contract's bytes in every
    slot whose truth is unambiguous, and no byte outside the slots; ours pass the oracle."""
    out = tmp_path / "o.json"
    vp.main([str(PEER), "--small", "--device", "cuda", "--no-time", "--cases", "C128,C4,decode", "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert {r["case"] for r in rows} == {label for label, _ in vp.build_cases(["C128", "C4", "decode"], True, "cpu")}
    for r in rows:
        b = r["bytes"]
        assert b["slots"] > 0 and b["real"] == 0 and b["peer_outside_changed"] == 0 and b["ours_ok"], (r["case"], b)
