"""``python -m bench.steps`` end to end on interpreter-sized steps (``--small``), and its help."""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_bench_steps_small(tmp_path):
    env = dict(os.environ)
    if DEVICE == "cpu":
        env["TRITON_INTERPRET"] = "1"
    out = tmp_path / "steps.json"
    cmd = [sys.executable, "-m", "bench.steps", "--small", "--device", DEVICE, "--routes", "ascend:fused",
           "--host-calls", "3", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"device {DEVICE}" in proc.stdout
    rows = json.loads(out.read_text())["rows"]
    kinds = {r["kind"] for r in rows}
    assert kinds == {"decode", "mixed", "official"}
    assert all(r["check"] == "ok" and r["step_ms"] > 0 and r["indexed_ms"] > 0 for r in rows)
    assert {r["num_outputs"] for r in rows if r["kind"] == "decode"} == {0, 1}
    assert all(r["ascend_path"] in ("inline", "token-tiles", "search") for r in rows)  # the way each plan took
    # an empty step launches its search and nothing that does work; a step with outputs launches more
    by_case = {r["case"]: r for r in rows}
    assert by_case["decode-R1-B0-C128"]["step_launches"] >= 1
    if DEVICE == "cpu":
        assert by_case["decode-R1-B0-C128"]["step_graph_ms"] is None  # no graph off CUDA


def test_bench_steps_help():
    proc = subprocess.run([sys.executable, "-m", "bench.steps", "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "--small" in proc.stdout


def test_bench_steps_forces_a_gpgpu_path(tmp_path):
    """``--gpgpu-path search`` runs every gpgpu step through the search (``ticket_search``, its
    launch before the kernel's), each row checked by the oracle and naming the way its plan took."""
    env = dict(os.environ)
    if DEVICE == "cpu":
        env["TRITON_INTERPRET"] = "1"
    out = tmp_path / "steps.json"
    cmd = [sys.executable, "-m", "bench.steps", "--small", "--device", DEVICE, "--routes", "gpgpu", "--no-official",
           "--gpgpu-path", "search", "--host-calls", "3", "--json", str(out)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = json.loads(out.read_text())["rows"]
    assert rows and all(r["check"] == "ok" and r["gpgpu_path"] == "search" for r in rows)
    assert all(r["step_launches"] == 2 for r in rows)  # the search's one launch, then the kernel


def test_bench_steps_counts_launches_after_every_host_time(monkeypatch):
    """A profiler session slows every later call's host time on a GPU, so ``bench.steps`` counts
    launches (with the profiler) only once every row's host time is taken, then fills each row."""
    from types import SimpleNamespace

    from bench import steps

    events = []

    def fake_workloads(small, device, official=True):
        for name in ("decode-a", "mixed-b"):
            yield "decode", SimpleNamespace(name=name, positions=None, kv_slot_mapping=None, compress_ratio=128,
                                            state_slot_mapping=None), None

    def fake_measure(kind, sw, expected, route, device, time_fn, host_calls, launches=True):
        events.append(("host", sw.name, route, launches))
        return {"kind": kind, "case": sw.name, "route": route, "num_tokens": 1, "num_outputs": 1, "check": "ok",
                "step_ms": 1.0, "step_graph_ms": None, "step_host_us": 1.0, "indexed_ms": 1.0,
                "indexed_graph_ms": None, "indexed_host_us": 1.0, "x_indexed": 1.0}

    def fake_count(sw, found, route, device):
        events.append(("launches", sw.name, route))
        return {"step_launches": len(sw.name), "indexed_launches": 1}

    monkeypatch.setattr(steps, "workloads", fake_workloads)
    monkeypatch.setattr(steps, "measure", fake_measure)
    monkeypatch.setattr(steps, "count_launches", fake_count)
    monkeypatch.setattr(steps, "boundary_tokens", lambda *a: None)
    monkeypatch.setattr(steps, "make_timer", lambda device: SimpleNamespace(how="fake"))
    rows = []
    monkeypatch.setattr(steps, "_run", lambda *a, _run=steps._run: _run(*a[:4], rows))
    assert steps.main(["--device", "cpu", "--routes", "gpgpu,ascend:fused"]) == 0
    kinds = [e[0] for e in events]
    assert kinds == ["host"] * 4 + ["launches"] * 4, events  # no count before the last host time
    assert all(e[3] is False for e in events if e[0] == "host")  # measure itself counts nothing
    assert [(r["case"], r["route"], r["step_launches"]) for r in rows] == [
        ("decode-a", "gpgpu", 8), ("decode-a", "ascend:fused", 8), ("mixed-b", "gpgpu", 7), ("mixed-b", "ascend:fused", 7)]
