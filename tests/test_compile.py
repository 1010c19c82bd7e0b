"""The public function inside ``torch.compile(fullgraph=True)``: one graph, the eager bytes.

While Dynamo traces, ``c128_256_512_compress`` checks the metadata on fake tensors and calls the
registered op ``torch.ops.ascend_kvc.compress_`` (``out=None``: a zeroed cache, then the op in
place). The route, its logging and its launch plans run when the op runs, outside the trace.
"""

import logging

import pytest
import torch

import ascend_kvc
from ascend_kvc import c128_256_512_compress
from ascend_kvc.oracle import check_cache

from cases import general_case

# The Triton route runs where the other tests run it: interpreted on CPU, compiled on a GPU.
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _case(seed, device="cpu"):
    # Two written outputs and one skipped (-1 slot), C = 128: small enough for the interpreter.
    return general_case(128, 8, num_reqs=1, outputs_per_req=3, seed=seed, device=device)


def _serving_call(*args, out, route):
    return c128_256_512_compress(*args, out=out, route=route, validate=False)


def _fresh_call(*args, route):
    return c128_256_512_compress(*args, route=route, validate=False)


def _two_steps(seed, device="cpu"):
    """Two calls in a row with the same shapes: new state values, slots and cache bytes."""
    first = _case(seed, device)
    second = _case(seed, device)
    g = torch.Generator().manual_seed(seed + 100)
    second.state_cache = torch.randn(first.state_cache.shape, generator=g).to(device)
    b = first.boundary_token_indices
    second.kv_slot_mapping = first.kv_slot_mapping.clone()
    second.kv_slot_mapping[b] = first.kv_slot_mapping[b].flip(0)  # other slots; the skipped one moves
    second.kv_cache = torch.randint(0, 256, first.kv_cache.shape, dtype=torch.uint8, generator=g).to(device)
    return first, second


@pytest.mark.parametrize("backend,route,device", [("aot_eager", "auto", "cpu"), ("inductor", "auto", "cpu"),
                                                  ("aot_eager", "gpgpu", DEVICE)])
def test_in_place_call_compiles_in_one_graph(backend, route, device):
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    compiled = torch.compile(_serving_call, fullgraph=True, backend=backend)  # a graph break is an error
    for step, w in enumerate(_two_steps(seed=31, device=device)):
        before = w.kv_cache.clone()
        eager = c128_256_512_compress(*w.args(), out=before.clone(), route=route, validate=False)
        out = before.clone()
        if backend == "inductor" and step == 0:
            got, codes = run_and_get_code(compiled, *w.args(), out=out, route=route)
            assert "\n".join(codes).count("torch.ops.ascend_kvc.compress_.default(") == 1
        else:
            got = compiled(*w.args(), out=out, route=route)
        assert got.data_ptr() == out.data_ptr()
        assert torch.equal(out, eager)
        report = check_cache(w.checked_args(), out, before)  # also: no byte outside the slots changed
        assert report.ok and report.num_outputs_written == 2, str(report)


def test_out_none_compiles_and_returns_only_the_written_slots():
    torch._dynamo.reset()
    compiled = torch.compile(_fresh_call, fullgraph=True, backend="aot_eager")
    for w in _two_steps(seed=33):
        kv_before = w.kv_cache.clone()
        got = compiled(*w.args(), route="auto")
        assert torch.equal(w.kv_cache, kv_before), "kv_cache itself was modified"
        assert torch.equal(got, c128_256_512_compress(*w.args(), route="reference"))
        report = check_cache(w.checked_args(), got, torch.zeros_like(kv_before))
        assert report.ok and report.num_outputs_written == 2, str(report)


def test_compiled_call_checks_like_eager():
    torch._dynamo.reset()
    w = _case(seed=35)
    out = w.kv_cache.clone()
    # Metadata, at trace time on fake tensors: the eager message.
    with pytest.raises(Exception, match="compress_ratio must be one of"):
        torch.compile(_serving_call, fullgraph=True, backend="aot_eager")(*w.args()[:10], 64, w.rms_norm_eps,
                                                                          out=out, route="auto")
    # Index values, with validate=True, when the op runs: nothing written.
    w.kv_slot_mapping[w.boundary_token_indices[0]] = out.shape[0] * 64

    def checked(*args, out):
        return c128_256_512_compress(*args, out=out, validate=True)

    with pytest.raises(ValueError, match="kv_slot_mapping"):
        torch.compile(checked, fullgraph=True, backend="aot_eager")(*w.args(), out=out)
    assert torch.equal(out, w.kv_cache)


def test_eager_auto_call_still_logs_its_route(caplog):
    announce = getattr(ascend_kvc.routes, "_announce", None)
    if hasattr(announce, "cache_clear"):  # it logs once per (device type, route): forget earlier tests' calls
        announce.cache_clear()
    w = _case(seed=37)
    with caplog.at_level(logging.INFO, logger="ascend_kvc"):
        c128_256_512_compress(*w.args(), out=w.kv_cache.clone(), validate=False)
    assert "runs route 'reference'" in caplog.text
