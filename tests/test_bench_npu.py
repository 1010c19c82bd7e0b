"""The bench on an Ascend NPU host, with stand-ins (no NPU exists where these run).

* The float64 truth is built from host copies of the checked arguments, so that an op torch-npu
  lacks (or runs without float64) never runs on the device; a truth that cannot be built marks
  that case's rows as errors, and the run goes on.
* ``torch_npu.profiler`` is given an explicit one-step schedule (the default always records and
  warns on every call) and Level1 (Level0 writes no ``op_statistic.csv``, so no copy count).
* ``python -m bench.profile_case`` profiles on the NPU through that profiler.
* Importing the bench imports no torch_npu.
"""

import csv
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

import ascend_kvc.oracle
import ascend_kvc.workloads
from ascend_kvc.workloads import make_workload
from bench import cli, launches

REPO = Path(__file__).resolve().parent.parent


def _workload_tensors(w):
    return [t for t in w.args() if isinstance(t, torch.Tensor)]


def _truth_refusing(tensors):
    """compute_truth that raises, as a device without float64 would, when handed any of ``tensors``'
    storage (the workload's own, on its device) instead of a host copy."""
    real = ascend_kvc.oracle.compute_truth

    def compute_truth(args):
        given = [getattr(args, f) for f in vars(args) if isinstance(getattr(args, f), torch.Tensor)]
        ptrs = {t.untyped_storage().data_ptr() for t in tensors}
        if any(t.device.type != "cpu" or t.untyped_storage().data_ptr() in ptrs for t in given):
            raise RuntimeError("frexp: no float64 kernel on this device")
        return real(args)

    return compute_truth


def _measure(w, routes):
    from types import SimpleNamespace

    info = {"read_gbs": 10.0}
    return cli.measure_case(w, "shuffled", routes, "cpu", info, cli.make_timer("cpu"), SimpleNamespace(host_calls=5),
                            cli.Progress(len(routes), False))


def test_truth_is_built_from_host_copies(monkeypatch):
    w = make_workload(1, 256, 128, shuffle=True, nonzero_cache=True)
    monkeypatch.setattr(ascend_kvc.oracle, "compute_truth", _truth_refusing(_workload_tensors(w)))
    rows = _measure(w, ["reference"])
    assert [r["check"] for r in rows] == ["ok"], rows[0]["check_detail"]


def test_the_oracle_still_catches_wrong_bytes_on_host_copies(monkeypatch):
    """The copies are judged against what the route wrote, not against themselves."""
    import ascend_kvc

    real = ascend_kvc.c128_256_512_compress

    def off_by_one(*args, **kwargs):
        out = real(*args, **kwargs)
        if kwargs.get("validate", True):  # the checked call, not the timed ones
            out.view(-1)[0] ^= 0xFF  # the first byte of the first slot, every bit flipped
        return out

    monkeypatch.setattr(ascend_kvc, "c128_256_512_compress", off_by_one)
    w = make_workload(1, 256, 128)
    rows = _measure(w, ["reference"])
    assert rows[0]["check"] == "FAIL"


def test_a_truth_that_cannot_be_built_marks_only_its_rows(tmp_path, monkeypatch, capsys):
    real = ascend_kvc.oracle.compute_truth

    def compute_truth(args):
        if args.compress_ratio == 256:
            raise RuntimeError("scatter_reduce: no float64 kernel on this device")
        return real(args)

    monkeypatch.setattr(ascend_kvc.oracle, "compute_truth", compute_truth)
    rc = cli.main(["--device", "cpu", "--cases", "1,256,128", "1,512,256", "1,1024,512", "--routes", "reference",
                   "--no-progress", "--csv", str(tmp_path / "r.csv")])
    assert rc == 1  # a row failed: the run says so in its status, and finished
    rows = list(csv.DictReader(open(tmp_path / "r.csv")))
    assert [(r["case"], r["check"]) for r in rows] == [
        ("R1-T256-C128", "ok"), ("R1-T512-C256", "ERROR"), ("R1-T1024-C512", "ok")]
    assert "float64 truth could not be built" in rows[1]["check_detail"] and "scatter_reduce" in rows[1]["check_detail"]
    assert float(rows[2]["ms"]) > 0 and rows[1]["ms"] == ""
    assert "ERROR: R1-T512-C256 shuffled reference" in capsys.readouterr().out


