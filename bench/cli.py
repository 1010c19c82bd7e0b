"""``python -m bench``: correctness first, then timings of every route and Ascend stage.

    python -m bench                          # defaults for the device found (npu -> cuda -> cpu),
                                             # report into bench/results/<device>-<date>/
    python -m bench --report out/            # the same report into out/
    python -m bench --cases official --routes reference,gpgpu --csv out.csv --json out.json
    python -m bench --cases 8,131072,512 --stages block-d512,byte-scatter --plot ladder.png

Every (case, layout, route) is first checked against the byte oracle; a route that fails is
reported and never timed. Then each passing one is timed on the device (wall time of a call),
its device kernels are counted and their own durations summed with the vendor profiler (device
time: the wall time less the gaps that launches leave), its PyTorch ops are counted with a
dispatch counter, and its host time per call is measured. The report folder holds report.md (summary first), bench.csv, bench.json and
three figures. On a CPU-only machine the default is the small cases, with the Triton routes run
through the interpreter: a functional run whose times say nothing about a GPU or NPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time


AUTO_REPORT = "auto"


def report_folder(requested: str, info: dict) -> str:
    """``requested``, or for ``auto`` bench/results/<device>-<YYYY-MM-DD>, with -HHMM if that exists."""
    if requested != AUTO_REPORT:
        return requested
    from pathlib import Path

    name = info.get("name", info["device"]) if info["device"] != "cpu" else "cpu"
    slug = "".join(ch for ch in name.lower().removeprefix("nvidia ").replace(" ", "-") if ch.isalnum() or ch == "-")
    root = Path(__file__).resolve().parent / "results"
    base = root / f"{slug or info['device']}-{time.strftime('%Y-%m-%d')}"
    for candidate in (base, Path(f"{base}-{time.strftime('%H%M')}"), Path(f"{base}-{time.strftime('%H%M%S')}")):
        if not candidate.exists():
            return str(candidate)
    return str(candidate)


def _parse_cases(items: list[str]) -> list[tuple[int, int, int]]:
    from ascend_kvc.workloads import OFFICIAL_CASES, SMALL_CASES

    cases: list[tuple[int, int, int]] = []
    for item in items:
        if item == "official":
            cases += OFFICIAL_CASES
        elif item == "small":
            cases += SMALL_CASES
        else:
            try:
                r, t, c = (int(x) for x in item.split(","))
            except ValueError:
                raise SystemExit(f"--cases: expected 'official', 'small' or R,T,C; got {item!r}")
            cases.append((r, t, c))
    return cases


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["auto", "npu", "cuda", "cpu"], default="auto")
    p.add_argument("--cases", nargs="+", default=None,
                   help="'official' (the 12 cases of docs/CONTRACT.md), 'small', or R,T,C triples (default: official on a GPU/NPU, small on CPU)")
    p.add_argument("--routes", default=None,
                   help="comma-separated: reference, ascend, ascend:<stage>, gpgpu (default: reference, every Ascend stage, gpgpu)")
    p.add_argument("--stages", default=None, help="comma-separated Ascend stages to run (default: all)")
    p.add_argument("--shuffle", action="store_true", help="only the shuffled block-table layout (default: contiguous and shuffled)")
    p.add_argument("--contiguous", action="store_true", help="only the contiguous layout")
    p.add_argument("--inplace", action="store_true",
                   help="write in place into a non-zero cache for every layout (shuffled always does)")
    p.add_argument("--block-size", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", nargs="?", const=AUTO_REPORT, metavar="DIR",
                   help="write report.md, bench.csv, bench.json and the figures into DIR (no DIR: "
                        "bench/results/<device>-<YYYY-MM-DD>[-HHMM]/); the default unless --csv/--json/--plot "
                        "or --no-report is given")
    p.add_argument("--no-report", action="store_true", help="print the table only")
    p.add_argument("--csv", metavar="PATH")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--plot", metavar="PNG", help="the ladder figure alone (the floor figure when no Ascend rung runs)")
    p.add_argument("--host-calls", type=int, default=100,
                   help="calls queued per host-time measurement on a GPU/NPU (on CPU the timed calls are used); "
                        "100 calls of a few kernels stay inside the launch queue")
    p.add_argument("--kernels", choices=["auto", "every", "per-ratio"], default="auto",
                   help="which rows get a profiler kernel count and device time: every row, or the first case "
                        "of each C per route and layout (auto: every row on CUDA, per-ratio on an NPU, whose "
                        "profiler parses its trace from disk for seconds each time)")
    p.add_argument("--no-progress", action="store_true")
    return p


def _routes(args, device: str) -> list[str]:
    from ascend_kvc import ASCEND_STAGES

    stages = args.stages.split(",") if args.stages else list(ASCEND_STAGES)
    unknown = set(stages) - set(ASCEND_STAGES)
    if unknown:
        raise SystemExit(f"--stages: unknown {sorted(unknown)}; the ladder is {', '.join(ASCEND_STAGES)}")
    if args.routes:
        routes = args.routes.split(",")
    else:
        routes = ["reference", *(f"ascend:{s}" for s in stages)]
        if device != "npu":
            routes.append("gpgpu")
    if "reference" not in routes:
        routes.insert(0, "reference")  # every speed-up is measured against it
    return routes


# Routes that promise no host sync and no data-dependent allocation with validate=False: their
# CUDA-graph replay is timed too (what an engine that captures graphs sees: no launch gaps).
GRAPH_ROUTES = ("gpgpu",)


def time_graph(call, time_fn) -> float:
    import torch

    call()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    return time_fn(graph.replay)["ms"]


def make_timer(device: str):
    """Return ``time_fn(fn) -> {ms, p20, p80}`` for the device: events on GPU/NPU, a clock on CPU.

    ``time_fn.how`` names the method, for the report.
    """
    if device == "cpu":
        def time_cpu(fn, reps: int = 1):
            # The interpreter is slow: the correctness run already compiled everything, so one
            # timed call; the numbers only say the route runs.
            samples = []
            for _ in range(reps):
                t = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - t) * 1e3)
            return {"ms": statistics.median(samples), "p20": min(samples), "p80": max(samples)}
        time_cpu.how = "wall clock of one call"
        return time_cpu

    import triton.testing

    def time_device(fn):
        # On an NPU this is triton-ascend's do_bench (its driver hands it torch.npu's events and
        # an L2-sized buffer to flush); elsewhere community Triton's, on CUDA events.
        ms, p20, p80 = triton.testing.do_bench(fn, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])
        return {"ms": ms, "p20": p20, "p80": p80}
    time_device.how = "triton.testing.do_bench median (L2 flushed between calls)"
    return time_device


def _ascend_programs(device: str) -> int | None:
    """The most programs an Ascend grid had in this run (``ascend_kvc.device.ascend_programs``:
    the vector cores of an NPU, ``ASCEND_KVC_VECTOR_CORES`` where set), for the occupancy model."""
    import torch

    from ascend_kvc.device import ascend_programs

    try:
        return ascend_programs(torch.device(device))
    except Exception:  # a device query that fails must not sink the benchmark
        return None


class Progress:
    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.enabled, self.t0 = total, 0, enabled, time.time()

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                         f"{time.time() - self.t0:5.0f}s {label[:60]:<60}")
        sys.stderr.flush()
        if self.done == self.total:
            sys.stderr.write("\n")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from bench.machine import detect_device

    device = detect_device() if args.device == "auto" else args.device
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before any kernel is defined
    if device == "npu":
        detect_device()  # imports torch_npu so that torch.npu exists

    import torch

    from ascend_kvc.workloads import make_workload
    from bench.environment import library_environment
    from bench.machine import machine_line, measure_bandwidth
    from bench.report import format_table, write_csv, write_json, write_plot, write_report

    cases = _parse_cases(args.cases or (["official"] if device != "cpu" else ["small"]))
    routes = _routes(args, device)
    if args.shuffle or (device == "cpu" and not args.contiguous):
        layouts = ["shuffled"]  # on CPU one layout by default: the interpreter is slow
    elif args.contiguous:
        layouts = ["contiguous"]
    else:
        layouts = ["contiguous", "shuffled"]
    wants_report = args.report is not None or not (args.no_report or args.csv or args.json or args.plot)

    info = library_environment(device)
    info["command"] = "python -m bench " + " ".join(sys.argv[1:] if argv is None else argv)
    info["ascend_programs"] = _ascend_programs(device)
    time_fn = make_timer(device)
    info.update(measure_bandwidth(device, time_fn))
    print(machine_line(info))
    print(f"measured read bandwidth {info['read_gbs']:.1f} GB/s ({info['bandwidth_how']}), "
          f"copy {info['copy_gbs']:.1f} GB/s (read + written)")
    if "note" in info:
        print(info["note"])
    sys.stdout.flush()

    progress = Progress(len(cases) * len(layouts) * len(routes), not args.no_progress)
    kernels_every = args.kernels == "every" or (args.kernels == "auto" and device != "npu")
    profiled: set[tuple[int, str]] = set()
    rows = []
    for r, t, c in cases:
        for layout in layouts:
            w = make_workload(r, t, c, block_size=args.block_size, shuffle=layout == "shuffled",
                              nonzero_cache=layout == "shuffled" or args.inplace, seed=args.seed, device=device)
            profile_kernels = kernels_every or (c, layout) not in profiled
            profiled.add((c, layout))
            rows += measure_case(w, layout, routes, device, info, time_fn, args, progress, profile_kernels)
            if args.csv:  # after every case, so an interrupted run keeps what it measured
                write_csv(args.csv, rows)
            del w
            if device == "cuda":
                torch.cuda.empty_cache()

    _add_speedups(rows)
    print(format_table(rows, device))
    failures = [r for r in rows if r["check"] != "ok"]
    for r in failures:
        print(f"{r['check']}: {r['case']} {r['layout']} {r['route']}: {r['check_detail']}")
    if args.csv:
        write_csv(args.csv, rows)
    if args.json:
        write_json(args.json, info, rows)
    if args.plot:
        write_plot(args.plot, info, rows)
    if wants_report:
        path = write_report(report_folder(args.report or AUTO_REPORT, info), info, rows, info["command"])
        print(f"report: {path}")
    return 1 if failures else 0


def measure_case(w, layout: str, routes: list[str], device: str, info: dict, time_fn, args, progress,
                 profile_kernels: bool = True) -> list[dict]:
    """Oracle check, then (only if it passed) time, kernels, framework ops and host time, per route.

    ``profile_kernels=False`` leaves the device-kernel count and the device time out (None) for
    these rows.
    """
    import torch

    from ascend_kvc import c128_256_512_compress
    from ascend_kvc.oracle import check_cache, compute_truth
    from bench.launches import count_device_kernels, count_framework_ops, host_us_per_call
    from bench.machine import synchronize

    inplace = w.tags["nonzero_cache"]
    checked = w.checked_args()
    truth = compute_truth(checked)
    before = w.kv_cache.clone() if inplace else torch.zeros_like(w.kv_cache)
    rows = []
    for route in routes:
        row = {"case": w.name, "layout": layout, "route": route, "num_outputs": w.num_outputs,
               "bytes": w.bytes_to_move()}
        row["floor_ms"] = row["bytes"] / info["read_gbs"] / 1e6
        out = w.kv_cache.clone() if inplace else None
        try:
            got = c128_256_512_compress(*w.args(), out=out, route=route)
            synchronize(device)
            report = check_cache(checked, got, before, truth)
            row["check"] = "ok" if report.ok else "FAIL"
            row["check_detail"] = str(report)
            row["ambiguous_differences"] = report.ambiguous_differences
        except Exception as exc:  # reported in the table, never timed
            row["check"] = "ERROR"
            row["check_detail"] = f"{type(exc).__name__}: {exc}"
        if row["check"] == "ok":
            def call(out=out, route=route):
                return c128_256_512_compress(*w.args(), out=out, route=route, validate=False)

            row.update(time_fn(call))
            row["x_floor"] = row["ms"] / row["floor_ms"]
            row["gbs"] = row["bytes"] / row["ms"] / 1e6
            row["pct_read_bw"] = 100 * row["gbs"] / info["read_gbs"]
            if device == "cuda" and route in GRAPH_ROUTES:
                row["graph_ms"] = time_graph(call, time_fn)
                row["graph_x_floor"] = row["graph_ms"] / row["floor_ms"]
            # Launch costs with ``out`` given (what an engine writing into its cache pays).
            host_out = out if out is not None else w.kv_cache.clone()

            def host_call(route=route, host_out=host_out):
                return c128_256_512_compress(*w.args(), out=host_out, route=route, validate=False)

            if device == "cpu":  # no asynchrony: the timed calls are the host time
                row["host_us"] = row["ms"] * 1e3
            else:
                row["host_us"] = host_us_per_call(host_call, lambda: synchronize(device), args.host_calls)
            if profile_kernels:
                counted = count_device_kernels(host_call, device)
                row.update(kernels=counted["kernels"], copies=counted["copies"], kernels_how=counted["how"],
                           device_ms=counted["device_ms"], device_how=counted["device_how"])
            row.update(count_framework_ops(host_call, device))
        rows.append(row)
        progress.step(f"{w.name} {layout} {route}")
    return rows


def _add_speedups(rows: list[dict]) -> None:
    base = {}
    for r in rows:
        if "ms" in r and r["route"] in ("reference", "ascend:pre-gather"):
            base[(r["case"], r["layout"], r["route"])] = r["ms"]
    for r in rows:
        if "ms" not in r:
            continue
        ref = base.get((r["case"], r["layout"], "reference"))
        pre = base.get((r["case"], r["layout"], "ascend:pre-gather"))
        r["x_ref"] = ref / r["ms"] if ref else None
        r["x_pregather"] = pre / r["ms"] if pre else None
