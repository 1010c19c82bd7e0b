"""Side by side with another implementation of the operator, on the official cases:

    python -m bench.versus [PATH] [--name NAME] [--variant LABEL=FN,FN ...] [--variant-true LABEL=FN,FN ...]
                           [--routes gpgpu,ascend,ascend:fused] [--shuffled] [--json FILE]

PATH is a Python file defining ``c128_256_512_compress`` with the operator's 12 positional
arguments (a published competition entry, say; it is loaded from where it lies and never copied
here). ``--variant generic=_use_fast_path`` adds a run of the same file with the named module
functions made to return False, ``--variant-true`` made to return True (to force a code path the
file picks by itself); ``--variant-tag ascend="npu ascend910b"`` makes its ``_backend_tag()``
return that device name, for a file that picks its paths by the device's name (the path it
would take on an NPU). ``--routes`` names our routes
to run (``ours:<route>`` in the output); ``ASCEND_KVC_VECTOR_CORES`` in the environment sizes
the Ascend routes' grids as for that many vector cores.

Every case uses contiguous block tables and a zeroed cache, which is what such entries assume;
``--shuffled`` also runs our routes on a shuffled table over a non-zero cache (``@shuffled``).
Every implementation's bytes are checked against ``ascend_kvc.oracle`` before it is timed.
For scale, each case also times a plain ``torch.sum`` over as many bytes as the floor counts (the
same graph replay and flush): what any kernel reading those bytes pays at that size. Times, per
implementation: CUDA-graph replay and eager calls (``triton.testing.do_bench`` medians,
L2 flushed between calls, as ``python -m bench`` does), host microseconds per call (median of 300
calls queued without a sync, and of 300 calls each issued to an idle GPU: ``host_overhead.host_us``)
and device kernels per call (``torch.profiler``, once every pass's host time is taken: a profiler
session slows later calls' host time on a GPU).

``--passes N`` (default 3) measures the eager and host times N times, each pass a sweep over
every case with the workloads built again and the bytes checked again, the implementations in a
rotated order; each time reported is the median of the passes' medians, and the JSON keeps every
pass. A shared machine has slow stretches that last longer than one case's measurement; passes
a sweep apart keep one stretch from setting a case's figure, and the order keeps it from
landing on one implementation only. Graph replay, which the host does not pace, is timed once.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics

import torch

from ascend_kvc import c128_256_512_compress
from ascend_kvc.oracle import check_cache, compute_truth
from ascend_kvc.workloads import OFFICIAL_CASES, make_workload
from bench.host_overhead import host_us
from bench.launches import count_device_kernels
from bench.machine import machine_info, machine_line, measure_bandwidth
from bench.sweep_gpgpu import graph_ms, time_ms


def _load(path: str):
    spec = importlib.util.spec_from_file_location("bench_versus_rival", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _with_value(module, names: list[str], value: bool):
    def run(*args):
        saved = {n: getattr(module, n) for n in names}
        for n in names:
            setattr(module, n, lambda *a, **k: value)
        try:
            return module.c128_256_512_compress(*args)
        finally:
            for n, f in saved.items():
                setattr(module, n, f)
    return run


def _workload(case: tuple[int, int, int], shuffled: bool):
    """One case's workload, the same in every pass: a shuffled table comes with a non-zero cache."""
    return make_workload(*case, shuffle=shuffled, nonzero_cache=shuffled, seed=3, device="cuda")


def _caller(name: str, fn, args, out):
    """One call of implementation ``name`` (ours when ``fn`` is None) writing ``out`` in place."""
    if fn is None:
        route = name.split(":", 1)[1]
        return lambda: c128_256_512_compress(*args[:8], out, *args[9:], out=out, route=route, validate=False)
    return lambda: fn(*args[:8], out, *args[9:])


def _host_paced(row: dict, call) -> None:
    """Append one pass's eager and host medians to ``row``."""
    row.setdefault("eager_passes", []).append(1e3 * time_ms(call))
    row.setdefault("host_passes", []).append(statistics.median(host_us(call)))
    row.setdefault("host_idle_passes", []).append(statistics.median(host_us(call, idle=True)))


EXAMPLES = """\
examples:
  python -m bench.versus --routes gpgpu,ascend
      our routes alone, on the official cases
  python -m bench.versus ../entry/solution.py --name entry --variant generic=_use_fast_path --json versus.json
      a published entry next to ours, and the same entry with its fast path turned off
"""


