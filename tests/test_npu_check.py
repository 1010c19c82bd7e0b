"""``python -m ascend_kvc.npu_check``: without an NPU it says so and exits 3; with one it runs every
check and prints a block to paste. No NPU exists here: the checks run on CPU tensors under the
Triton interpreter, with the ``torch.npu`` stand-in providing events and graphs (a graph replays
the operator calls made while it was captured)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ascend_kvc import c128_256_512_compress, npu_check
from ascend_kvc.oracle import slot_columns
from ascend_kvc.npu_check import EXIT_FAILED, EXIT_NO_NPU, EXIT_OK, CheckResult
from ascend_kvc.routes import ASCEND_STAGES

from npu_standin import FakeGraph, FakeNpu

REPO = Path(__file__).resolve().parent.parent
interpreter_only = pytest.mark.skipif(torch.cuda.is_available(),
                                      reason="CPU tensors run under the interpreter only without a GPU")


@pytest.mark.skipif(importlib.util.find_spec("torch_npu") is not None, reason="torch-npu is installed here")
def test_without_an_npu_it_says_so_and_exits_3():
    proc = subprocess.run([sys.executable, "-m", "ascend_kvc.npu_check"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == EXIT_NO_NPU == 3, proc.stderr
    assert "no Ascend NPU here: torch-npu is not installed" in proc.stderr
    assert proc.stdout == ""


@pytest.fixture
def npu(monkeypatch):
    fake = FakeNpu(vector_cores=(40,))
    monkeypatch.setattr(torch, "npu", fake, raising=False)
    return fake


def _recording(npu, compress=c128_256_512_compress):
    return lambda *args, **kwargs: npu.capture(compress, *args, **kwargs)


@interpreter_only
def test_every_check_passes_on_a_working_installation(npu):
    results = npu_check.run_checks("cpu", npu=npu, compress=_recording(npu), bench_case=npu_check.SMALL_CASE)
    names = [r.name for r in results]
    assert names == ["route reference", *(f"route ascend:{s}" for s in ASCEND_STAGES),
                     "graph ascend", "graph ascend:fused", "bench"]
    assert all(r.ok for r in results), "\n".join(f"{r.name}: {r.detail}" for r in results if not r.ok)
    assert "ms a call" in results[-1].detail and "GB/s" in results[-1].detail


def _corrupting(compress=c128_256_512_compress):
    """The operator, with one written slot byte flipped afterwards."""
    def corrupt(*args, out, **kwargs):
        got = compress(*args, out=out, **kwargs)
        slot = args[7][args[3][:1]]  # kv_slot_mapping[boundary_token_indices[0]]: the first output's slot
        page, cols = slot_columns(slot)
        got[page[0], cols[0, 0]] ^= 1
        return got
    return corrupt


@interpreter_only
def test_a_wrong_byte_fails_its_route_and_the_bench_prints_no_speed(npu):
    ok, detail = npu_check.check_route("ascend:fused", torch.device("cpu"), npu, _corrupting())
    assert not ok and "MISMATCH" in detail
    ok, detail = npu_check.check_bench(torch.device("cpu"), npu, _corrupting(), case=npu_check.SMALL_CASE)
    assert not ok and "MISMATCH" in detail and "ms" not in detail


@interpreter_only
def test_a_graph_whose_replay_does_nothing_fails(npu, monkeypatch):
    monkeypatch.setattr(FakeGraph, "replay", lambda self: None)
    ok, detail = npu_check.check_graph("ascend", torch.device("cpu"), npu, _recording(npu))
    assert not ok and "MISMATCH" in detail


def test_a_crashing_check_fails_and_the_others_still_run(npu, monkeypatch):
    def crash(*args, **kwargs):
        raise RuntimeError("EZ9999: the kernel did not launch\nsecond line")

    monkeypatch.setattr(npu_check, "npu_routes", lambda: ["reference"])
    monkeypatch.setattr(npu_check, "check_graph", lambda *a: (True, "replayed"))
    monkeypatch.setattr(npu_check, "check_bench", lambda *a: (True, "1.000 ms a call"))
    results = npu_check.run_checks("cpu", npu=npu, compress=crash)
    assert [(r.name, r.ok) for r in results] == [("route reference", False), ("graph ascend", True),
                                                 ("graph ascend:fused", True), ("bench", True)]
    assert results[0].detail.startswith("RuntimeError: EZ9999: the kernel did not launch [")


@pytest.mark.parametrize("all_pass", [True, False])
def test_main_prints_one_block_and_exits_with_the_verdict(npu, monkeypatch, capsys, all_pass):
    canned = [CheckResult("route reference", True, "ok"), CheckResult("bench", all_pass, "1.000 ms a call")]
    monkeypatch.setattr(npu_check, "npu_absent_reason", lambda: None)
    monkeypatch.setattr(npu_check, "run_checks", lambda device: canned)
    assert npu_check.main(["--device", "cpu"]) == (EXIT_OK if all_pass else EXIT_FAILED)
    out = capsys.readouterr().out
    assert out.startswith("```text\nascend_kvc NPU check\n") and out.rstrip().endswith("```")
    assert "checked on         cpu:0 (Ascend910B-stand-in-0)" in out
    assert "  PASS  route reference" in out
    assert ("  PASS  bench" if all_pass else "  FAIL  bench") in out
    assert out.count("```") == 2 and "torch " in out  # the environment report is inside
    assert ("result             2/2 passed\n" if all_pass else "1/2 passed, FAILED") in out