class _FakeNpuProfiler:
    """A stand-in ``torch_npu.profiler`` that records what it was given and, at the end of the
    recorded step, writes ``op_statistic.csv`` where the trace handler points (as Level1 does)."""

    def __init__(self):
        self.given = []
        self.ProfilerActivity = types.SimpleNamespace(NPU="NPU", CPU="CPU")
        self.ProfilerLevel = types.SimpleNamespace(Level0="Level0", Level1="Level1", Level2="Level2")
        fake = self

        class profile:
            def __init__(self, **kwargs):
                fake.given.append(kwargs)
                self.kwargs, self.steps = kwargs, 0

            def __enter__(self):
                return self

            def step(self):
                self.steps += 1
                level = self.kwargs["experimental_config"]["profiler_level"]
                self.kwargs["on_trace_ready"](level)

            def __exit__(self, *exc):
                return False

        self.profile = profile

    @staticmethod
    def schedule(**kwargs):
        return ("schedule", kwargs)

    @staticmethod
    def _ExperimentalConfig(**kwargs):
        return kwargs

    @staticmethod
    def tensorboard_trace_handler(out_dir):
        def write(level):
            out = Path(out_dir) / "host_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
            out.mkdir(parents=True, exist_ok=True)
            if level != "Level0":  # Level0 writes no op_statistic.csv
                (out / "op_statistic.csv").write_text("OP Type,Count,Total Time(us)\n"
                                                      "_fused_kernel,1,30.0\nMemSet,2,4.0\n")
            (out / "kernel_details.csv").write_text("Name,Duration(us)\n_fused_kernel,30.0\nMemSet,2.0\nMemSet,2.0\n")
        return write


@pytest.fixture
def fake_npu(monkeypatch):
    fake = _FakeNpuProfiler()
    module = types.ModuleType("torch_npu")
    module.profiler = fake
    module.__version__ = "2.7.1 (stand-in)"
    monkeypatch.setitem(sys.modules, "torch_npu", module)
    synced = []
    monkeypatch.setattr(torch, "npu", types.SimpleNamespace(synchronize=lambda *a: synced.append(1)), raising=False)
    return fake


def test_npu_profiler_gets_one_step_schedule_and_level1(fake_npu):
    calls = []
    got = launches.count_device_kernels(lambda: calls.append(1), "npu", flush=lambda: None)
    assert calls == [1] and len(fake_npu.given) == 1
    given = fake_npu.given[0]
    assert given["schedule"] == ("schedule", {"wait": 0, "warmup": 0, "active": 1, "repeat": 1})
    assert given["experimental_config"] == {"profiler_level": "Level1"}
    assert given["activities"] == ["NPU"]
    # op_statistic.csv was written and read: the copies column has a number
    assert got["kernels"] == 3 and got["copies"] == 2 and got["device_ms"] == pytest.approx(0.034)
    assert "op_statistic.csv" in got["how"]


def test_profile_case_profiles_on_an_npu(fake_npu, tmp_path, monkeypatch, capsys):
    from bench import machine, profile_case

    monkeypatch.setattr(machine, "detect_device", lambda: "npu")
    real = ascend_kvc.workloads.make_workload
    monkeypatch.setattr(ascend_kvc.workloads, "make_workload", lambda *a, **k: real(*a, **{**k, "device": "cpu"}))
    rc = profile_case.main(["1", "256", "128", "reference", "--calls", "2", "--trace-dir", str(tmp_path / "prof")])
    assert rc == 0
    out = capsys.readouterr().out
    assert f"trace in {tmp_path / 'prof'}" in out and "per call: 1.5 device ops (copies: 1)" in out
    assert fake_npu.given[0]["experimental_config"] == {"profiler_level": "Level1"}


@pytest.mark.parametrize("argv, says", [
    (["1", "256", "128", "--device", "cpu"], "no device profiler to run on CPU"),
    (["3", "512", "128"], "T=512 must be a multiple of R=3"),
    (["1", "256", "128", "warp-drive"], "route: unknown 'warp-drive'"),
    (["1", "256", "128", "--calls", "0"], "--calls: must be >= 1"),
])
def test_profile_case_refuses_in_one_line(argv, says, capsys):
    from bench import profile_case

    with pytest.raises(SystemExit) as exit_:
        profile_case.main(argv)
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err.strip().splitlines()[-1]


def test_importing_the_bench_imports_no_torch_npu(tmp_path):
    """A torch_npu that fails on import: every bench module still imports (nothing probes at import)."""
    (tmp_path / "torch_npu").mkdir()
    (tmp_path / "torch_npu" / "__init__.py").write_text("raise ImportError('torch_npu imported at import time')\n")
    modules = sorted(p.stem for p in (REPO / "bench").glob("*.py") if p.stem != "__main__")
    code = "import importlib\n" + "".join(f"importlib.import_module('bench.{m}')\n" for m in modules)
    env = {"PYTHONPATH": f"{REPO}:{tmp_path}", "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
