"""Tile sweep for the gpgpu route on the current GPU: ``python -m bench.sweep_gpgpu``.

For each official case (shuffled block table, in-place) it checks every tile set against the
oracle, times it (median, do_bench), and prints the floor (bytes that must move / measured read
bandwidth), the best tile set per case and one tile set's worst ratio to the floor. It also times
the chosen tiles eagerly and as a CUDA-graph replay, which shows the launch overhead of the
small cases. Results feed ``gpgpu_fallback/tuning.py`` by hand.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time

import torch
import triton.testing

from ascend_kvc import c128_256_512_compress
from ascend_kvc.device import device_kind
from ascend_kvc.oracle import check_cache, compute_truth
from ascend_kvc.workloads import OFFICIAL_CASES, make_workload
from bench.machine import machine_info, machine_line, measure_bandwidth
from gpgpu_fallback import tuning


def _time(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])[0]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    p.add_argument("--quick", action="store_true", help="fewer tile sets")
    p.add_argument("--big", action="store_true", help="only the 131072-token cases")
    p.add_argument("--tiles", nargs="+", metavar="D,NB,WARPS,PPU,STAGES",
                   help="explicit tile sets instead of the built-in grid")
    a = p.parse_args()
    info = machine_info("cuda")
    info.update(measure_bandwidth("cuda", lambda fn: {"ms": _time(fn)}))
    print(machine_line(info))
    print(f"read {info['read_gbs']:.0f} GB/s, copy {info['copy_gbs']:.0f} GB/s")
    kind = device_kind(torch.device("cuda"))
    default = tuning.tiles_for(kind)
    # (block_d, blocks_per_step, warps, programs_per_unit, stages)
    # 8 warps per program measured 2-4x slower on an H200; num_stages 1 vs 3 within noise.
    grid = list(itertools.product([64, 128, 256], [2, 4, 8], [4], [8], [3]))
    if a.quick:
        grid = list(itertools.product([64, 128], [4, 8], [4], [8], [3]))
    if a.tiles:
        grid = [tuple(int(x) for x in t.split(",")) for t in a.tiles]
    results = []
    cases = [c for c in OFFICIAL_CASES if c[1] == 131072] if a.big else OFFICIAL_CASES
    for case in cases:
        w = make_workload(*case, shuffle=True, nonzero_cache=True, seed=1, device="cuda")
        checked = w.checked_args()
        truth = compute_truth(checked)
        floor_ms = w.bytes_to_move() / info["read_gbs"] / 1e6
        out = w.kv_cache.clone()
        per_case = []
        for bd, nb, warps, ppu, stages in grid:
            tuning.TILES[kind] = tuning.GpgpuTiles(block_d=bd, blocks_per_step=nb, gather_warps=warps,
                                                   gather_stages=stages, finalize_warps=4,
                                                   programs_per_unit=ppu, max_splits=16)
            out.copy_(w.kv_cache)
            c128_256_512_compress(*w.args(), out=out, route="gpgpu")
            report = check_cache(checked, out, w.kv_cache, truth)
            ok = report.ok
            if not ok:
                print(f"  {w.name} tiles {[bd, nb, warps, ppu, stages]}: {report} {report.notes[:2]}", flush=True)
            ms = _time(lambda: c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)) if ok else None
            per_case.append({"case": w.name, "tiles": [bd, nb, warps, ppu, stages], "ok": ok, "ms": ms,
                             "floor_ms": floor_ms})
        tuning.TILES[kind] = default
        passing = [r for r in per_case if r["ok"]]
        best = min(passing, key=lambda r: r["ms"]) if passing else {"tiles": None, "ms": float("nan")}
        # eager vs CUDA graph with the default tiles
        c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)
        eager = _time(lambda: c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False))
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)
        graph = _time(g.replay)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(200):  # host throughput: the GPU work is queued, never waited for
            c128_256_512_compress(*w.args(), out=out, route="gpgpu", validate=False)
        host_us = (time.perf_counter() - t) / 200 * 1e6
        torch.cuda.synchronize()
        bad = [r["tiles"] for r in per_case if not r["ok"]]
        print(f"{w.name}: floor {floor_ms:.4f} ms | best {best['tiles']} {best['ms']:.4f} ms "
              f"({best['ms'] / floor_ms:.2f}x floor) | default eager {eager:.4f} ms ({eager / floor_ms:.2f}x), "
              f"graph {graph:.4f} ms ({graph / floor_ms:.2f}x), host {host_us:.0f} us/call" + (f" | FAILED {bad}" if bad else ""), flush=True)
        results += per_case
        results.append({"case": w.name, "default_eager_ms": eager, "default_graph_ms": graph, "floor_ms": floor_ms,
                        "host_us_per_call": host_us})
        del w, checked, truth, out
        torch.cuda.empty_cache()
    # One tile set for all cases: the one whose worst ratio to the floor is smallest.
    sets = {}
    for r in results:
        if "tiles" in r:
            sets.setdefault(tuple(r["tiles"]), []).append(r["ms"] / r["floor_ms"] if r["ok"] else float("inf"))
    ranked = sorted(sets.items(), key=lambda kv: (max(kv[1]), sum(kv[1])))
    for tiles, ratios in ranked[:5]:
        print(f"tiles {list(tiles)}: worst {max(ratios):.2f}x floor, per case "
              + " ".join(f"{r:.2f}" for r in ratios))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": info, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
