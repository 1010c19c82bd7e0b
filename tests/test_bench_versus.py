"""``bench.versus`` on CPU, its GPU timers replaced by fakes: what the passes measure and report.

The comparison runs on an H200; here every timer returns a known sequence, so the test can see
that each pass times every implementation again, that a figure is the median of the passes, that
the order of the implementations rotates between passes, and that an implementation whose bytes
go wrong in a later pass is reported as wrong, not timed.
"""

import itertools
import json

import torch

import bench.versus as versus
from ascend_kvc import c128_256_512_compress
from ascend_kvc.workloads import make_workload

CASE = (1, 256, 128)  # two outputs: the reference route runs them in well under a second


def _rival(tmp_path, good_calls: int):
    """A rival file whose first ``good_calls`` calls write the right bytes and later ones none."""
    path = tmp_path / "rival.py"
    path.write_text(
        "from ascend_kvc import c128_256_512_compress as _ours\n"
        "calls = 0\n"
        "def c128_256_512_compress(*args):\n"
        "    global calls\n"
        "    calls += 1\n"
        f"    if calls > {good_calls}:\n"
        "        return args[8]\n"
        "    return _ours(*args, out=args[8], route='reference')\n")
    return str(path)


def _fake_gpu(monkeypatch, order: list):
    """Replace every GPU-only piece of ``bench.versus`` by a CPU stand-in; timers count up."""
    ticks = itertools.count(1)
    monkeypatch.setattr(versus, "OFFICIAL_CASES", [CASE])
    monkeypatch.setattr(versus, "machine_info", lambda device: {"name": "fake", "device": device})
    monkeypatch.setattr(versus, "measure_bandwidth", lambda device, fn: {"read_gbs": 1000.0})
    monkeypatch.setattr(versus, "make_workload", lambda *a, **k: make_workload(*a, **{**k, "device": "cpu"}))
    monkeypatch.setattr(versus, "graph_ms", lambda fn: 0.010)
    monkeypatch.setattr(versus, "count_device_kernels", lambda fn, device, warmup=False: {"kernels": 1})

    def time_ms(fn):
        order.append(fn)
        return next(ticks) / 1000.0

    monkeypatch.setattr(versus, "time_ms", time_ms)
    monkeypatch.setattr(versus, "host_us", lambda fn, idle=False: [float(next(ticks))] * 3)
    randn = torch.randn
    monkeypatch.setattr(torch, "randn", lambda *a, device=None, **k: randn(*a, **k))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # versus refuses to start without a GPU
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)


def test_passes_time_again_report_the_median_and_rotate_the_order(tmp_path, monkeypatch):
    order = []
    _fake_gpu(monkeypatch, order)
    out = tmp_path / "v.json"
    rival = _rival(tmp_path, good_calls=10)
    assert versus.main([rival, "--name", "rival", "--routes", "reference", "--passes", "3", "--json", str(out)]) == 0
    rows = {r["impl"]: r for r in json.load(open(out))["rows"]}
    assert set(rows) == {"ours:reference", "rival"} and all(r["ok"] for r in rows.values())
    for r in rows.values():
        for metric in ("eager", "host", "host_idle"):
            passes = r[f"{metric}_passes"]
            assert len(passes) == 3 and passes == sorted(passes)  # the fake timers only count up
            assert r[f"{metric}_us"] == passes[1]  # the median of three
    # Each eager timing is one time_ms call: pass 1 in the given order, pass 2 rotated by one.
    assert len(order) == 6
    first = [rows["ours:reference"]["eager_passes"][0], rows["rival"]["eager_passes"][0]]
    second = [rows["ours:reference"]["eager_passes"][1], rows["rival"]["eager_passes"][1]]
    assert first[0] < first[1] and second[1] < second[0]


def test_bytes_wrong_in_a_later_pass_are_reported_not_timed(tmp_path, monkeypatch):
    _fake_gpu(monkeypatch, [])
    out = tmp_path / "v.json"
    rival = _rival(tmp_path, good_calls=1)  # right in the first pass, wrong from the second on
    assert versus.main([rival, "--name", "rival", "--routes", "reference", "--passes", "2", "--json", str(out)]) == 0
    rows = {r["impl"]: r for r in json.load(open(out))["rows"]}
    assert rows["ours:reference"]["ok"] and len(rows["ours:reference"]["host_passes"]) == 2
    assert not rows["rival"]["ok"] and len(rows["rival"]["host_passes"]) == 1
    assert "host_us" not in rows["rival"]


def test_ours_calls_the_operator_in_place():
    w = make_workload(*CASE, device="cpu")
    args = w.args()
    out = w.kv_cache.clone()
    got = versus._caller("ours:reference", None, args, out)()
    assert got is out
    want = c128_256_512_compress(*args, route="reference")
    assert torch.equal(out, want)


def test_kernels_are_counted_after_every_passs_host_time(tmp_path, monkeypatch):
    """A profiler session slows every later call's host time on a GPU: the device kernels are
    counted (the profiler) only once every pass has taken its host times, for every ok row."""
    _fake_gpu(monkeypatch, [])
    events = []
    ticks = itertools.count(1)

    def host_us(fn, idle=False):
        events.append("host")
        return [float(next(ticks))] * 3

    def count(fn, device, warmup=False):
        events.append("kernels")
        fn()  # the call counted is a real one: it runs
        return {"kernels": 1}

    monkeypatch.setattr(versus, "host_us", host_us)
    monkeypatch.setattr(versus, "count_device_kernels", count)
    out = tmp_path / "v.json"
    rival = _rival(tmp_path, good_calls=10)
    assert versus.main([rival, "--name", "rival", "--routes", "reference", "--passes", "2", "--json", str(out)]) == 0
    first_count = events.index("kernels")
    assert "host" in events and "host" not in events[first_count:], events
    assert events.count("kernels") == 2
    assert all(r["kernels"] == 1 for r in json.load(open(out))["rows"])
