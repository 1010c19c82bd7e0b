"""Engine-shaped steps through ``compress_step``: ``python -m bench.steps [--small] [--json PATH]``.

Workloads (``ascend_kvc.workloads``): decode steps of 1, 64 and 256 requests x 1 token with 0, 1
and 8 boundary tokens among them (C = 128); a mixed step, an 8192-token prefill chunk plus 64
decode tokens (C = 128 and 512); the 12 official cases run as steps, whose boundary tokens must
be exactly the case's ``boundary_token_indices``. ``--small`` runs interpreter-sized look-alikes
(for a CPU test).

Per workload and route, after an oracle check of the step's bytes: graph-replay time (CUDA
graphs; none elsewhere), eager time, host time a call, launches a call (device kernels from the
profiler on a GPU or NPU; Triton launches under the CPU interpreter), and the same for
``c128_256_512_compress`` given the boundary indices, with the ratio step / indices given.
``--gpgpu-path`` plans ``gpgpu``'s steps one way of finding their boundary tokens (a program per
token, the search inside the kernel, token tiles where the step allows them, or the listers of
the search by ticket), to compare them on the same steps; each ``gpgpu`` row of the JSON names the way its
plan took.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from ascend_kvc import c128_256_512_compress, compress_step
from ascend_kvc.oracle import check_cache
from ascend_kvc import step as step_module
from ascend_kvc.step import boundary_tokens
from ascend_kvc.workloads import (
    DECODE_STEPS, OFFICIAL_CASES, SMALL_CASES, SMALL_DECODE_STEPS, decode_step, mixed_step, official_step,
)
from bench.cli import make_timer, time_graph
from bench.launches import count_device_kernels, count_framework_ops, host_us_per_call
from bench.machine import detect_device, machine_info, machine_line, synchronize
from tools import memcheck

ROUTES = ("gpgpu", "ascend", "ascend:fused")


def workloads(small: bool, device: str, official: bool = True):
    """``(kind, step workload, expected boundary indices or None)``, built one at a time."""
    for num_reqs, boundaries in (SMALL_DECODE_STEPS if small else DECODE_STEPS):
        yield "decode", decode_step(num_reqs, boundaries, 128, device=device), None
    for C in ((128,) if small else (128, 512)):
        kw = dict(prefill_tokens=512, decode_tokens=4) if small else {}
        yield "mixed", mixed_step(C, device=device, **kw), None
    if official:
        for case in (SMALL_CASES[:1] if small else OFFICIAL_CASES):
            step, w = official_step(*case, shuffle=True, nonzero_cache=True, device=device)
            yield "official", step, w.boundary_token_indices


def _launches(call, device: str) -> float | None:
    if device == "cpu":
        return count_framework_ops(call, device)["triton_launches"]
    return count_device_kernels(call, device, warmup=True)["kernels"]


def measure(kind: str, sw, expected, route: str, device: str, time_fn, host_calls: int,
            launches: bool = True) -> dict:
    """One row: the oracle's verdict on the step, then its times and the operator's with the indices
    given; with ``launches``, their launches a call too (``count_launches``; ``main`` counts them
    in a pass of their own, after every row's host time: see there)."""
    found = boundary_tokens(sw.positions, sw.kv_slot_mapping, sw.compress_ratio, sw.state_slot_mapping)
    if expected is not None:  # an official case as a step: its boundary tokens are the case's
        assert torch.equal(found.cpu(), expected.cpu().to(found.dtype)), f"{sw.name}: boundary tokens differ"
    row = {"kind": kind, "case": sw.name, "route": route, "num_tokens": sw.num_tokens, "num_outputs": found.numel()}
    before = sw.kv_cache.clone()
    out = before.clone()
    w = sw.as_operator(found)
    calls = _calls(sw, w, route, out)
    calls["step"]()
    synchronize(device)
    report = check_cache(w.checked_args(), out, before)
    row["check"] = "ok" if report.ok else "FAIL"
    if not report.ok:  # a speed is never reported on a red check
        row["check_detail"] = str(report)
        return row

    for name, call in calls.items():
        call()
        row[f"{name}_ms"] = time_fn(call)["ms"]
        row[f"{name}_graph_ms"] = time_graph(call, time_fn) if device == "cuda" else None
        row[f"{name}_host_us"] = (row[f"{name}_ms"] * 1e3 if device == "cpu"
                                  else host_us_per_call(call, lambda: synchronize(device), host_calls))
    if launches:
        row.update(count_launches(sw, found, route, device))
    best = "graph_ms" if row["step_graph_ms"] is not None else "ms"
    row["x_indexed"] = row[f"step_{best}"] / row[f"indexed_{best}"]
    return row


def count_launches(sw, found, route: str, device: str) -> dict:
    """``{"step_launches", "indexed_launches"}``: launches a call of the step and of the indexed
    call of its boundary tokens ``found``, on a GPU or NPU each after one untimed call
    (``count_device_kernels``' warm-up: a plan made now has its scratch before the count)."""
    return {f"{name}_launches": _launches(call, device)
            for name, call in _calls(sw, sw.as_operator(found), route, sw.kv_cache.clone()).items()}


def _calls(sw, w, route: str, out) -> dict:
    """``{"step", "indexed"}``: the step ``sw`` through ``compress_step`` and its boundary tokens
    through ``c128_256_512_compress`` (``w``, ``sw.as_operator``), both writing ``out`` in place."""
    step_args = (*sw.args()[:-1], out)
    return {"step": lambda: compress_step(*step_args, **sw.kwargs(), route=route, validate=False),
            "indexed": lambda: c128_256_512_compress(*w.args(), out=out, route=route, validate=False)}


def _fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m bench.steps",
        description="Engine-shaped steps through compress_step (decode steps, a prefill chunk with decode "
                    "tokens, the official cases run as steps), each checked against the oracle, then timed "
                    "against c128_256_512_compress given the boundary indices.",
        epilog="examples:\n  python -m bench.steps\n  python -m bench.steps --routes gpgpu,ascend:fused "
               "--no-official --json steps.json\n  TRITON_INTERPRET=1 python -m bench.steps --small --device cpu",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cuda", "npu", "cpu"], default=None,
                   help="where to run (default: the first available of cuda, npu, cpu)")
    p.add_argument("--routes", default=",".join(ROUTES), help=f"comma-separated routes (default: {','.join(ROUTES)})")
    p.add_argument("--small", action="store_true", help="interpreter-sized workloads, for a CPU (default: off)")
    p.add_argument("--no-official", action="store_true",
                   help="leave out the official cases run as steps (default: off)")
    p.add_argument("--host-calls", type=int, default=200,
                   help="calls timed for the host time on a GPU or NPU (default: 200)")
    p.add_argument("--gpgpu-path", choices=["planned", *memcheck.GPGPU_STEP_PATHS], default="planned",
                   help="how gpgpu finds a step's boundary tokens: as planned; per-token, a program per token "
                        "and work item for every step; inline, no per-token grid (a decode step searched inside "
                        "the kernel); token-tiles, token tiles past a decode step too (more than 16 requests "
                        "still search); or search, the search by ticket for every step (gpgpu_fallback/route.py). "
                        "Each row's JSON names the way taken (default: planned)")
    p.add_argument("--json", metavar="PATH", help="write the machine line and every row (default: not written)")
    a = p.parse_args(argv)
    from ascend_kvc.routes import route_names

    routes = [r for r in a.routes.split(",") if r]
    unknown = [r for r in routes if r not in route_names()]
    if not routes or unknown:
        p.error(f"--routes: unknown route(s) {unknown or a.routes!r}; choose from {', '.join(route_names())}")
    if a.host_calls < 1:
        p.error(f"--host-calls must be >= 1, got {a.host_calls}")
    device = a.device or detect_device()
    info = machine_info(device)
    print(machine_line(info))
    time_fn = make_timer(device)
    rows = []
    header = (f"{'case':<28} {'route':<13} {'tok':>6} {'out':>4} {'step graph/eager ms':>20} "
              f"{'indexed graph/eager ms':>23} {'host us s/i':>12} {'launch s/i':>10} {'x idx':>6}")
    print(header)
    with memcheck.gpgpu_step_path(None if a.gpgpu_path == "planned" else a.gpgpu_path):
        _run(a, routes, device, time_fn, rows)
    print(f"timing: {time_fn.how}; x idx = step / indexed, graph replay where captured")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": info, "timing": time_fn.how, "rows": rows}, f, indent=1, default=str)
    return 0 if all(r["check"] == "ok" for r in rows) else 1


