"""The main job end to end: correctness column, table, CSV, JSON, PNG and the report folder.

On a CPU-only machine (CI) it runs the Triton routes through the interpreter; with a CUDA GPU
present it runs them compiled there, as a user on that machine would.
"""

import csv

import torch
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_bench_cli_end_to_end(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    cmd = [sys.executable, "-m", "bench", "--device", DEVICE, "--cases", "1,256,128",
           "--routes", "reference,ascend:pre-gather,ascend,gpgpu",
           "--csv", str(tmp_path / "r.csv"), "--json", str(tmp_path / "r.json"), "--plot", str(tmp_path / "r.png"),
           "--report", str(tmp_path / "rep"), "--host-calls", "20"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"device {DEVICE}" in proc.stdout
    assert ("functional run" in proc.stdout) == (DEVICE == "cpu")
    rows = list(csv.DictReader(open(tmp_path / "r.csv")))
    assert [r["route"] for r in rows][:4] == ["reference", "ascend:pre-gather", "ascend", "gpgpu"]
    assert all(r["check"] == "ok" and float(r["ms"]) > 0 for r in rows)
    assert rows[2]["x_pregather"] and float(rows[0]["x_ref"]) == 1.0
    data = json.load(open(tmp_path / "r.json"))
    assert data["machine"]["device"] == DEVICE and len(data["results"]) == 4 * (1 if DEVICE == "cpu" else 2)
    assert (tmp_path / "r.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # gpgpu is one Triton launch and no framework op; the reference is framework ops only.
    assert all(float(r["host_us"]) > 0 and float(r["aten_ops"]) >= 0 for r in rows)
    assert float(rows[0]["aten_ops"]) > 0
    if DEVICE == "cuda":
        assert all(float(r["kernels"]) >= 1 for r in rows)
    else:  # no device profiler on CPU: no number rather than a made-up one
        assert all(r["kernels"] == "" and int(r["triton_launches"]) >= (r["route"] != "reference") for r in rows)
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "read bandwidth" in report
    assert ("## Fastest per case" in report) == (DEVICE != "cpu")  # the interpreter's times rank nothing
    for name in ("bench.csv", "bench.json", "ladder.png", "floor.png", "launches.png"):
        assert (tmp_path / "rep" / name).is_file()


def test_bench_rejects_unknown_stage():
    proc = subprocess.run([sys.executable, "-m", "bench", "--device", "cpu", "--stages", "warp-drive"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "unknown" in proc.stderr


def test_bench_counts_kernels_after_every_host_time(monkeypatch, tmp_path):
    """A profiler session slows every later call's host time on a GPU, so the main job counts
    kernels (with the profiler) only once every case's host time is taken, on the same seeded
    workloads built again, and fills each case's rows."""
    from bench import cli

    events = []

    def fake_measure(w, layout, routes, device, info, time_fn, args, progress):
        events.append(("host", w.name, layout))
        return [{"case": w.name, "layout": layout, "route": r, "num_outputs": w.num_outputs, "check": "ok",
                 "check_detail": "ok", "ms": 1.0, "host_us": 1.0, "floor_ms": 1.0, "bytes": 1, "kernels": None,
                 "device_ms": None, "first_state": float(w.state_cache.flatten()[5])} for r in routes]

    def fake_count(w, rows, device):
        events.append(("kernels", w.name, rows[0]["layout"]))
        assert all(r["first_state"] == float(w.state_cache.flatten()[5]) for r in rows)  # the same workload
        for r in rows:
            r["kernels"] = 7

    monkeypatch.setattr(cli, "measure_case", fake_measure)
    monkeypatch.setattr(cli, "count_case_kernels", fake_count)
    json_path = tmp_path / "r.json"
    assert cli.main(["--device", "cpu", "--cases", "1,256,128", "1,512,256", "--contiguous", "--kernels", "every",
                     "--routes", "reference,gpgpu", "--no-progress", "--json", str(json_path)]) == 0
    kinds = [e[0] for e in events]
    assert kinds == ["host", "host", "kernels", "kernels"], events  # no count before the last host time
    assert [e[1:] for e in events[:2]] == [e[1:] for e in events[2:]]
    assert all(r["kernels"] == 7 for r in json.load(open(json_path))["results"])