def build_parser() -> argparse.ArgumentParser:
    from bench.cli import HelpFormatter

    p = argparse.ArgumentParser(prog="python -m bench.versus", formatter_class=HelpFormatter, epilog=EXAMPLES,
                                description="Side by side with another implementation of the operator, on the "
                                            "official cases, on a CUDA GPU: bytes checked against the oracle, then "
                                            "graph replay, eager and host times and kernels per call.")
    p.add_argument("path", nargs="?",
                   help="a Python file defining c128_256_512_compress with the operator's 12 positional arguments "
                        "(default: our routes only)")
    p.add_argument("--name", default="rival", help="what PATH's rows are called")
    p.add_argument("--variant", action="append", default=[], metavar="LABEL=FN,FN",
                   help="also run PATH with these module functions made to return False (repeatable)")
    p.add_argument("--variant-true", action="append", default=[], metavar="LABEL=FN,FN",
                   help="also run PATH with these module functions made to return True (repeatable)")
    p.add_argument("--variant-tag", action="append", default=[], metavar="LABEL=TAG",
                   help="a run of PATH with its _backend_tag() made to return TAG (the device name it picks paths by)")
    p.add_argument("--no-default", action="store_true", help="run PATH's variants only, not its own choice")
    p.add_argument("--routes", default="gpgpu", help="our routes, comma-separated")
    p.add_argument("--shuffled", action="store_true", help="also run our routes on shuffled tables")
    p.add_argument("--tokens", type=int, nargs="*", help="only cases with these total token counts (default: all)")
    p.add_argument("--passes", type=int, default=3,
                   help="sweeps over every case that time eager and host calls (the median of them is reported)")
    p.add_argument("--json", metavar="PATH", help="also write the machine facts and every row here")
    return p


def _ok_rows(rows: list[dict], case_name: str, shuffled: bool) -> list[dict]:
    """The rows of case ``case_name`` on one block-table layout whose bytes are still right, in order."""
    return [r for r in rows if r["case"] == case_name and r["ok"] and r["impl"].endswith("@shuffled") == shuffled]