def _run(a, routes: list[str], device: str, time_fn, rows: list[dict]) -> None:
    """Every row's times first, then every row's launches, on the workloads built again.

    Launches are counted with the device's profiler, and on a GPU the calls after a profiler
    session took 1.5-3 µs more host time, as long as it was measured (bench/RESULTS.md, "What the
    bench's own harness does"); so no host time is taken after the first count."""
    for kind, sw, expected in workloads(a.small, device, official=not a.no_official):
        for route in routes:
            step_module.clear_step_plans()
            row = measure(kind, sw, expected, route, device, time_fn, a.host_calls, launches=False)
            plans = list(step_module._STEP_PLANS.values())  # the way the step's plan found its boundary tokens
            if route == "gpgpu":
                row["gpgpu_path"] = memcheck.gpgpu_plan_path(plans[0]) if plans else None
            elif plans and hasattr(plans[0], "token_tiles"):  # the Ascend routes
                row["ascend_path"] = memcheck.ascend_plan_path(plans[0])
            rows.append(row)
            if row["check"] != "ok":
                print(f"{row['case']:<28} {route:<13} CHECK FAILED: {row['check_detail'][:200]}")
        del sw
    print(f"({len(rows)} rows timed; their launches follow, each row with its line)", flush=True)
    timed = iter(rows)
    for kind, sw, expected in workloads(a.small, device, official=not a.no_official):
        found = boundary_tokens(sw.positions, sw.kv_slot_mapping, sw.compress_ratio, sw.state_slot_mapping)
        for route in routes:
            row = next(timed)
            assert (row["case"], row["route"]) == (sw.name, route), "workloads() must repeat itself"
            if row["check"] != "ok":
                continue
            step_module.clear_step_plans()
            row.update(count_launches(sw, found, route, device))
            print(f"{row['case']:<28} {route:<13} {row['num_tokens']:>6} {row['num_outputs']:>4} "
                  f"{_fmt(row['step_graph_ms'], '.4f'):>9}/{row['step_ms']:<10.4f} "
                  f"{_fmt(row['indexed_graph_ms'], '.4f'):>11}/{row['indexed_ms']:<11.4f} "
                  f"{row['step_host_us']:>5.0f}/{row['indexed_host_us']:<6.0f} "
                  f"{_fmt(row['step_launches'], '.0f'):>4}/{_fmt(row['indexed_launches'], '<5.0f')} "
                  f"{row['x_indexed']:>6.2f}")
        del sw


if __name__ == "__main__":
    sys.exit(main())
