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