def main(argv: list[str] | None = None) -> int:
    from bench.cli import check_route_or_exit, require_cuda_or_exit

    p = build_parser()
    a = p.parse_args(argv)
    if a.passes < 1:
        p.error("--passes must be >= 1")
    check_route_or_exit(p, "--routes", a.routes)
    for flag, values in (("--variant", a.variant), ("--variant-true", a.variant_true),
                         ("--variant-tag", a.variant_tag)):
        for v in values:
            label, _, rest = v.partition("=")
            if not label or not rest:
                p.error(f"{flag}: expected LABEL=..., got {v!r}")
    if a.path is not None and not os.path.isfile(a.path):
        p.error(f"path: no file {a.path!r}")
    if (a.variant or a.variant_true or a.variant_tag or a.no_default) and a.path is None:
        p.error("--variant, --variant-true, --variant-tag and --no-default need PATH")
    require_cuda_or_exit(p)
    ours = [f"ours:{r}" for r in a.routes.split(",")]
    impls = {name: None for name in ours}
    if a.path:
        rival = _load(a.path)
        if not a.no_default:
            impls[a.name] = rival.c128_256_512_compress
        for flag, value in ((a.variant, False), (a.variant_true, True)):
            for v in flag:
                label, names = v.split("=", 1)
                impls[f"{a.name}-{label}"] = _with_value(rival, names.split(","), value)
        for v in a.variant_tag:
            label, tag = v.split("=", 1)
            impls[f"{a.name}-{label}"] = _with_value(rival, ["_backend_tag"], tag.lower())
    layouts = [False, True] if a.shuffled else [False]

    info = machine_info("cuda")
    info.update(measure_bandwidth("cuda", lambda fn: {"ms": time_ms(fn)}))
    print(machine_line(info))
    print(f"read {info['read_gbs']:.0f} GB/s; contiguous block tables, zeroed cache", flush=True)
    rows = []
    runs = [(c, s) for c in OFFICIAL_CASES for s in layouts if not a.tokens or c[1] in a.tokens]
    truths = {}
    for case, shuffled in runs:
        w = _workload(case, shuffled)
        checked = w.checked_args()
        truth = truths[case, shuffled] = compute_truth(checked)
        floor_us = w.bytes_to_move() / info["read_gbs"] / 1e3
        zero = w.kv_cache.clone()
        args = w.args()
        plain = torch.randn(w.bytes_to_move() // 4, device="cuda")  # a read of the same bytes, for scale
        read_us = 1e3 * graph_ms(lambda: plain.sum())
        del plain
        print(f"{w.name}: floor {floor_us:.1f} us; torch.sum over the same bytes, graph replay: {read_us:.1f} us "
              f"({read_us / floor_us:.2f}x floor)", flush=True)
        for name, fn in impls.items():
            if shuffled and fn is not None:
                continue  # another implementation runs on the layout it assumes only
            out = zero.clone()
            call = _caller(name, fn, args, out)
            got = call()
            torch.cuda.synchronize()
            row = {"case": w.name, "impl": name + ("@shuffled" if shuffled else ""),
                   "ok": check_cache(checked, got, zero, truth).ok, "floor_us": floor_us, "plain_read_us": read_us}
            if row["ok"]:
                row["graph_us"] = 1e3 * graph_ms(call)
                _host_paced(row, call)
            rows.append(row)
            print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()
                           if not k.endswith("_passes")) + (
                f" eager_us={row['eager_passes'][0]:.1f} host_us={row['host_passes'][0]:.1f}" if row["ok"] else ""),
                flush=True)
        del w, checked, truth, zero, args
        torch.cuda.empty_cache()
    for k in range(1, a.passes):  # the eager and host times again, a sweep later, in another order
        for case, shuffled in runs:
            w = _workload(case, shuffled)  # the first pass's workload again: its truth still holds
            checked, zero, args = w.checked_args(), w.kv_cache.clone(), w.args()
            mine = _ok_rows(rows, w.name, shuffled)
            for row in mine[k % len(mine):] + mine[:k % len(mine)] if mine else []:
                name = row["impl"].removesuffix("@shuffled")
                out = zero.clone()
                call = _caller(name, impls[name], args, out)
                got = call()
                torch.cuda.synchronize()
                if not check_cache(checked, got, zero, truths[case, shuffled]).ok:
                    row["ok"] = False  # never reported: the bytes of a later pass were wrong
                    continue
                _host_paced(row, call)
            print(f"pass {k + 1}: {w.name}{' shuffled' if shuffled else ''} " + " ".join(
                f"{r['impl']}={r['eager_passes'][-1]:.1f}/{r['host_passes'][-1]:.1f}" for r in mine if r["ok"]),
                flush=True)
            del w, checked, zero, args
            torch.cuda.empty_cache()
    # The profiler last: on a GPU every call after a profiler session took 1.5-3 µs more host time
    # (bench/RESULTS.md, "What the bench's own harness does"), so no host time follows a count.
    for case, shuffled in runs:
        w = _workload(case, shuffled)
        zero, args = w.kv_cache.clone(), w.args()
        for row in _ok_rows(rows, w.name, shuffled):
            name = row["impl"].removesuffix("@shuffled")
            call = _caller(name, impls[name], args, zero.clone())
            row["kernels"] = count_device_kernels(call, "cuda", warmup=True)["kernels"]
        del w, zero, args
        torch.cuda.empty_cache()
    for row in rows:
        if row["ok"]:
            for metric in ("eager", "host", "host_idle"):
                row[f"{metric}_us"] = statistics.median(row[f"{metric}_passes"])

    print("\n| case | impl | ok | graph us (x floor) | plain read us | eager us | host us queued · idle | kernels |"
          "\n|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["ok"]:
            print(f"| {r['case']} | {r['impl']} | yes | {r['graph_us']:.1f} ({r['graph_us'] / r['floor_us']:.2f}x) "
                  f"| {r['plain_read_us']:.1f} | {r['eager_us']:.1f} | {r['host_us']:.1f} · {r['host_idle_us']:.1f} "
                  f"| {r['kernels']} |")
        else:
            print(f"| {r['case']} | {r['impl']} | NO | | | | |")
    print()
    names = sorted({r["impl"] for r in rows}, key=[r["impl"] for r in rows].index)
    for mine in [n for n in names if n.startswith("ours:")]:
        for other in [n for n in names if n != mine]:
            for metric in ("graph_us", "eager_us", "host_us", "host_idle_us"):
                ratios = []
                for r in rows:
                    o = next((x for x in rows if x["case"] == r["case"] and x["impl"] == other), None)
                    if r["impl"] == mine and r["ok"] and o and o["ok"]:
                        ratios.append(o[metric] / r[metric])
                if ratios:
                    gm = math.exp(sum(map(math.log, ratios)) / len(ratios))
                    print(f"{metric}: {other} / {mine} over {len(ratios)} cases: geomean {gm:.2f}, "
                          f"min {min(ratios):.2f}, max {max(ratios):.2f}")
    for mine in [n for n in names if n.startswith("ours:")]:
        # Bytes per graph-replay microsecond against the best case of the same C: no case starves cores.
        for C in sorted({r["case"].rsplit("-C", 1)[1] for r in rows}):
            mine_rows = [r for r in rows if r["impl"] == mine and r["ok"] and r["case"].endswith(f"-C{C}")]
            if mine_rows:
                best = max(r["floor_us"] / r["graph_us"] for r in mine_rows)
                rel = {r["case"]: round(r["floor_us"] / r["graph_us"] / best, 2) for r in mine_rows}
                print(f"rate / best rate, {mine}, C={C}: {rel}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": info, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
